# SPDX-License-Identifier: Apache-2.0
# Finds Google's snappy (Debian's libsnappy-dev) and defines the imported target Snappy::snappy.
# Installed with polybus's CMake package: a consumer of the static libraries finds snappy the
# same way, by name, with no path of the machine that built polybus.
find_path(Snappy_INCLUDE_DIR snappy.h)
find_library(Snappy_LIBRARY snappy)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(Snappy REQUIRED_VARS Snappy_LIBRARY Snappy_INCLUDE_DIR)
if(Snappy_FOUND AND NOT TARGET Snappy::snappy)
  add_library(Snappy::snappy UNKNOWN IMPORTED)
  set_target_properties(Snappy::snappy PROPERTIES IMPORTED_LOCATION "${Snappy_LIBRARY}"
                                                  INTERFACE_INCLUDE_DIRECTORIES "${Snappy_INCLUDE_DIR}")
endif()
mark_as_advanced(Snappy_INCLUDE_DIR Snappy_LIBRARY)
