// SPDX-License-Identifier: Apache-2.0
#include "machine.hpp"

#include "polybus/error.hpp"

namespace polybus::memodb {

std::error_code Requester::job(std::string& out, std::string_view service,
                               std::uint64_t timeout_ms) {
  return append_job(out, {}, service, timeout_ms);
}

Requester::Answer Requester::answer(std::string_view answer, std::string_view service) {
  Answer result;
  Header header;
  if (auto ec = decode(answer, header, result.payload)) {
    result.ec = ec;
    result.why =
        "memodb: malformed reply to a JOB on '" + std::string(service) + "': " + ec.message();
    result.payload = {};
  } else if (header.type != MessageType::result) {
    result.ec = make_error_code(polybus::errc::protocol_error);
    result.why = std::string("memodb: expected RESULT for a JOB on '") + std::string(service) +
                 "', got " + to_string(header.type);
    result.payload = {};
  }
  return result;
}

std::error_code Worker::ready(std::string& out) {
  if (auto ec = append_ready(out, {service_})) return ec;
  id_.clear();
  state_ = State::sending;
  leaving_ = false;
  return {};
}

bool Worker::sent(bool closing) {
  if (state_ != State::sending) return false;
  if (closing && !leaving_) {
    stop();
    return false;
  }
  // A leaving worker still hears the broker's DISCONNECT, its acknowledgement.
  state_ = State::receiving;
  return true;
}

Worker::Step Worker::received(std::string_view message, bool staying) {
  Step step;
  if (state_ != State::receiving) {
    step.next = Next::register_again;
    step.ec = make_error_code(polybus::errc::protocol_error);
    step.why = std::string("a message from the broker while the worker was ") + to_string(state_);
    return step;
  }
  Header header;
  std::string_view payload;
  if (auto ec = decode(message, header, payload)) {
    state_ = State::stopped;
    step.next = staying ? Next::register_again : Next::stop;
    step.ec = ec;
    step.why = "malformed message from the broker: " + ec.message();
    return step;
  }
  switch (header.type) {
    case MessageType::job:
      id_ = std::string(header.id);
      state_ = State::handling;
      step.next = Next::handle;
      step.service = header.service;
      step.payload = payload;
      return step;
    case MessageType::heartbeat:
      id_ = std::string(header.id);
      if (!staying) {
        // Leaving: no answer; the broker forgets the worker after its heartbeat timeout.
        stop();
        step.next = Next::stop;
        return step;
      }
      if (auto ec = append_heartbeat(step.out, id_)) {
        stop();
        step.next = Next::register_again;
        step.ec = ec;
        step.why = "cannot answer the broker's HEARTBEAT: " + ec.message();
        return step;
      }
      state_ = State::sending;
      step.next = Next::send;
      return step;
    case MessageType::disconnect: {
      // The broker does not know this worker (it restarted, or timed the worker out), or it
      // acknowledges the last RESULT of a leaving worker (which may have been resumed since).
      stop();
      step.next = staying ? Next::register_again_later : Next::stop;
      return step;
    }
    default:
      stop();
      step.next = staying ? Next::register_again : Next::stop;
      step.ec = make_error_code(polybus::errc::protocol_error);
      step.why = std::string("unexpected ") + to_string(header.type) + " from the broker";
      return step;
  }
}

std::error_code Worker::result(std::string& out, bool leaving) {
  if (state_ != State::handling) return make_error_code(polybus::errc::protocol_error);
  if (auto ec = append_result(out, id_, leaving ? std::optional<bool>(true) : std::nullopt))
    return ec;
  state_ = State::sending;
  leaving_ = leaving;
  return {};
}

void Worker::stop() {
  state_ = State::stopped;
  leaving_ = false;
}

const char* to_string(Worker::State state) noexcept {
  switch (state) {
    case Worker::State::stopped:
      return "stopped";
    case Worker::State::sending:
      return "sending";
    case Worker::State::receiving:
      return "receiving";
    case Worker::State::handling:
      return "handling";
  }
  return "?";
}

}  // namespace polybus::memodb
