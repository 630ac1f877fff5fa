// mixprec::version(): the library's own version, compiled in from the generated mixprec/version.h.
#include "mixprec/version.h"

namespace mixprec {

const char* version() noexcept { return MIXPREC_VERSION; }

}  // namespace mixprec
