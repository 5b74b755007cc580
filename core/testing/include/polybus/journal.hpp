// SPDX-License-Identifier: Apache-2.0
// What a test broker's connections sent and were sent, at the protocol's level, for tests to
// assert on: "a FIN for every message", "RDY never above max_in_flight", "ATTACH again after the
// reconnect". The broker records; tests read, wait for an entry, or have it written as JSON lines.
#pragma once

#include "polybus/export.hpp"

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace polybus::testing {

/// One protocol unit a broker received from a connection or sent to it.
struct POLYBUS_API JournalEntry {
  std::uint64_t seq = 0;         ///< 1, 2, ... in the order the broker recorded them
  std::int64_t time_ns = 0;      ///< system clock, ns since the Unix epoch
  std::uint64_t connection = 0;  ///< the broker's number for the connection
  bool received = true;          ///< from the client (a command), else to it (an answer)
  std::string kind;              ///< the protocol's own name: "SUB", "FIN", "message", "error"
  std::string topic;             ///< where the unit names or implies one
  std::string channel;           ///< the subscription's channel or group, where known
  std::string id;                ///< a message id or offset, where the unit carries one
  std::int64_t count = -1;       ///< a count it carries (RDY's, MPUB's messages, attempts); -1
  std::uint64_t bytes = 0;       ///< bytes of payload (bodies), not of framing
  std::string text;              ///< what else it says: an error's text, a response's body
};

/// A bounded record of JournalEntry: the newest `capacity` are kept. Safe from any thread;
/// the broker records on its own, tests read and wait on theirs.
class POLYBUS_API Journal {
 public:
  /// `capacity` 0: records nothing (enabled() is false).
  explicit Journal(std::size_t capacity = 0);
  ~Journal();  ///< closes the file written to, if any
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;

  /// Cheap to ask before building an entry.
  bool enabled() const { return capacity_ > 0; }
  /// The most entries kept.
  std::size_t capacity() const { return capacity_; }
  /// Gives the entry its seq and, if unset, its time; the oldest goes once capacity is reached.
  void record(JournalEntry entry);

  /// The entries kept, oldest first.
  std::vector<JournalEntry> entries() const;
  /// Those for which `predicate` holds, oldest first.
  std::vector<JournalEntry> entries(
      const std::function<bool(const JournalEntry&)>& predicate) const;
  /// The first kept entry for which `predicate` holds, waiting up to `bound` for one to be
  /// recorded; nothing when none came. Never call it on the broker's own thread.
  std::optional<JournalEntry> wait_for(const std::function<bool(const JournalEntry&)>& predicate,
                                       std::chrono::milliseconds bound) const;
  /// Entries recorded so far.
  std::uint64_t recorded() const;
  /// Entries recorded and no longer kept (past capacity).
  std::uint64_t dropped() const;
  /// Forgets every kept entry (seq keeps counting).
  void clear();

  /// Also appends each entry, as it is recorded, to `path` as a JSON line (JournalEntry's
  /// fields, empty ones and a count of -1 left out). Throws std::system_error if it cannot open
  /// the file.
  void write_to(const std::string& path);
  /// One entry as its JSON line, without the newline.
  static std::string json_line(const JournalEntry& entry);

 private:
  const std::size_t capacity_;
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  std::deque<JournalEntry> kept_;
  std::uint64_t next_seq_ = 1;
  std::uint64_t dropped_ = 0;
  std::FILE* file_ = nullptr;
};

}  // namespace polybus::testing
