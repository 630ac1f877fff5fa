# Imported targets for the two dependencies that have no usable CMake package on Debian:
#   mixprec::dnnl   oneDNN (Debian's dnnl config demands the OpenCL development files of its GPU
#                   runtime; the CPU engine needs none of that, so the header and library are
#                   found directly)
#   mixprec::cudnn  cuDNN, when MIXPREC_WITH_CUDNN is set (a CUDA build that found it)
#   mixprec::nccl   NCCL, when MIXPREC_WITH_NCCL is set (the CUDA toolkit's, or NCCL_ROOT)
# Used by the build (CMakeLists.txt) and by the installed package (mixprecConfig.cmake, where a
# static libmixprec needs them at link time). Sets MIXPREC_DEPENDENCY_MISSING to a message when
# one is not found; the includer decides what that means.
include_guard(GLOBAL)
set(MIXPREC_DEPENDENCY_MISSING "")

if(NOT TARGET mixprec::dnnl)
  find_path(DNNL_INCLUDE_DIR oneapi/dnnl/dnnl.hpp)
  find_library(DNNL_LIBRARY NAMES dnnl)
  if(DNNL_INCLUDE_DIR AND DNNL_LIBRARY)
    add_library(mixprec::dnnl INTERFACE IMPORTED GLOBAL)
    set_target_properties(mixprec::dnnl PROPERTIES
      INTERFACE_INCLUDE_DIRECTORIES "${DNNL_INCLUDE_DIR}" INTERFACE_LINK_LIBRARIES "${DNNL_LIBRARY}")
  else()
    set(MIXPREC_DEPENDENCY_MISSING "oneDNN (libdnnl, Debian: libdnnl-dev) was not found")
  endif()
endif()

if(MIXPREC_WITH_CUDNN AND NOT TARGET mixprec::cudnn)
  # CUDNN_ROOT: a cuDNN outside the toolkit. Debian/NVIDIA packages may ship only the versioned
  # libcudnn.so.9 (no development symlink). Found means the files exist (a CUDNN_INCLUDE_DIR or
  # CUDNN_LIBRARY given on the command line is checked too).
  find_path(CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDNN_ROOT} ${CUDAToolkit_INCLUDE_DIRS}
    PATH_SUFFIXES include include/x86_64-linux-gnu)
  find_library(CUDNN_LIBRARY NAMES cudnn libcudnn.so.9 HINTS ${CUDNN_ROOT} ${CUDAToolkit_LIBRARY_DIR}
    PATH_SUFFIXES lib lib64 lib/x86_64-linux-gnu)
  if(CUDNN_INCLUDE_DIR AND CUDNN_LIBRARY AND EXISTS "${CUDNN_INCLUDE_DIR}/cudnn.h"
     AND EXISTS "${CUDNN_LIBRARY}")
    add_library(mixprec::cudnn INTERFACE IMPORTED GLOBAL)
    set_target_properties(mixprec::cudnn PROPERTIES
      INTERFACE_INCLUDE_DIRECTORIES "${CUDNN_INCLUDE_DIR}" INTERFACE_LINK_LIBRARIES "${CUDNN_LIBRARY}")
  else()
    set(MIXPREC_DEPENDENCY_MISSING "cuDNN (libcudnn) was not found")
  endif()
endif()

if(MIXPREC_WITH_NCCL AND NOT TARGET mixprec::nccl)
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${NCCL_ROOT} ${CUDAToolkit_INCLUDE_DIRS}
    PATH_SUFFIXES include)
  find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS ${NCCL_ROOT} ${CUDAToolkit_LIBRARY_DIR}
    PATH_SUFFIXES lib lib64 lib/x86_64-linux-gnu)
  if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY AND EXISTS "${NCCL_INCLUDE_DIR}/nccl.h"
     AND EXISTS "${NCCL_LIBRARY}")
    add_library(mixprec::nccl INTERFACE IMPORTED GLOBAL)
    set_target_properties(mixprec::nccl PROPERTIES
      INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}" INTERFACE_LINK_LIBRARIES "${NCCL_LIBRARY}")
  else()
    set(MIXPREC_DEPENDENCY_MISSING "NCCL (libnccl) was not found")
  endif()
endif()
