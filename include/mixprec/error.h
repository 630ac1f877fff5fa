// Library errors. Every error the library raises derives from mixprec::Error; the message says
// what was expected, what was received and, where one exists, a likely fix.
#pragma once

#include <stdexcept>
#include <string>

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// Incompatible or wrong shapes, including out-of-range axes.
class ShapeError : public Error {
 public:
  using Error::Error;
};

// Wrong or mismatched dtypes, and dtypes an op does not support.
class DTypeError : public Error {
 public:
  using Error::Error;
};

// Bad argument values (negative sizes, unknown names, out-of-range indices).
class ValueError : public Error {
 public:
  using Error::Error;
};

// Device problems: a device that is not available, mixed devices in one op, out of memory.
class DeviceError : public Error {
 public:
  using Error::Error;
};

// Misuse of the autograd machinery (backward on a non-scalar without a gradient, ...).
class AutogradError : public Error {
 public:
  using Error::Error;
};

// Files that cannot be read or written, or whose contents are malformed (a truncated checkpoint, a
// bad header); the message names the file and the problem.
class IOError : public Error {
 public:
  using Error::Error;
};

}  // namespace mixprec

#pragma GCC visibility pop
