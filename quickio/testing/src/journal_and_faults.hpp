// SPDX-License-Identifier: Apache-2.0
// The server's journal entries and fault units, in QuickIO's own terms: an event is named by its
// path ("/qio/on", "/orders"), a callback either way by "/qio/callback" with its id; and a fault
// rule's error text read as the callback answer it becomes. Used by the router only when the
// journal is on or there are rules, so a server with neither builds none of these strings.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "polybus/journal.hpp"
#include "polybus/quickio/codec.hpp"
#include "server_impl.hpp"

namespace polybus::quickio::testing {

inline constexpr std::string_view kCallbackKind = "/qio/callback";

// What a received event is, as the journal and the fault rules name it.
struct EventUnit {
  std::string kind;   // the path, "/qio/callback" for a callback
  std::string topic;  // the path /qio/on and /qio/off name, or an application event's path
  std::uint64_t id = 0;
};

inline EventUnit event_unit(const Event& event) {
  EventUnit unit;
  if (auto id = callback_path_id(event.path)) {
    unit.kind = kCallbackKind;
    unit.id = *id;
    return unit;
  }
  unit.id = event.callback_id;
  if (event.path.substr(0, 5) != "/qio/") {
    unit.kind = clean_path(event.path);  // as the router routes it
    unit.topic = unit.kind;
  } else {
    unit.kind = event.path;
    if (event.path == "/qio/on" || event.path == "/qio/off")
      if (auto target = subscription_path(event.json)) unit.topic = clean_path(*target);
  }
  return unit;
}

// Bytes of an event's payload: its JSON data, none for null.
inline std::uint64_t payload_bytes(std::string_view json) {
  return json == "null" ? 0 : json.size();
}

// A callback's code and err_msg ("404 no subscriber"), and its data's bytes.
inline void describe_callback(polybus::testing::JournalEntry& entry, std::string_view json) {
  CallbackBody body;
  if (parse_callback_body(json, body)) {
    entry.text = "malformed callback body";
    entry.bytes = json.size();
    return;
  }
  entry.text = std::to_string(body.code);
  if (!body.err_msg.empty()) entry.text += " " + body.err_msg;
  entry.bytes = payload_bytes(body.data_json);
}

// Call only when the journal is enabled.
inline void journal_received(polybus::testing::Journal& journal, const Peer& peer,
                             const Event& event, const EventUnit& unit) {
  polybus::testing::JournalEntry entry;
  entry.connection = peer.id;
  entry.received = true;
  entry.kind = unit.kind;
  entry.topic = unit.topic;
  if (unit.id != 0) entry.id = std::to_string(unit.id);
  if (unit.kind == kCallbackKind) {
    describe_callback(entry, event.json);
  } else {
    entry.bytes = payload_bytes(event.json);
  }
  journal.record(std::move(entry));
}

// Call only when the journal is enabled.
inline void journal_sent(polybus::testing::Journal& journal, const Peer& peer,
                         std::string_view path, std::uint64_t callback_id, std::string_view json) {
  polybus::testing::JournalEntry entry;
  entry.connection = peer.id;
  entry.received = false;
  if (auto id = callback_path_id(path)) {
    entry.kind = kCallbackKind;
    entry.id = std::to_string(*id);
    describe_callback(entry, json);
  } else {
    entry.kind = path;
    if (path.substr(0, 5) != "/qio/") entry.topic = path;
    if (callback_id != 0) entry.id = std::to_string(callback_id);
    entry.bytes = payload_bytes(json);
  }
  journal.record(std::move(entry));
}

}  // namespace polybus::quickio::testing
