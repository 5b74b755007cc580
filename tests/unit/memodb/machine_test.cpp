// SPDX-License-Identifier: Apache-2.0
// memo01's requester and worker machines with no NNG, socket, thread or clock: whole messages,
// every truncation of them, and messages that make no sense where they arrive.
#include <catch2/catch.hpp>

#include "memodb/src/machine.hpp"
#include "polybus/error.hpp"

using namespace polybus;
using namespace polybus::memodb;
using Next = Worker::Next;

namespace {

Header decoded(const std::string& message, std::string_view* payload = nullptr) {
  Header header;
  std::string_view rest;
  REQUIRE_FALSE(decode(message, header, rest));
  if (payload) *payload = rest;
  return header;
}

std::string job_from_broker(std::string_view worker_id, std::string_view payload) {
  std::string out;
  REQUIRE_FALSE(append_job(out, worker_id, "echo", 5000));
  return out + std::string(payload);
}
std::string heartbeat_from_broker(std::string_view worker_id) {
  std::string out;
  REQUIRE_FALSE(append_heartbeat(out, worker_id));
  return out;
}
std::string disconnect_from_broker(std::string_view worker_id) {
  std::string out;
  REQUIRE_FALSE(append_disconnect(out, worker_id));
  return out;
}
std::string result_from_broker(std::string_view payload) {
  std::string out;
  REQUIRE_FALSE(append_result(out, {}));
  return out + std::string(payload);
}

// A worker registered and waiting for the broker.
Worker waiting_worker() {
  Worker w("echo");
  std::string ready;
  REQUIRE_FALSE(w.ready(ready));
  REQUIRE(w.sent(false));
  REQUIRE(w.state() == Worker::State::receiving);
  return w;
}

}  // namespace

TEST_CASE("a request is a JOB, and its answer a RESULT's payload", "[memodb][machine]") {
  std::string job;
  REQUIRE_FALSE(Requester::job(job, "echo", 1500));
  auto header = decoded(job);
  CHECK(header.type == MessageType::job);
  CHECK(header.service == "echo");
  CHECK(header.timeout_ms == 1500);

  const std::string message = result_from_broker("pong");  // the payload is a view into it
  auto answer = Requester::answer(message, "echo");
  CHECK_FALSE(answer.ec);
  CHECK(answer.payload == "pong");

  auto wrong = Requester::answer(heartbeat_from_broker("w1"), "echo");
  CHECK(wrong.ec == polybus::errc::protocol_error);
  CHECK_THAT(wrong.why, Catch::Contains("expected RESULT") && Catch::Contains("HEARTBEAT"));
  CHECK(Requester::answer("", "echo").ec == memodb::errc::empty_message);
}

TEST_CASE("every truncation of a RESULT's header is refused, naming the service",
          "[memodb][machine]") {
  const std::string whole = result_from_broker("");
  for (std::size_t n = 0; n < whole.size(); ++n) {
    auto answer = Requester::answer(std::string_view(whole).substr(0, n), "svc");
    CHECK(answer.ec);
    CHECK(answer.payload.empty());
    CHECK_THAT(answer.why, Catch::Contains("'svc'"));
  }
}

TEST_CASE("a worker registers, handles a JOB, answers with RESULT and waits again",
          "[memodb][machine]") {
  Worker w("echo");
  std::string ready;
  REQUIRE_FALSE(w.ready(ready));
  auto header = decoded(ready);
  CHECK(header.type == MessageType::ready);
  CHECK(header.services == std::vector<std::string_view>{"echo"});
  CHECK(w.state() == Worker::State::sending);
  REQUIRE(w.sent(false));

  const std::string job = job_from_broker("w-7", "hello");
  auto step = w.received(job, true);
  REQUIRE(step.next == Next::handle);
  CHECK(step.service == "echo");
  CHECK(step.payload == "hello");
  CHECK(w.id() == "w-7");
  CHECK(w.state() == Worker::State::handling);

  std::string result;
  REQUIRE_FALSE(w.result(result, false));
  header = decoded(result);
  CHECK(header.type == MessageType::result);
  CHECK(header.id == "w-7");
  CHECK_FALSE(header.disconnecting.has_value());
  REQUIRE(w.sent(false));
  CHECK(w.state() == Worker::State::receiving);
}

