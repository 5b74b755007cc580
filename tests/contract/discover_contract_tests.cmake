# SPDX-License-Identifier: Apache-2.0
# Registers one ctest test per (broker, contract case): contract:<broker>:<case>. Run after each
# build of the contract binary (POST_BUILD), the way catch_discover_tests works; ctest includes
# the file it writes. A run that exits 77 is skipped (the broker lacks what the case needs, or
# its real server is not configured).
#
#   cmake -D TEST_EXECUTABLE=... -D OUTPUT_FILE=... -D TEST_ENVIRONMENT=... -P this file
execute_process(COMMAND "${TEST_EXECUTABLE}" --list-contract
                OUTPUT_VARIABLE listing RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "${TEST_EXECUTABLE} --list-contract failed (${status})")
endif()
string(REPLACE "\n" ";" lines "${listing}")
set(environment "POLYBUS_CONTRACT_BROKERS=@BROKER@")
if(NOT TEST_ENVIRONMENT STREQUAL "")
  string(APPEND environment ";${TEST_ENVIRONMENT}")
endif()
set(script "")
foreach(line IN LISTS lines)
  if(line STREQUAL "")
    continue()
  endif()
  string(REPLACE " " ";" fields "${line}")
  list(GET fields 0 broker)
  list(GET fields 1 title)
  set(name "contract:${broker}:${title}")
  string(REPLACE "@BROKER@" "${broker}" env "${environment}")
  string(APPEND script
    "add_test([=[${name}]=] [=[${TEST_EXECUTABLE}]=] [=[${title}]=])\n"
    "set_tests_properties([=[${name}]=] PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600 "
    "LABELS contract ENVIRONMENT [=[${env}]=])\n")
endforeach()
file(WRITE "${OUTPUT_FILE}" "${script}")
