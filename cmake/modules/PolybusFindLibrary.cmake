# SPDX-License-Identifier: Apache-2.0
# polybus_find_library(<Package> <Target> <header> <library>): the body of a Find module for a
# library of one header and one archive or shared object. Finds both, reports as
# find_package(<Package>) expects, and defines the imported target <Target>. Installed with the
# package beside the Find modules that use it.
include(FindPackageHandleStandardArgs)
macro(polybus_find_library package target header library)
  find_path(${package}_INCLUDE_DIR ${header})
  find_library(${package}_LIBRARY ${library})
  find_package_handle_standard_args(${package} REQUIRED_VARS ${package}_LIBRARY
                                                             ${package}_INCLUDE_DIR)
  if(${package}_FOUND AND NOT TARGET ${target})
    add_library(${target} UNKNOWN IMPORTED)
    set_target_properties(${target} PROPERTIES IMPORTED_LOCATION "${${package}_LIBRARY}"
                          INTERFACE_INCLUDE_DIRECTORIES "${${package}_INCLUDE_DIR}")
  endif()
  mark_as_advanced(${package}_INCLUDE_DIR ${package}_LIBRARY)
endmacro()
