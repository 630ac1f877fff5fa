# The Python module `mixprec` (python/): pybind11 bindings (python/src/*.cpp, the extension
# mixprec._mixprec) and the pure-Python package around them (python/mixprec/*.py, .pyi stubs).
#
# MIXPREC_PYTHON: AUTO (the default for the top-level project) builds the module when an
# interpreter with NumPy, its development headers (python3-dev), pybind11 (python3-pybind11) and
# <dlpack/dlpack.h> (libdlpack-dev) are found; ON requires them; OFF skips the module.
# The extension links the library as built (libmixprec.a, or libmixprec.so with
# BUILD_SHARED_LIBS=ON, as the .debs are). It is assembled with the package in
# <build>/python/mixprec, so `PYTHONPATH=<build>/python python3 -c "import mixprec"` works
# without installing; `cmake --install` puts it in MIXPREC_PYTHON_INSTALL_DIR (default: the
# interpreter's site-packages directory under the install prefix, below), as the component
# `python` (the python3-mixprec .deb of cmake/packaging.cmake).
set(MIXPREC_PYTHON ${_mixprec_python_default} CACHE STRING
  "Build the Python module: AUTO (when Python 3 with NumPy, its headers, pybind11 and DLPack are found), ON or OFF")
set_property(CACHE MIXPREC_PYTHON PROPERTY STRINGS AUTO ON OFF)
set(MIXPREC_PYTHON_BUILT OFF)

function(mixprec_python_missing what)
  if(MIXPREC_PYTHON STREQUAL "ON")
    message(FATAL_ERROR "MIXPREC_PYTHON=ON but ${what}; install python3-dev python3-numpy "
      "python3-pybind11 libdlpack-dev (scripts/install-deps.sh) or use -DMIXPREC_PYTHON=AUTO")
  endif()
  message(STATUS "mixprec: Python module not built: ${what}")
endfunction()

macro(mixprec_configure_python)
  # The module imports NumPy at run time: of the interpreters on PATH, take the first that has it
  # (a pyenv or virtualenv python3 ahead of Debian's may lack it). -DPython3_EXECUTABLE overrides.
  if(NOT Python3_EXECUTABLE)
    set(_mixprec_python_candidates)
    foreach(_name python3 python)
      find_program(_mixprec_py_${_name} NAMES ${_name} NO_CACHE)
      if(_mixprec_py_${_name})
        list(APPEND _mixprec_python_candidates ${_mixprec_py_${_name}})
      endif()
    endforeach()
    list(APPEND _mixprec_python_candidates /usr/bin/python3)
    foreach(_py IN LISTS _mixprec_python_candidates)
      if(EXISTS ${_py})
        execute_process(COMMAND ${_py} -c "import numpy" RESULT_VARIABLE _rc OUTPUT_QUIET ERROR_QUIET)
        if(_rc EQUAL 0)
          set(Python3_EXECUTABLE ${_py} CACHE FILEPATH "The Python interpreter of the module")
          break()
        endif()
      endif()
    endforeach()
  endif()
  find_package(Python3 COMPONENTS Interpreter Development.Module QUIET)
  # pybind11's own search then uses the same interpreter (FindPython mode).
  set(PYBIND11_FINDPYTHON ON)
  find_package(pybind11 CONFIG QUIET)
  find_path(MIXPREC_DLPACK_INCLUDE_DIR dlpack/dlpack.h)
  set(_numpy_rc 1)
  if(Python3_Interpreter_FOUND)
    execute_process(COMMAND ${Python3_EXECUTABLE} -c "import numpy" RESULT_VARIABLE _numpy_rc
      OUTPUT_QUIET ERROR_QUIET)
  endif()
  if(NOT Python3_Interpreter_FOUND OR NOT Python3_Development.Module_FOUND)
    mixprec_python_missing("no Python 3 interpreter with its development headers was found")
  elseif(NOT _numpy_rc EQUAL 0)
    mixprec_python_missing("${Python3_EXECUTABLE} cannot import numpy")
  elseif(NOT pybind11_FOUND)
    mixprec_python_missing("pybind11 was not found")
  elseif(NOT MIXPREC_DLPACK_INCLUDE_DIR)
    mixprec_python_missing("<dlpack/dlpack.h> was not found")
  else()
    set(MIXPREC_PYTHON_BUILT ON)
  endif()
endmacro()

if(NOT MIXPREC_PYTHON STREQUAL "OFF")
  mixprec_configure_python()
endif()

