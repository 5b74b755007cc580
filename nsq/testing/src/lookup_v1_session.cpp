// SPDX-License-Identifier: Apache-2.0
#include "lookup_v1_session.hpp"

#include <rapidjson/document.h>

#include "go_text.hpp"
#include "polybus/nsq/codec.hpp"
#include "polybus/text/big_endian.hpp"

namespace polybus::nsq::testing::detail {
namespace {

// strings.Split(line, " ").
std::vector<std::string> split_spaces(std::string_view line) {
  std::vector<std::string> params;
  while (true) {
    const auto space = line.find(' ');
    params.emplace_back(line.substr(0, space));
    if (space == std::string_view::npos) return params;
    line.remove_prefix(space + 1);
  }
}

// strings.TrimSpace, for ASCII.
std::string_view trim_space(std::string_view text) {
  const auto space = [](char c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
  };
  while (!text.empty() && space(text.front())) text.remove_prefix(1);
  while (!text.empty() && space(text.back())) text.remove_suffix(1);
  return text;
}

// A JSON integer field into `out`; false when present with another type (Go's Unmarshal fails).
bool read_port(const rapidjson::Value& object, const char* name, std::uint16_t& out) {
  const auto member = object.FindMember(name);
  if (member == object.MemberEnd() || member->value.IsNull()) return true;
  if (!member->value.IsInt64()) return false;
  const std::int64_t value = member->value.GetInt64();
  out = value > 0 && value <= 65535 ? static_cast<std::uint16_t>(value) : 0;
  return true;
}

bool read_string(const rapidjson::Value& object, const char* name, std::string& out) {
  const auto member = object.FindMember(name);
  if (member == object.MemberEnd() || member->value.IsNull()) return true;
  if (!member->value.IsString()) return false;
  out.assign(member->value.GetString(), member->value.GetStringLength());
  return true;
}

}  // namespace

LookupV1Session::LookupV1Session(LookupRegistry& registry, std::string peer_address,
                                 LookupdIdentity identity)
    : registry_(registry), peer_(std::move(peer_address)), identity_(std::move(identity)) {}

void LookupV1Session::feed(std::string_view bytes, std::string& out) {
  if (ended_) return;
  input_.append(bytes);
  std::size_t used = 0;
  while (!ended_) {
    const std::string_view rest = std::string_view(input_).substr(used);
    if (state_ == State::magic) {
      if (rest.size() < 4) break;
      used += 4;
      if (rest.substr(0, 4) != "  V1") {
        fail("E_BAD_PROTOCOL", out);
        break;
      }
      state_ = State::line;
    } else if (state_ == State::line) {
      const auto end = rest.find('\n');
      if (end == std::string_view::npos) {
        if (rest.size() > kMaxLine) fail("E_INVALID line too long", out);
        break;
      }
      used += end + 1;
      command(split_spaces(trim_space(rest.substr(0, end))), out);
    } else if (state_ == State::identify_size) {
      if (rest.size() < 4) break;
      used += 4;
      const auto size =
          static_cast<std::int32_t>(static_cast<std::uint32_t>(read_big_endian<4>(rest.data())));
      if (size < 0 || size > kMaxIdentifyBody) {
        fail("E_BAD_BODY IDENTIFY failed to read body", out);
        break;
      }
      body_size_ = static_cast<std::size_t>(size);
      state_ = State::identify_body;
    } else {
      if (rest.size() < body_size_) break;
      used += body_size_;
      state_ = State::line;
      identify_body(rest.substr(0, body_size_), out);
    }
  }
  input_.erase(0, used);
  if (ended_) std::string().swap(input_);
}

void LookupV1Session::command(const std::vector<std::string>& params, std::string& out) {
  const std::string& name = params[0];
  if (name == "PING") {
    if (identified_) registry_.ping(peer_);
    return answer("OK", out);
  }
  if (name == "IDENTIFY") {
    if (identified_) return fail("E_INVALID cannot IDENTIFY again", out);
    state_ = State::identify_size;
    return;
  }
  if (name == "REGISTER" || name == "UNREGISTER") {
    if (!identified_) return fail("E_INVALID client must IDENTIFY", out);
    if (params.size() < 2) {
      return fail("E_INVALID " + name + " insufficient number of params", out);
    }
    const std::string& topic = params[1];
    const std::string channel = params.size() >= 3 ? params[2] : "";
    if (!valid_topic_name(topic)) {
      return fail("E_BAD_TOPIC " + name + " topic name '" + topic + "' is not valid", out);
    }
    if (!channel.empty() && !valid_channel_name(channel)) {
      return fail("E_BAD_CHANNEL " + name + " channel name '" + channel + "' is not valid", out);
    }
    if (name == "REGISTER") {
      registry_.register_producer(peer_, topic, channel);
    } else {
      registry_.unregister_producer(peer_, topic, channel);
    }
    return answer("OK", out);
  }
  fail("E_INVALID invalid command " + name, out);
}

void LookupV1Session::identify_body(std::string_view body, std::string& out) {
  rapidjson::Document document;
  document.Parse(body.data(), body.size());
  ProducerInfo peer;
  peer.version.clear();  // a field the nsqd must send
  if (document.HasParseError() || !document.IsObject() ||
      !read_string(document, "broadcast_address", peer.broadcast_address) ||
      !read_string(document, "hostname", peer.hostname) ||
      !read_string(document, "version", peer.version) ||
      !read_port(document, "tcp_port", peer.tcp_port) ||
      !read_port(document, "http_port", peer.http_port)) {
    return fail("E_BAD_BODY IDENTIFY failed to decode JSON body", out);
  }
  if (peer.broadcast_address.empty() || peer.tcp_port == 0 || peer.http_port == 0 ||
      peer.version.empty()) {
    return fail("E_BAD_BODY IDENTIFY missing fields", out);
  }
  peer.remote_address = peer_;
  peer.connection_id = peer_;
  registry_.identify(peer, true);
  identified_ = true;
  // Go's encoding/json writes a map's keys in order.
  answer("{\"broadcast_address\":" + go_json_string(identity_.broadcast_address) +
             ",\"hostname\":" + go_json_string(identity_.hostname) +
             ",\"http_port\":" + std::to_string(identity_.http_port) +
             ",\"tcp_port\":" + std::to_string(identity_.tcp_port) + ",\"version\":\"1.3.0\"}",
         out);
}

void LookupV1Session::answer(std::string_view data, std::string& out) {
  append_big_endian<4>(out, data.size());
  out.append(data);
}

void LookupV1Session::fail(const std::string& text, std::string& out) {
  answer(text, out);
  ended_ = true;
}

}  // namespace polybus::nsq::testing::detail
