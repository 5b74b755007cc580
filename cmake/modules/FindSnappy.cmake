# SPDX-License-Identifier: Apache-2.0
# Finds Google's snappy (Debian's libsnappy-dev) and defines the imported target Snappy::snappy.
# Installed with polybus's CMake package: a consumer of the static libraries finds snappy the
# same way, by name, with no path of the machine that built polybus.
include(${CMAKE_CURRENT_LIST_DIR}/PolybusFindLibrary.cmake)
polybus_find_library(Snappy Snappy::snappy snappy.h snappy)
