# SPDX-License-Identifier: Apache-2.0
# polybus_protocol(): the libraries of one protocol folder, declared the same way for every
# protocol (docs/architecture.md, "One skeleton per protocol").
#
#   polybus_protocol(<name>
#     [CODEC <source>...]          polybus_<name>_codec: the sans-IO codec; links polybus::text
#                                  only (no core, no Asio), so fuzzers and tools can take it alone
#     ADAPTER <source>...          polybus_<name>: machine, binding and adapter on polybus::core
#     [TESTING <source>...]        polybus_<name>_testing: the in-process broker (static)
#     [CODEC_LINKS <lib>...]       private links of each library: what stays out of its public
#     [ADAPTER_LINKS <lib>...]     headers (a static library still passes them on to whatever
#     [TESTING_LINKS <lib>...]     links it, by their imported targets' names)
#     [HEADER_ONLY <dir>...]       include folders of private header-only dependencies, seen by
#                                  all three as system headers (RapidJSON, websocketpp)
#   )
#
# Sources are relative to the folder. Each library gets the alias polybus::<export name> and
# that export name, position-independent code (the shared build archives them into one), C++17,
# and polybus's warnings. include/ is public (polybus/<name>.hpp and polybus/<name>/...),
# testing/include is the test broker's public header; src/ is private to the adapter and the
# test broker, testing/src to the test broker.
function(polybus_protocol name)
  cmake_parse_arguments(P "" ""
                        "CODEC;ADAPTER;TESTING;CODEC_LINKS;ADAPTER_LINKS;TESTING_LINKS;HEADER_ONLY"
                        ${ARGN})
  if(NOT P_ADAPTER)
    message(FATAL_ERROR "polybus_protocol(${name}): ADAPTER sources are required")
  endif()
  set(dir ${CMAKE_CURRENT_SOURCE_DIR})
  set(public_include $<BUILD_INTERFACE:${dir}/include> $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)

  set(codec)
  if(P_CODEC)
    set(codec polybus_${name}_codec)
    add_library(${codec} ${P_CODEC})
    target_link_libraries(${codec} PUBLIC polybus::text PRIVATE ${P_CODEC_LINKS})
    target_include_directories(${codec} PUBLIC ${public_include})
    _polybus_protocol_library(${codec} ${name}_codec "${P_HEADER_ONLY}")
  endif()

  add_library(polybus_${name} ${P_ADAPTER})
  target_include_directories(polybus_${name} PUBLIC ${public_include} PRIVATE ${dir}/src)
  target_link_libraries(polybus_${name} PUBLIC polybus::core ${codec} PRIVATE ${P_ADAPTER_LINKS})
  _polybus_protocol_library(polybus_${name} ${name} "${P_HEADER_ONLY}")

  if(P_TESTING)
    set(testing polybus_${name}_testing)
    add_library(${testing} STATIC ${P_TESTING})
    target_include_directories(${testing}
      PUBLIC $<BUILD_INTERFACE:${dir}/testing/include>
             $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>
      PRIVATE ${dir}/testing/src ${dir}/src)
    target_link_libraries(${testing} PUBLIC polybus::core polybus::core_testing
                                     PRIVATE ${codec} ${P_TESTING_LINKS})
    _polybus_protocol_library(${testing} ${name}_testing "${P_HEADER_ONLY}")
  endif()
endfunction()

function(_polybus_protocol_library target export_name header_only)
  add_library(polybus::${export_name} ALIAS ${target})
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${export_name}
                                             POSITION_INDEPENDENT_CODE ON)
  target_compile_features(${target} PUBLIC cxx_std_17)
  if(header_only)
    target_include_directories(${target} SYSTEM PRIVATE ${header_only})
  endif()
  target_link_libraries(${target} PRIVATE $<BUILD_INTERFACE:polybus_warnings>)
endfunction()
