# SPDX-License-Identifier: Apache-2.0
# `docs`: the HTML API reference of the public headers (Doxygen, Debian's doxygen package), into
# BUILD/docs/html. The application API (polybus/polybus.hpp and what it includes, the adapters'
# register_scheme headers, polybus/asio/async.hpp) and the testing headers; not the adapter
# interface (polybus/adapter/...) or the codecs, which are for adapters. A warning (an
# undocumented public name, a broken reference) fails the build.
find_package(Doxygen QUIET)
if(NOT DOXYGEN_FOUND)
  return()
endif()
set(POLYBUS_DOCS_WARN_AS_ERROR YES CACHE STRING "Doxygen's WARN_AS_ERROR for the docs target")
set(POLYBUS_DOCS_OUTPUT ${PROJECT_BINARY_DIR}/docs)
set(POLYBUS_DOCS_STRIP "")
set(inputs
    ${PROJECT_SOURCE_DIR}/core/api/include/polybus
    ${PROJECT_SOURCE_DIR}/core/text/include/polybus/error.hpp
    ${PROJECT_SOURCE_DIR}/core/text/include/polybus/export.hpp
    ${PROJECT_SOURCE_DIR}/core/testing/include/polybus
    ${POLYBUS_VERSION_INCLUDE_DIR}/polybus/version.hpp
    ${PROJECT_BINARY_DIR}/generated/polybus/all.hpp
    ${PROJECT_BINARY_DIR}/generated/polybus/register_all_test_brokers.hpp)
list(APPEND POLYBUS_DOCS_STRIP_DIRS ${PROJECT_SOURCE_DIR}/core/api/include
     ${PROJECT_SOURCE_DIR}/core/text/include ${PROJECT_SOURCE_DIR}/core/testing/include
     ${POLYBUS_VERSION_INCLUDE_DIR} ${PROJECT_BINARY_DIR}/generated)
foreach(adapter IN LISTS POLYBUS_ADAPTERS)
  list(APPEND inputs ${PROJECT_SOURCE_DIR}/${adapter}/include/polybus/${adapter}.hpp)
  list(APPEND POLYBUS_DOCS_STRIP_DIRS ${PROJECT_SOURCE_DIR}/${adapter}/include)
  if(EXISTS ${PROJECT_SOURCE_DIR}/${adapter}/testing/include/polybus/${adapter}_testing.hpp)
    list(APPEND inputs ${PROJECT_SOURCE_DIR}/${adapter}/testing/include/polybus/${adapter}_testing.hpp)
    list(APPEND POLYBUS_DOCS_STRIP_DIRS ${PROJECT_SOURCE_DIR}/${adapter}/testing/include)
  endif()
endforeach()
list(JOIN inputs " " POLYBUS_DOCS_INPUT)
list(JOIN POLYBUS_DOCS_STRIP_DIRS " " POLYBUS_DOCS_STRIP)
configure_file(${PROJECT_SOURCE_DIR}/docs/Doxyfile.in ${PROJECT_BINARY_DIR}/Doxyfile @ONLY)
add_custom_target(docs
  COMMAND ${CMAKE_COMMAND} -E make_directory ${POLYBUS_DOCS_OUTPUT}
  COMMAND Doxygen::doxygen ${PROJECT_BINARY_DIR}/Doxyfile
  WORKING_DIRECTORY ${PROJECT_BINARY_DIR}
  COMMENT "API reference: ${POLYBUS_DOCS_OUTPUT}/html/index.html"
  VERBATIM)
