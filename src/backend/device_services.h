// Device services of one device kind: pinned staging and asynchronous upload, event timers, memory
// statistics, stream ordering.
#pragma once

namespace mixprec {

struct DeviceServices {
  // Entries are added as the ops move behind the interface (issue 10).
  int unused = 0;
};

}  // namespace mixprec
