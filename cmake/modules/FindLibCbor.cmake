# SPDX-License-Identifier: Apache-2.0
# Finds libcbor (Debian's libcbor-dev) and defines the imported target LibCbor::cbor. Installed
# with polybus's CMake package, as FindSnappy.cmake is.
include(${CMAKE_CURRENT_LIST_DIR}/PolybusFindLibrary.cmake)
polybus_find_library(LibCbor LibCbor::cbor cbor.h cbor)
