// SPDX-License-Identifier: Apache-2.0
// The broker's journal entries and fault units in memo01's terms: a message is named by its type
// (READY, JOB, RESULT, HEARTBEAT, DISCONNECT), its ID field (a worker's 4 bytes) written in hex,
// its service or services as the topic. Used only when the journal is on or there are rules, so
// a broker with neither builds none of these strings.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "polybus/journal.hpp"

namespace polybus::memodb::testing {

// A worker ID (opaque bytes) as text.
inline std::string hex_id(std::string_view id) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(id.size() * 2);
  for (unsigned char c : id) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

// A READY's services, or a worker's, as one topic: "echo", "a,b".
template <typename Names>
std::string joined(const Names& names) {
  std::string out;
  for (const auto& name : names) {
    if (!out.empty()) out.push_back(',');
    out.append(name.data(), name.size());
  }
  return out;
}

// One memo01 message as the journal and the fault rules see it.
struct MessageUnit {
  std::string_view kind;  // to_string(MessageType)
  std::string_view topic;
  std::string_view worker_id;  // the ID field, raw
  std::int64_t count = -1;     // a JOB's timeout in ms
  std::uint64_t bytes = 0;     // payload
  std::string_view text;       // a DISCONNECT's reason, when a fault answers with one
};

// Call only when the journal is enabled.
inline void journal_message(polybus::testing::Journal& journal, std::uint64_t connection,
                            bool received, const MessageUnit& unit) {
  polybus::testing::JournalEntry entry;
  entry.connection = connection;
  entry.received = received;
  entry.kind = unit.kind;
  entry.topic = unit.topic;
  entry.id = hex_id(unit.worker_id);
  entry.count = unit.count;
  entry.bytes = unit.bytes;
  entry.text = unit.text;
  journal.record(std::move(entry));
}

}  // namespace polybus::memodb::testing
