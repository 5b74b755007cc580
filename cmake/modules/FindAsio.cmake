# SPDX-License-Identifier: Apache-2.0
# Finds standalone Asio (Debian's libasio-dev, header-only) and defines the imported target
# Asio::asio: its include directory only. The macros polybus builds Asio with are set by the
# targets whose headers include Asio (core/CMakeLists.txt), not here.
find_path(Asio_INCLUDE_DIR asio.hpp)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(Asio REQUIRED_VARS Asio_INCLUDE_DIR)
if(Asio_FOUND AND NOT TARGET Asio::asio)
  add_library(Asio::asio INTERFACE IMPORTED)
  set_target_properties(Asio::asio PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${Asio_INCLUDE_DIR}")
endif()
mark_as_advanced(Asio_INCLUDE_DIR)
