// The extension module mixprec._mixprec; the package python/mixprec/ re-exports it under Keras's
// module names (mixprec.layers, mixprec.optimizers, ...).
#include "bindings.h"

PYBIND11_MODULE(_mixprec, m) {
  namespace mpy = mixprec::python;
  m.doc() =
      "mixprec's C++ core. Import the package instead: `import mixprec as mp` (mp.layers, "
      "mp.Model, mp.mixed_precision, ...).";
  m.attr("__version__") = mixprec::version();
  m.attr("built_with_cuda") = static_cast<bool>(MIXPREC_HAVE_CUDA);
  mpy::bind_errors(m);
  mpy::bind_tensor(m);
  mpy::bind_dlpack(m);
  mpy::bind_mixed_precision(m);
  mpy::bind_layers(m);
  mpy::bind_training(m);
  mpy::bind_callbacks(m);
  mpy::bind_models(m);
  mpy::bind_extras(m);
}
