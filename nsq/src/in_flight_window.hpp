// SPDX-License-Identifier: Apache-2.0
// Internal: the messages nsqd may still count as in flight on one connection, for the check that
// it keeps within RDY. Two things make the client's own count of unanswered messages overstate
// nsqd's, and a "more than RDY in flight" check on it cut a healthy connection:
//  * nsqd stops counting a message once it times out (msg_timeout after sending it, later if
//    touched) and may then send another in its place. So only unanswered messages that arrived
//    recently count: arrivals are kept per slice of msg_timeout / 16, and recent() leaves out the
//    slices older than 13/16 of it. It does not overstate nsqd's count unless the client read a
//    message over 3/16 of msg_timeout after nsqd sent it (a check against it errs towards
//    accepting).
//  * nsqd keeps one copy of a message id in flight and applies FIN and REQ by id. An answer to a
//    copy that timed out finishes the copy nsqd sent again since, so an answer retires the latest
//    arrival of its id, whichever copy it was for; a second answer for the same id retires
//    nothing. The latest arrival of each id is kept in an open-addressing table that is swept of
//    arrivals older than msg_timeout when half full and grows only while more are recent, so a
//    steady stream allocates nothing per message.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string_view>
#include <vector>

#include "polybus/adapter/adapter.hpp"
#include "polybus/nsq/codec.hpp"

namespace polybus::nsq {

class InFlightWindow {
 public:
  InFlightWindow() : table_(kInitialCapacity), spare_(kInitialCapacity) {}

  void reset(std::chrono::milliseconds msg_timeout) {
    width_ = std::max<Clock::duration>(std::chrono::milliseconds(1), msg_timeout / kSlices);
    counts_.fill(0);
    newest_ = kNone;
    std::fill(table_.begin(), table_.end(), Entry{});
    size_ = 0;
  }

  // A message arrived at `at`. An unanswered earlier copy of the same id no longer counts once
  // it is too old to be counted: nsqd timed it out before sending this one. A copy recent
  // enough to be counted stays counted: nsqd cannot have timed it out yet, so a server sending
  // an id again that soon is over its RDY as much as with a new id.
  void arrived(std::string_view id, Clock::time_point at) {
    const std::int64_t slice = slice_of(at);
    advance(slice);
    Entry* entry = find(id);
    if (entry) {
      if (entry->slice <= newest_ - kCounted) uncount(entry->slice);
    } else {
      if ((size_ + 1) * 2 > table_.size()) make_room();
      entry = &insert(id);
    }
    entry->slice = slice;
    if (slice > newest_ - kSlices) ++counts_[index(slice)];
  }

  // A FIN or REQ for message `id` went out on this connection: nsqd no longer counts it.
  void answered(std::string_view id) {
    Entry* entry = find(id);
    if (!entry) return;
    uncount(entry->slice);
    erase(*entry);
  }

  std::uint64_t recent(Clock::time_point now) {
    advance(slice_of(now));
    std::uint64_t sum = 0;
    for (std::int64_t s = newest_ - kCounted + 1; s <= newest_; ++s) sum += counts_[index(s)];
    return sum;
  }

  std::size_t tracked() const { return size_; }           // ids held (tests)
  std::size_t capacity() const { return table_.size(); }  // the table's room (tests)
  // The farthest any id held sits from where its hash put it (tests: lookups stay short).
  std::size_t longest_probe() const {
    std::size_t longest = 0;
    for (std::size_t i = 0; i < table_.size(); ++i)
      if (table_[i].used) longest = std::max(longest, (i - hash(table_[i].id)) & mask());
    return longest;
  }

 private:
  static constexpr std::int64_t kSlices = 16;
  static constexpr std::int64_t kCounted = 13;
  static constexpr std::int64_t kNone = std::numeric_limits<std::int64_t>::min();
  static constexpr std::size_t kInitialCapacity = 64;  // a power of two

  struct Entry {
    std::array<char, kMessageIdSize> id{};
    std::int64_t slice = 0;
    bool used = false;
  };