if(MIXPREC_PYTHON_BUILT)
  message(STATUS "mixprec: Python module for ${Python3_EXECUTABLE} (${Python3_VERSION}), "
    "pybind11 ${pybind11_VERSION}")
  set(MIXPREC_PYTHON_PACKAGE_DIR ${PROJECT_BINARY_DIR}/python/mixprec)
  file(GLOB MIXPREC_PYTHON_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/python/src/*.cpp)
  file(GLOB_RECURSE MIXPREC_PYTHON_FILES CONFIGURE_DEPENDS RELATIVE ${PROJECT_SOURCE_DIR}/python
    ${PROJECT_SOURCE_DIR}/python/mixprec/*.py ${PROJECT_SOURCE_DIR}/python/mixprec/*.pyi
    ${PROJECT_SOURCE_DIR}/python/mixprec/py.typed)

  # The pure-Python files, copied beside the extension whenever they change.
  set(_copied)
  foreach(_file IN LISTS MIXPREC_PYTHON_FILES)
    add_custom_command(OUTPUT ${PROJECT_BINARY_DIR}/python/${_file}
      COMMAND ${CMAKE_COMMAND} -E copy_if_different ${PROJECT_SOURCE_DIR}/python/${_file}
        ${PROJECT_BINARY_DIR}/python/${_file}
      DEPENDS ${PROJECT_SOURCE_DIR}/python/${_file} VERBATIM)
    list(APPEND _copied ${PROJECT_BINARY_DIR}/python/${_file})
  endforeach()
  add_custom_target(mixprec_python_files ALL DEPENDS ${_copied})

  pybind11_add_module(mixprec_python MODULE ${MIXPREC_PYTHON_SOURCES})
  add_dependencies(mixprec_python mixprec_python_files)
  target_link_libraries(mixprec_python PRIVATE mixprec)
  target_include_directories(mixprec_python PRIVATE ${MIXPREC_DLPACK_INCLUDE_DIR})
  target_compile_options(mixprec_python PRIVATE -Wall -Wextra)
  set_target_properties(mixprec_python PROPERTIES OUTPUT_NAME _mixprec
    LIBRARY_OUTPUT_DIRECTORY ${MIXPREC_PYTHON_PACKAGE_DIR})
  if(BUILD_SHARED_LIBS)
    # Installed outside the system directories, the extension finds libmixprec.so by its rpath
    # (none for a system directory: the .debs install under /usr).
    include(GNUInstallDirs)
    list(FIND CMAKE_CXX_IMPLICIT_LINK_DIRECTORIES ${CMAKE_INSTALL_FULL_LIBDIR} _system_libdir)
    if(_system_libdir EQUAL -1)
      set_target_properties(mixprec_python PROPERTIES INSTALL_RPATH ${CMAKE_INSTALL_FULL_LIBDIR})
    endif()
    set_target_properties(mixprec_python PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
  endif()

  # The interpreter's site-packages under the install prefix: lib/python3.X/site-packages, or
  # Debian's lib/python3.X/dist-packages (its python3 reads /usr/local/lib/python3.X/dist-packages,
  # so the default prefix /usr/local installs where `python3` finds it). Relative, so that
  # `cmake --install --prefix DIR` stays inside DIR; the .debs set lib/python3/dist-packages.
  if(NOT MIXPREC_PYTHON_INSTALL_DIR)
    execute_process(COMMAND ${Python3_EXECUTABLE} -c
      "import sysconfig; p = sysconfig.get_path('platlib', vars={'platbase': '/P', 'base': '/P'}); p = p[len('/P/'):]; print(p[len('local/'):] if p.startswith('local/') else p, end='')"
      OUTPUT_VARIABLE _site RESULT_VARIABLE _rc ERROR_QUIET)
    if(NOT _rc EQUAL 0 OR NOT _site)
      set(_site lib/python${Python3_VERSION_MAJOR}.${Python3_VERSION_MINOR}/site-packages)
    endif()
    set(MIXPREC_PYTHON_INSTALL_DIR ${_site} CACHE PATH
      "Where cmake --install puts the mixprec package (relative paths are under the install prefix)")
  endif()
  if(MIXPREC_INSTALL)
    install(TARGETS mixprec_python LIBRARY DESTINATION ${MIXPREC_PYTHON_INSTALL_DIR}/mixprec
      COMPONENT python)
    install(DIRECTORY python/mixprec/ DESTINATION ${MIXPREC_PYTHON_INSTALL_DIR}/mixprec
      COMPONENT python FILES_MATCHING PATTERN "*.py" PATTERN "*.pyi" PATTERN "py.typed"
      PATTERN "__pycache__" EXCLUDE)
  endif()

  # The C++ side of scripts/python-overhead.py (the same fit and add, timed in C++).
  if(MIXPREC_BUILD_BENCH)
    add_executable(mixprec_python_fit_timing ${PROJECT_SOURCE_DIR}/python/bench/fit_timing.cpp)
    target_link_libraries(mixprec_python_fit_timing PRIVATE mixprec)
  endif()

  # tests/python (pytest, label python: `make test` runs it; the sanitizer run's -L "unit|ops"
  # does not) and the guide's program in a short configuration.
  if(MIXPREC_BUILD_TESTS)
    set(_py_env "PYTHONPATH=${PROJECT_BINARY_DIR}/python" "OMP_WAIT_POLICY=passive"
      "PYTHONDONTWRITEBYTECODE=1" "MIXPREC_BUILD_DIR=${PROJECT_BINARY_DIR}")
    execute_process(COMMAND ${Python3_EXECUTABLE} -c "import pytest" RESULT_VARIABLE _pytest_rc
      OUTPUT_QUIET ERROR_QUIET)
    if(_pytest_rc EQUAL 0)
      add_test(NAME python_module
        COMMAND ${Python3_EXECUTABLE} -m pytest -q -rs -p no:cacheprovider
          ${PROJECT_SOURCE_DIR}/tests/python)
      set_tests_properties(python_module PROPERTIES LABELS python TIMEOUT 600
        ENVIRONMENT "${_py_env}")
    else()
      add_test(NAME python_module COMMAND sh -c
        "echo 'SKIPPED python_module: ${Python3_EXECUTABLE} has no pytest (install python3-pytest)'; exit 77")
      set_tests_properties(python_module PROPERTIES LABELS python SKIP_RETURN_CODE 77)
    endif()
    # Data-parallel fit from Python under mpirun (labels mpi and python, as tests/CMakeLists.txt's
    # mixprec_add_mpi_test registers the C++ ones; Open MPI kept on this machine's shared memory).
    if(MIXPREC_HAVE_MPI AND MPIEXEC_EXECUTABLE)
      set(_mpi_flags "")
      execute_process(COMMAND ${MPIEXEC_EXECUTABLE} --version OUTPUT_VARIABLE _mpi_version
        ERROR_QUIET)
      if(_mpi_version MATCHES "Open MPI|OpenRTE")
        set(_mpi_flags --oversubscribe --allow-run-as-root)
      endif()
      add_test(NAME python_distributed_fit
        COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 ${_mpi_flags}
          ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/tests/python/mpi_fit.py)
      set_tests_properties(python_distributed_fit PROPERTIES LABELS "mpi;python" TIMEOUT 120
        PROCESSORS 2 SKIP_RETURN_CODE 77
        ENVIRONMENT "${_py_env};OMPI_MCA_btl=self,vader;OMPI_MCA_btl_vader_single_copy_mechanism=none;OMPI_MCA_rmaps_base_oversubscribe=1;OMPI_MCA_hwloc_base_binding_policy=none;OMP_NUM_THREADS=1")
    endif()
    # The README's Python quick start, as it is (it writes its files into its working directory).
    file(MAKE_DIRECTORY ${PROJECT_BINARY_DIR}/python-quickstart)
    add_test(NAME python_quickstart_example
      COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/examples/python/quickstart.py
      WORKING_DIRECTORY ${PROJECT_BINARY_DIR}/python-quickstart)
    set_tests_properties(python_quickstart_example PROPERTIES LABELS python TIMEOUT 600
      PASS_REGULAR_EXPRESSION "test accuracy 0\\.[6-9]" ENVIRONMENT "${_py_env}")
    # A GPT on the fortune corpus from Python (uniform guessing over 257 bytes is a loss of 5.55).
    add_test(NAME python_gpt_example
      COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/examples/python/gpt_fortunes.py)
    set_tests_properties(python_gpt_example PROPERTIES LABELS python TIMEOUT 600
      PASS_REGULAR_EXPRESSION "validation loss ([0-3]\\.|4\\.[0-4])" ENVIRONMENT "${_py_env}")
    add_test(NAME python_guide_example
      COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/examples/python/mixed_precision_guide.py
        --epochs 2 --train-samples 8192 --batch-size 512)
    set_tests_properties(python_guide_example PROPERTIES LABELS python TIMEOUT 600
      ENVIRONMENT "${_py_env}")
  endif()
endif()
