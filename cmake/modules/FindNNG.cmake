# SPDX-License-Identifier: Apache-2.0
# Finds NNG (Debian's libnng-dev) and defines the imported target NNG::nng. Only the tests use
# NNG (fake MemoDB brokers that interoperate with NNG's own rep0): the libraries do not.
find_path(NNG_INCLUDE_DIR nng/nng.h)
find_library(NNG_LIBRARY nng)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(NNG REQUIRED_VARS NNG_LIBRARY NNG_INCLUDE_DIR)
if(NNG_FOUND AND NOT TARGET NNG::nng)
  add_library(NNG::nng UNKNOWN IMPORTED)
  set_target_properties(NNG::nng PROPERTIES IMPORTED_LOCATION "${NNG_LIBRARY}"
                                            INTERFACE_INCLUDE_DIRECTORIES "${NNG_INCLUDE_DIR}")
endif()
mark_as_advanced(NNG_INCLUDE_DIR NNG_LIBRARY)
