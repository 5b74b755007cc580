# SPDX-License-Identifier: Apache-2.0
# Debian packages and tarballs (cpack -G DEB, cpack -G TGZ), one per install component:
#
#   libpolybus<ABI>  runtime      the shared libraries (libpolybus_*.so.<ABI>)
#   libpolybus-dev   development  headers, CMake package, pkg-config file, the .so links, the
#                                 static archives and the in-process test brokers
#   polybus-tools    tools        the polybus command
#
# A build makes either static archives or shared libraries, so the packages take both a shared
# build and a static one: configure the shared build with POLYBUS_PACKAGE_STATIC_BUILD naming the
# static build's folder, build both, then run cpack in the shared build
# (tests/install/check_packages.sh does this, then installs the packages and builds against them).
set(POLYBUS_PACKAGE_STATIC_BUILD "" CACHE PATH
    "A static build of this source whose development component joins libpolybus-dev")
set(POLYBUS_PACKAGE_MAINTAINER "polybus maintainers <polybus@example.org>" CACHE STRING
    "The packages' Maintainer field")

set(CPACK_PACKAGE_NAME polybus)
set(CPACK_PACKAGE_VENDOR "the polybus authors")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "${POLYBUS_PACKAGE_MAINTAINER}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "C++17 client for NSQ, Figg, QuickIO and MemoDB behind one interface")
set(CPACK_STRIP_FILES ON)
set(CPACK_COMPONENTS_ALL runtime development tools)
# The static build is installed first, so that the shared build's files (the polybus command
# among them) are the ones packaged where both install one.
set(CPACK_INSTALL_CMAKE_PROJECTS "")
if(POLYBUS_PACKAGE_STATIC_BUILD)
  # A relative folder is taken from the source tree, as the presets' build/<preset> are.
  get_filename_component(static_build "${POLYBUS_PACKAGE_STATIC_BUILD}" ABSOLUTE
                         BASE_DIR "${PROJECT_SOURCE_DIR}")
  if(NOT EXISTS "${static_build}/CMakeCache.txt")
    message(FATAL_ERROR "POLYBUS_PACKAGE_STATIC_BUILD: ${static_build} is not a configured build")
  endif()
  list(APPEND CPACK_INSTALL_CMAKE_PROJECTS "${static_build};polybus;ALL;/")
endif()
list(APPEND CPACK_INSTALL_CMAKE_PROJECTS "${PROJECT_BINARY_DIR};polybus;ALL;/")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)

set(CPACK_ARCHIVE_COMPONENT_INSTALL ON)
set(CPACK_ARCHIVE_RUNTIME_FILE_NAME "libpolybus${POLYBUS_ABI_VERSION}-${PROJECT_VERSION}")
set(CPACK_ARCHIVE_DEVELOPMENT_FILE_NAME "libpolybus-dev-${PROJECT_VERSION}")
set(CPACK_ARCHIVE_TOOLS_FILE_NAME "polybus-tools-${PROJECT_VERSION}")

set(CPACK_DEB_COMPONENT_INSTALL ON)
# A component's DEPENDS (below) becomes the package's dependency at the exact version.
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SOURCE polybus)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# Depends on the system's libraries from dpkg-shlibdeps; libpolybus0 declares its own shlibs
# (and the ldconfig trigger), at the exact version: the ABI is 0, so any release may break it.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY "=")
# dpkg-shlibdeps runs in each package's staging folder: the tools find the libraries beside it,
# in the runtime package's (their dependency on it is libpolybus0 (= version)).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS "../runtime/usr/${CMAKE_INSTALL_LIBDIR}")

set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME "libpolybus${POLYBUS_ABI_VERSION}")
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION libs)
# dpkg runs ldconfig once after installing the libraries (Debian policy 8.1.1).
set(CPACK_DEBIAN_RUNTIME_PACKAGE_CONTROL_EXTRA ${PROJECT_SOURCE_DIR}/cmake/debian/triggers)
set(CPACK_COMPONENT_RUNTIME_DESCRIPTION
    "C++17 client for NSQ, Figg, QuickIO and MemoDB: shared libraries\n"
    "polybus speaks four messaging protocols behind one Publisher/Subscriber\n"
    "interface, so that an application changes broker by changing a URL.\n"
    "This package holds the shared libraries.")

set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_NAME libpolybus-dev)
set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_SECTION libdevel)
set(CPACK_COMPONENT_DEVELOPMENT_DEPENDS runtime)
# What the headers include (asio, OpenSSL) and what the static archives link.
set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_DEPENDS
    "libasio-dev, libssl-dev, libsnappy-dev, zlib1g-dev, libcbor-dev")
set(CPACK_COMPONENT_DEVELOPMENT_DESCRIPTION
    "C++17 client for NSQ, Figg, QuickIO and MemoDB: development files\n"
    "Headers, the CMake package (find_package(polybus)), the pkg-config file,\n"
    "static archives and the in-process brokers of every protocol, for\n"
    "integration tests.")

set(CPACK_DEBIAN_TOOLS_PACKAGE_NAME polybus-tools)
set(CPACK_DEBIAN_TOOLS_PACKAGE_SECTION net)
set(CPACK_COMPONENT_TOOLS_DEPENDS runtime)
set(CPACK_COMPONENT_TOOLS_DESCRIPTION
    "C++17 client for NSQ, Figg, QuickIO and MemoDB: the polybus command\n"
    "Publish, subscribe, request and serve on any of the four protocols;\n"
    "in-process brokers (polybus broker), a fault-injecting proxy and a\n"
    "benchmark that compares brokers.")

# Each package's /usr/share/doc/<package>: copyright and changelog.Debian.gz, as Debian policy
# asks of every package. Only in the packages (cpack installs component by component): a plain
# `cmake --install` to a prefix leaves them out.
set(POLYBUS_DEB_SOURCE polybus)
set(POLYBUS_DEB_VERSION "${PROJECT_VERSION}-${CPACK_DEBIAN_PACKAGE_RELEASE}")
string(TIMESTAMP POLYBUS_DEB_DATE "%a, %d %b %Y %H:%M:%S +0000" UTC)
configure_file(${PROJECT_SOURCE_DIR}/cmake/debian/changelog.in
               ${PROJECT_BINARY_DIR}/debian/changelog.Debian @ONLY)
find_program(POLYBUS_GZIP gzip)
if(POLYBUS_GZIP)
  execute_process(COMMAND ${POLYBUS_GZIP} -9nf ${PROJECT_BINARY_DIR}/debian/changelog.Debian)
  foreach(component IN ITEMS runtime development tools)
    string(TOUPPER ${component} upper)
    set(package ${CPACK_DEBIAN_${upper}_PACKAGE_NAME})
    install(FILES ${PROJECT_SOURCE_DIR}/cmake/debian/copyright
                  ${PROJECT_BINARY_DIR}/debian/changelog.Debian.gz
            DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/${package} COMPONENT ${component}
            EXCLUDE_FROM_ALL)
  endforeach()
endif()

include(CPack)