TEST_CASE("a HEARTBEAT is answered in kind while the worker stays, and not when it goes",
          "[memodb][machine]") {
  auto w = waiting_worker();
  auto step = w.received(heartbeat_from_broker("w-1"), true);
  REQUIRE(step.next == Next::send);
  auto header = decoded(step.out);
  CHECK(header.type == MessageType::heartbeat);
  CHECK(header.id == "w-1");
  REQUIRE(w.sent(false));

  step = w.received(heartbeat_from_broker("w-1"), false);
  CHECK(step.next == Next::stop);
  CHECK(step.out.empty());
  CHECK(w.state() == Worker::State::stopped);
}

TEST_CASE("a DISCONNECT registers again later, or ends a worker that goes", "[memodb][machine]") {
  auto w = waiting_worker();
  CHECK(w.received(disconnect_from_broker("w-1"), true).next == Next::register_again_later);
  CHECK(w.state() == Worker::State::stopped);
  CHECK(w.id().empty());

  auto leaving = waiting_worker();
  REQUIRE(leaving.received(job_from_broker("w-2", "x"), true).next == Next::handle);
  std::string result;
  REQUIRE_FALSE(leaving.result(result, true));
  CHECK(decoded(result).disconnecting == std::optional<bool>(true));
  // Closing: a leaving worker still waits for the broker's acknowledgement.
  REQUIRE(leaving.sent(true));
  CHECK(leaving.received(disconnect_from_broker("w-2"), false).next == Next::stop);
}

TEST_CASE("closing stops a worker whose READY just went out", "[memodb][machine]") {
  Worker w("echo");
  std::string ready;
  REQUIRE_FALSE(w.ready(ready));
  CHECK_FALSE(w.sent(true));
  CHECK(w.state() == Worker::State::stopped);
}

TEST_CASE("what makes no sense from the broker registers the worker again, with why",
          "[memodb][machine]") {
  SECTION("a RESULT sent to a worker") {
    auto w = waiting_worker();
    auto step = w.received(result_from_broker("x"), true);
    CHECK(step.next == Next::register_again);
    CHECK(step.ec == polybus::errc::protocol_error);
    CHECK_THAT(step.why, Catch::Contains("unexpected RESULT"));
  }
  SECTION("a message while the worker handles a job") {
    auto w = waiting_worker();
    REQUIRE(w.received(job_from_broker("w", "x"), true).next == Next::handle);
    auto step = w.received(heartbeat_from_broker("w"), true);
    CHECK(step.next == Next::register_again);
    CHECK_THAT(step.why, Catch::Contains("handling"));
  }
  SECTION("a RESULT from a worker with no job") {
    auto w = waiting_worker();
    std::string out;
    CHECK(w.result(out, false) == polybus::errc::protocol_error);
    CHECK(out.empty());
  }
}

TEST_CASE("every truncation of the broker's messages is refused or read as what it is, never more",
          "[memodb][machine]") {
  for (const std::string& whole : {job_from_broker("w-9", "payload"), heartbeat_from_broker("w-9"),
                                   disconnect_from_broker("w-9")}) {
    Header full;
    std::string_view full_payload;
    REQUIRE_FALSE(decode(whole, full, full_payload));
    const std::size_t header_size = whole.size() - full_payload.size();
    for (std::size_t n = 0; n < whole.size(); ++n) {
      auto w = waiting_worker();
      auto step = w.received(std::string_view(whole).substr(0, n), true);
      if (n < header_size) {
        // A cut header: refused, and the worker registers again.
        CHECK(step.ec);
        CHECK(step.next == Next::register_again);
        CHECK(w.state() == Worker::State::stopped);
      } else {
        // The whole header with part of the job: a shorter job (NNG's messages carry no length).
        CHECK(step.next == Next::handle);
        CHECK(step.payload == full_payload.substr(0, n - header_size));
      }
    }
  }
}
