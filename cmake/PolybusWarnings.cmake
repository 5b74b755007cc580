# SPDX-License-Identifier: Apache-2.0
# Warnings every polybus target is compiled with; -Wshadow=local is GCC's spelling only.
add_library(polybus_warnings INTERFACE)
target_compile_options(polybus_warnings INTERFACE -Wall -Wextra -Wpedantic
                                                  $<$<CXX_COMPILER_ID:GNU>:-Wshadow=local>
                                                  -Wnon-virtual-dtor
                                                  # option tables leave trailing fields defaulted
                                                  -Wno-missing-field-initializers)
if(POLYBUS_WERROR)
  target_compile_options(polybus_warnings INTERFACE -Werror)
endif()
