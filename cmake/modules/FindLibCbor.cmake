# SPDX-License-Identifier: Apache-2.0
# Finds libcbor (Debian's libcbor-dev) and defines the imported target LibCbor::cbor. Installed
# with polybus's CMake package, as FindSnappy.cmake is.
find_path(LibCbor_INCLUDE_DIR cbor.h)
find_library(LibCbor_LIBRARY cbor)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(LibCbor REQUIRED_VARS LibCbor_LIBRARY LibCbor_INCLUDE_DIR)
if(LibCbor_FOUND AND NOT TARGET LibCbor::cbor)
  add_library(LibCbor::cbor UNKNOWN IMPORTED)
  set_target_properties(LibCbor::cbor PROPERTIES IMPORTED_LOCATION "${LibCbor_LIBRARY}"
                                                 INTERFACE_INCLUDE_DIRECTORIES "${LibCbor_INCLUDE_DIR}")
endif()
mark_as_advanced(LibCbor_INCLUDE_DIR LibCbor_LIBRARY)
