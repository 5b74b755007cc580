// SPDX-License-Identifier: Apache-2.0
// memo01's two exchanges as sans-IO state machines: no NNG, no clock, no thread. NNG's req0
// contexts carry the bytes (one message out, its one answer back, per context); the owner sends
// what a machine gives it, feeds back each answer, and does what the machine says next.
//
// - A requester: JOB out, RESULT back (Requester).
// - A worker (Worker): READY registers it; the broker answers with a JOB (the handler's answer
//   goes back as RESULT, which is also the request for the next job), a HEARTBEAT (answered in
//   kind while the worker stays) or a DISCONNECT (the broker forgot the worker, or acknowledges
//   its leaving).
#pragma once

#include <string>
#include <string_view>
#include <system_error>

#include "polybus/memodb/codec.hpp"

namespace polybus::memodb {

// Exported (POLYBUS_API) though internal: the machines live in polybus_memodb_codec, beside the
// codec the in-process broker and the fuzzers share, and the adapter is a library of its own.
struct POLYBUS_API Requester {
  // The JOB's header for a request to service; the job's payload follows it in the message.
  static std::error_code job(std::string& out, std::string_view service, std::uint64_t timeout_ms);
  // The broker's answer to a JOB: the RESULT's payload (a view into answer), or an error and
  // why in words.
  struct Answer {
    std::error_code ec;
    std::string_view payload;
    std::string why;
  };
  static Answer answer(std::string_view answer, std::string_view service);
};

class POLYBUS_API Worker {
 public:
  enum class State { stopped, sending, receiving, handling };
  // What the owner does after the broker's message.
  enum class Next {
    handle,                // a JOB: hand service() and payload to a handler, then result()
    send,                  // send the bytes given (the HEARTBEAT answer), then receive
    register_again_later,  // DISCONNECT while staying: ready() after the backoff
    register_again,        // a message that makes no sense (why says so): ready() now
    stop,                  // the worker goes (leaving, or told it is forgotten while leaving)
  };
  struct Step {
    Next next = Next::stop;
    std::string out;           // send: the message
    std::string_view service;  // handle: the job's service
    std::string_view payload;  // handle: the job (a view into the message)
    std::error_code ec;        // register_again: the error
    std::string why;           // register_again: what was wrong
  };

  explicit Worker(std::string service) : service_(std::move(service)) {}

  State state() const { return state_; }
  const std::string& id() const { return id_; }
  bool leaving() const { return leaving_; }
  const std::string& service() const { return service_; }

  // Registers (again): the READY to send. An empty id: the broker assigns one.
  std::error_code ready(std::string& out);
  // The message went out. Returns true when the broker's answer is to be received next; false
  // when the worker stops here (the client is closing, and this was not its leaving RESULT).
  bool sent(bool closing);
  // The broker's message. staying: the owner still wants this worker to take jobs. A JOB is
  // always handed over: a paused worker still takes the job the broker may already have chosen
  // it for, and says it leaves in its RESULT; the owner drops it only when nobody can handle it.
  Step received(std::string_view message, bool staying);
  // The handler's answer to the job: the RESULT's header (its payload follows). leaving: the
  // worker goes after it, and says so; the broker answers DISCONNECT.
  std::error_code result(std::string& out, bool leaving);
  // The exchange ended without an answer (a failure, a cancel, a handler that failed).
  void stop();

 private:
  std::string service_;
  std::string id_;  // the broker's name for this worker; empty until it gives one
  State state_ = State::stopped;
  bool leaving_ = false;
};

const char* to_string(Worker::State state) noexcept;

}  // namespace polybus::memodb
