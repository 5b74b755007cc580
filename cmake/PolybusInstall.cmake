# SPDX-License-Identifier: Apache-2.0
# Install rules: libraries, headers, an exported CMake package (find_package(polybus)) and a
# pkg-config file.
include(CMakePackageConfigHelpers)

set(POLYBUS_INSTALL_TARGETS polybus_text polybus_core polybus_core_testing polybus_all
                             polybus_testing_all)
foreach(adapter IN LISTS POLYBUS_ADAPTERS)
  list(APPEND POLYBUS_INSTALL_TARGETS polybus_${adapter})
  # An adapter's sans-IO codec library, when it has one, is part of its link interface.
  if(TARGET polybus_${adapter}_codec)
    list(APPEND POLYBUS_INSTALL_TARGETS polybus_${adapter}_codec)
  endif()
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${adapter}/include/polybus
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT development)
  # Its in-process broker, for users' own integration tests (polybus::<adapter>_testing, and
  # polybus::testing for all of them with register_all_test_brokers()).
  if(TARGET polybus_${adapter}_testing)
    list(APPEND POLYBUS_INSTALL_TARGETS polybus_${adapter}_testing)
    install(DIRECTORY ${PROJECT_SOURCE_DIR}/${adapter}/testing/include/polybus
            DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT development)
  endif()
endforeach()

# A shared library's file is libpolybus_<name>.so.<version>, its SONAME libpolybus_<name>.so.<ABI>:
# a release that breaks binary compatibility raises POLYBUS_ABI_VERSION (README "Versions").
foreach(target IN LISTS POLYBUS_INSTALL_TARGETS)
  get_target_property(type ${target} TYPE)
  if(type STREQUAL "SHARED_LIBRARY")
    set_target_properties(${target} PROPERTIES VERSION ${PROJECT_VERSION}
                                               SOVERSION ${POLYBUS_ABI_VERSION})
  endif()
endforeach()

# Components, for the Debian packages (cmake/PolybusPackages.cmake): runtime (the shared
# libraries' files), development (the rest) and tools (the polybus command).
install(TARGETS ${POLYBUS_INSTALL_TARGETS}
        EXPORT polybusTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT development
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime
                NAMELINK_COMPONENT development
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# A static and a shared build install side by side into one prefix (libpolybus-dev holds the
# static archives, libpolybus0 the shared libraries), each with targets of its own;
# polybusConfig.cmake picks one (POLYBUS_SHARED_LIBS, else BUILD_SHARED_LIBS, else shared when
# installed).
if(BUILD_SHARED_LIBS)
  set(POLYBUS_TARGETS_FILE polybusTargets-shared)
else()
  set(POLYBUS_TARGETS_FILE polybusTargets-static)
endif()
install(EXPORT polybusTargets NAMESPACE polybus:: FILE ${POLYBUS_TARGETS_FILE}.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/polybus COMPONENT development)

configure_package_config_file(cmake/polybusConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/polybusConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/polybus)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/polybusConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/polybusConfig.cmake
              ${PROJECT_BINARY_DIR}/polybusConfigVersion.cmake
              ${PROJECT_SOURCE_DIR}/cmake/modules/FindAsio.cmake
              ${PROJECT_SOURCE_DIR}/cmake/modules/FindSnappy.cmake
              ${PROJECT_SOURCE_DIR}/cmake/modules/FindLibCbor.cmake
              ${PROJECT_SOURCE_DIR}/cmake/modules/PolybusFindLibrary.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/polybus COMPONENT development)

set(POLYBUS_PC_LIBS "-lpolybus_core -lpolybus_text")
foreach(adapter IN LISTS POLYBUS_ADAPTERS)
  if(TARGET polybus_${adapter}_codec)
    set(POLYBUS_PC_LIBS "-lpolybus_${adapter}_codec ${POLYBUS_PC_LIBS}")
  endif()
  set(POLYBUS_PC_LIBS "-lpolybus_${adapter} ${POLYBUS_PC_LIBS}")
endforeach()
# Relocatable: the prefix is found from the .pc file's own location.
file(RELATIVE_PATH POLYBUS_PC_TO_PREFIX "/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/")
string(REGEX REPLACE "/$" "" POLYBUS_PC_TO_PREFIX "${POLYBUS_PC_TO_PREFIX}")
configure_file(cmake/polybus.pc.in ${PROJECT_BINARY_DIR}/polybus.pc @ONLY)
# The in-process brokers and the fault proxy (polybus::testing in CMake): an application's
# tests link them with `pkg-config --libs polybus-testing`, which brings polybus's own.
set(POLYBUS_PC_TESTING_LIBS "-lpolybus_core_testing")
foreach(adapter IN LISTS POLYBUS_ADAPTERS)
  if(TARGET polybus_${adapter}_testing)
    set(POLYBUS_PC_TESTING_LIBS "-lpolybus_${adapter}_testing ${POLYBUS_PC_TESTING_LIBS}")
  endif()
endforeach()
configure_file(cmake/polybus-testing.pc.in ${PROJECT_BINARY_DIR}/polybus-testing.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/polybus.pc ${PROJECT_BINARY_DIR}/polybus-testing.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT development)