  std::int64_t slice_of(Clock::time_point t) const { return t.time_since_epoch() / width_; }
  static std::size_t index(std::int64_t slice) {
    return static_cast<std::size_t>(((slice % kSlices) + kSlices) % kSlices);
  }
  bool in_window(std::int64_t slice) const {
    return newest_ != kNone && slice <= newest_ && slice > newest_ - kSlices;
  }
  void uncount(std::int64_t slice) {
    if (!in_window(slice)) return;
    auto& count = counts_[index(slice)];
    if (count > 0) --count;
  }
  void advance(std::int64_t slice) {
    if (newest_ == kNone || slice - newest_ >= kSlices) {
      counts_.fill(0);
    } else {
      for (std::int64_t s = newest_ + 1; s <= slice; ++s) counts_[index(s)] = 0;
    }
    if (newest_ == kNone || slice > newest_) newest_ = slice;
  }

  static std::array<char, kMessageIdSize> key_of(std::string_view id) {
    std::array<char, kMessageIdSize> key{};
    std::memcpy(key.data(), id.data(), std::min(id.size(), key.size()));
    return key;
  }
  // Every byte of the id reaches the low bits the table uses. nsqd's ids are the hex of a
  // counter whose last characters change fastest: a mix that left those to the high bits (as
  // this one once did) put a whole stream in one run, 166 probes per insert at 2500 in flight.
  static std::uint64_t mix(std::uint64_t h) {  // MurmurHash3's finalizer
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    return h ^ (h >> 33);
  }
  static std::size_t hash(const std::array<char, kMessageIdSize>& key) {
    std::uint64_t a, b;
    std::memcpy(&a, key.data(), 8);
    std::memcpy(&b, key.data() + 8, 8);
    return static_cast<std::size_t>(mix(a ^ mix(b)));
  }
  std::size_t mask() const { return table_.size() - 1; }

  Entry* find(std::string_view id) {
    const auto key = key_of(id);
    for (std::size_t i = hash(key) & mask();; i = (i + 1) & mask()) {
      Entry& e = table_[i];
      if (!e.used) return nullptr;
      if (e.id == key) return &e;
    }
  }
  Entry& insert(std::string_view id) { return place(key_of(id), 0); }
  Entry& place(const std::array<char, kMessageIdSize>& key, std::int64_t slice) {
    std::size_t i = hash(key) & mask();
    while (table_[i].used) i = (i + 1) & mask();
    table_[i] = Entry{key, slice, true};
    ++size_;
    return table_[i];
  }
  // Linear probing's backward-shift deletion: no tombstones, so lookups stay short.
  void erase(Entry& entry) {
    std::size_t hole = static_cast<std::size_t>(&entry - table_.data());
    table_[hole].used = false;
    --size_;
    for (std::size_t i = (hole + 1) & mask(); table_[i].used; i = (i + 1) & mask()) {
      const std::size_t home = hash(table_[i].id) & mask();
      // Move it into the hole unless its home lies cyclically in (hole, i].
      const bool home_after_hole =
          hole <= i ? (home > hole && home <= i) : (home > hole || home <= i);
      if (home_after_hole) continue;
      table_[hole] = table_[i];
      table_[i].used = false;
      hole = i;
    }
  }
  // Half full: drop the ids whose latest arrival is older than msg_timeout (nsqd timed them out;
  // they count for nothing). Still over a quarter full: twice the room, so a sweep is paid for
  // by as many arrivals as it keeps.
  void make_room() {
    std::size_t capacity = table_.size();
    std::size_t live = 0;
    for (const Entry& e : table_)
      if (e.used && in_window(e.slice)) ++live;
    while ((live + 1) * 4 > capacity) capacity *= 2;
    if (spare_.size() != capacity)
      spare_.assign(capacity, Entry{});
    else
      std::fill(spare_.begin(), spare_.end(), Entry{});
    table_.swap(spare_);
    size_ = 0;
    for (const Entry& e : spare_)
      if (e.used && in_window(e.slice)) place(e.id, e.slice);
    if (spare_.size() != table_.size()) spare_.assign(table_.size(), Entry{});
  }

  Clock::duration width_ = std::chrono::milliseconds(60000) / kSlices;
  std::array<std::uint64_t, kSlices> counts_{};
  std::int64_t newest_ = kNone;
  std::vector<Entry> table_;  // latest arrival per unanswered id; a power of two in size
  std::vector<Entry> spare_;  // the sweep's other half, kept to sweep without allocating
  std::size_t size_ = 0;
};

}  // namespace polybus::nsq
