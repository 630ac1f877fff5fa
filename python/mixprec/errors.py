"""mixprec's exceptions. Each derives from mixprec.errors.Error and from the built-in exception a
Python program catches for that kind of problem, and carries the C++ library's message:

- ShapeError, ValueError, DataError: ValueError
- DTypeError: TypeError
- IOError: OSError
- DeviceError, AutogradError, DistributedError: RuntimeError (through Error)
"""

from ._mixprec import (  # noqa: A004 (ValueError and IOError are mixprec's, deriving from the built-ins)
    AutogradError,
    DataError,
    DeviceError,
    DistributedError,
    DTypeError,
    Error,
    IOError,
    ShapeError,
    ValueError,
)

__all__ = ["AutogradError", "DataError", "DeviceError", "DistributedError", "DTypeError", "Error",
           "IOError", "ShapeError", "ValueError"]
