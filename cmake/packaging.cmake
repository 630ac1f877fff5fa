# Debian packages: `cpack -G DEB` in a build configured with -DCMAKE_INSTALL_PREFIX=/usr
# -DBUILD_SHARED_LIBS=ON (scripts/build-debs.sh does it) gives
#   libmixprec      the shared library (libmixprec.so.MAJOR.MINOR) and the documents
#   libmixprec-dev  headers, the libmixprec.so link, the CMake package and mixprec.pc
#   mixprec         the command line
#   python3-mixprec the Python module (when cmake/python.cmake builds it)
# The dependencies on Debian's packages (libdnnl2, zlib1g, libgomp1, libstdc++6, libc6...) are
# computed from the binaries by dpkg-shlibdeps (package dpkg-dev), so they follow what is linked.
set(CPACK_PACKAGE_NAME mixprec)
set(CPACK_PACKAGE_VENDOR "mixprec authors")
# The project has no public address yet: the maintainer field names a reserved, never-delivered
# domain (.invalid, RFC 2606) and the packages carry no Homepage field.
set(CPACK_PACKAGE_CONTACT "mixprec authors <maintainers@mixprec.invalid>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_GENERATOR DEB)
# The install prefix is the configured one (/usr for a .deb) and the staging directory comes
# through DESTDIR: the install-time mixprec.pc then names the real prefix.
set(CPACK_SET_DESTDIR ON)
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})

set(CPACK_COMPONENTS_ALL runtime development cli)
if(MIXPREC_PYTHON_BUILT)
  list(APPEND CPACK_COMPONENTS_ALL python)
endif()
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# dpkg-shlibdeps must find libmixprec.so.* (not installed on the build machine) for the CLI.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${PROJECT_BINARY_DIR})
set(_deb_version "${PROJECT_VERSION}-1")

set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME libmixprec)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_RUNTIME_DESCRIPTION
  "The shared library. float16/bfloat16 compute with float32 master weights, dynamic loss scaling and a Keras-shaped
 API (Policy, Dense, Model, fit, LossScaleOptimizer), on CPUs through oneDNN.")

set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_NAME libmixprec-dev)
set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_SECTION libdevel)
# zlib1g-dev: mixprec.pc names zlib in Requires.private, which pkg-config reads for --cflags too.
# nlohmann-json3-dev: a public header includes <nlohmann/json_fwd.hpp> (mixprecConfig.cmake and
# mixprec.pc require it).
set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_DEPENDS
    "libmixprec (= ${_deb_version}), zlib1g-dev, nlohmann-json3-dev")
set(CPACK_DEBIAN_DEVELOPMENT_DESCRIPTION
  "Development files: headers, CMake package (find_package(mixprec)) and pkg-config file of mixprec.")

set(CPACK_DEBIAN_CLI_PACKAGE_NAME mixprec)
set(CPACK_DEBIAN_CLI_PACKAGE_SECTION science)
set(CPACK_DEBIAN_CLI_PACKAGE_DEPENDS "libmixprec (= ${_deb_version})")
set(CPACK_DEBIAN_CLI_DESCRIPTION
  "The command line: mixprec info/train/compare/bench: train and compare models under float32, mixed_float16 and
 mixed_bfloat16 without writing C++.")

# The extension is built for one Python minor version (its ABI): the package requires that one.
# dpkg-shlibdeps adds libmixprec and the C++ runtime from the extension's links.
if(MIXPREC_PYTHON_BUILT)
  math(EXPR _py_next_minor "${Python3_VERSION_MINOR} + 1")
  set(CPACK_DEBIAN_PYTHON_PACKAGE_NAME python3-mixprec)
  set(CPACK_DEBIAN_PYTHON_PACKAGE_SECTION python)
  set(CPACK_DEBIAN_PYTHON_PACKAGE_DEPENDS
      "libmixprec (= ${_deb_version}), python3 (>= ${Python3_VERSION_MAJOR}.${Python3_VERSION_MINOR}), python3 (<< ${Python3_VERSION_MAJOR}.${_py_next_minor}), python3-numpy")
  set(CPACK_DEBIAN_PYTHON_DESCRIPTION
    "The Python module: import mixprec as mp; the Keras API (mp.layers, mp.Model, fit, mp.mixed_precision.LossScaleOptimizer,
 mp.GradientTape) over the C++ library, with NumPy and DLPack arrays passed without copies.")
endif()

if(NOT BUILD_SHARED_LIBS)
  message(STATUS "mixprec: cpack's .debs are meant for -DBUILD_SHARED_LIBS=ON (this build is static)")
endif()
include(CPack)
