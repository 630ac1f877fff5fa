// Devices, memory and synchronisation of one device kind (what core needs from a backend).
#pragma once

namespace mixprec {

struct DeviceRuntime {
  // Entries are added as the ops move behind the interface (issue 10).
  int unused = 0;
};

}  // namespace mixprec
