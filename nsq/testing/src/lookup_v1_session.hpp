// SPDX-License-Identifier: Apache-2.0
// nsqlookupd's TCP protocol (V1), sans I/O: the "  V1" magic, then IDENTIFY (a JSON body with the
// nsqd's addresses), REGISTER and UNREGISTER of topics and channels, and PING, each answered
// with a size-prefixed "OK", JSON or error text as nsqlookupd 1.3 answers, an error ending the
// session. Bytes in, answers out, registrations into the LookupRegistry. Every length is
// bounded (nsqlookupd reads a line or an IDENTIFY body of any size).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lookup_registry.hpp"

namespace polybus::nsq::testing::detail {

// What IDENTIFY answers about this nsqlookupd.
struct LookupdIdentity {
  std::string broadcast_address;
  std::string hostname;
  std::uint16_t tcp_port = 0;
  std::uint16_t http_port = 0;
};

class LookupV1Session {
 public:
  static constexpr std::size_t kMaxLine = 16 * 1024;
  static constexpr std::int32_t kMaxIdentifyBody = 1024 * 1024;

  // `peer_address`: the connection's remote address, the producer's id once it has identified.
  LookupV1Session(LookupRegistry& registry, std::string peer_address, LookupdIdentity identity);

  // Takes the bytes; appends the answers to `out`. Once ended(), nothing more is read.
  void feed(std::string_view bytes, std::string& out);
  bool ended() const { return ended_; }
  bool identified() const { return identified_; }
  const std::string& peer_address() const { return peer_; }

 private:
  enum class State { magic, line, identify_size, identify_body };
  void command(const std::vector<std::string>& params, std::string& out);
  void identify_body(std::string_view body, std::string& out);
  void answer(std::string_view data, std::string& out);
  void fail(const std::string& text, std::string& out);

  LookupRegistry& registry_;
  std::string peer_;
  LookupdIdentity identity_;
  std::string input_;
  State state_ = State::magic;
  std::size_t body_size_ = 0;
  bool identified_ = false;
  bool ended_ = false;
};

}  // namespace polybus::nsq::testing::detail
