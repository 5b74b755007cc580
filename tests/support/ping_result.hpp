// SPDX-License-Identifier: Apache-2.0
// A client's ping as a value, for tests that only need its outcome. Apart from test_support.hpp,
// which suites with a Client of their own (the transport's tests) include too.
#pragma once

#include <chrono>
#include <memory>
#include <system_error>

#include "polybus/client.hpp"
#include "polybus/error.hpp"
#include "test_support.hpp"

namespace polybus::test {

// A ping's result: its error code, or errc::timeout when it has not completed within the bound
// (a ping with a deadline completes by then; only a broken client makes this wait run out).
inline std::error_code ping_result(Client& client, std::chrono::milliseconds deadline) {
  auto pinged = std::make_shared<Latch>();
  auto result = std::make_shared<std::error_code>(make_error_code(errc::timeout));
  client.ping(deadline, [pinged, result](const Status& status) {
    *result = status.code();
    pinged->count_down();
  });
  if (!pinged->wait_for(1, deadline + kWaitBound)) return make_error_code(errc::timeout);
  return *result;
}

}  // namespace polybus::test
