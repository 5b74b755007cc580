# SPDX-License-Identifier: Apache-2.0
# Finds NNG (Debian's libnng-dev) and defines the imported target NNG::nng. Only the tests use
# NNG (fake MemoDB brokers that interoperate with NNG's own rep0): the libraries do not.
include(${CMAKE_CURRENT_LIST_DIR}/PolybusFindLibrary.cmake)
polybus_find_library(NNG NNG::nng nng/nng.h nng)
