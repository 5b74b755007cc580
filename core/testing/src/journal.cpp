// SPDX-License-Identifier: Apache-2.0
#include "polybus/journal.hpp"

#include <algorithm>
#include <cerrno>
#include <system_error>
#include <utility>

#include "polybus/text/text.hpp"

namespace polybus::testing {

Journal::Journal(std::size_t capacity) : capacity_(capacity) {}

Journal::~Journal() {
  if (file_ != nullptr) std::fclose(file_);
}

void Journal::record(JournalEntry entry) {
  if (capacity_ == 0) return;
  if (entry.time_ns == 0)
    entry.time_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    entry.seq = next_seq_++;
    if (file_ != nullptr) {
      const std::string line = json_line(entry) + "\n";
      std::fwrite(line.data(), 1, line.size(), file_);
      std::fflush(file_);  // a test in another process reads it as it grows
    }
    kept_.push_back(std::move(entry));
    if (kept_.size() > capacity_) {
      kept_.pop_front();
      ++dropped_;
    }
  }
  changed_.notify_all();
}

std::vector<JournalEntry> Journal::entries() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return {kept_.begin(), kept_.end()};
}

std::vector<JournalEntry> Journal::entries(
    const std::function<bool(const JournalEntry&)>& predicate) const {
  // The predicate runs without the lock: it may read the journal itself.
  std::vector<JournalEntry> out = entries();
  out.erase(std::remove_if(out.begin(), out.end(),
                           [&predicate](const JournalEntry& entry) { return !predicate(entry); }),
            out.end());
  return out;
}

std::optional<JournalEntry> Journal::wait_for(
    const std::function<bool(const JournalEntry&)>& predicate,
    std::chrono::milliseconds bound) const {
  const auto deadline = std::chrono::steady_clock::now() + bound;
  std::uint64_t looked_up_to = 0;  // seq of the last entry already looked at
  while (true) {
    std::vector<JournalEntry> fresh;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait_until(lock, deadline, [this, looked_up_to] {
        return !kept_.empty() && kept_.back().seq > looked_up_to;
      });
      for (const JournalEntry& entry : kept_)
        if (entry.seq > looked_up_to) fresh.push_back(entry);
    }
    // Asked without the lock, as in entries(predicate).
    for (JournalEntry& entry : fresh) {
      looked_up_to = entry.seq;
      if (predicate(entry)) return std::move(entry);
    }
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
  }
}

std::uint64_t Journal::recorded() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return next_seq_ - 1;
}

std::uint64_t Journal::dropped() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return dropped_;
}

void Journal::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  kept_.clear();
}

void Journal::write_to(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "w");
  if (file == nullptr)
    throw std::system_error(errno, std::generic_category(), "journal: cannot open " + path);
  std::lock_guard<std::mutex> lock(mutex_);
  if (file_ != nullptr) std::fclose(file_);
  file_ = file;
}

std::string Journal::json_line(const JournalEntry& e) {
  std::string out = "{\"seq\":" + std::to_string(e.seq) +
                    ",\"time_ns\":" + std::to_string(e.time_ns) +
                    ",\"connection\":" + std::to_string(e.connection) + ",\"direction\":\"" +
                    (e.received ? "in" : "out") + "\",\"kind\":";
  text::append_json_quoted(out, e.kind);
  const auto text_field = [&out](const char* name, const std::string& value) {
    if (value.empty()) return;
    out += ",\"";
    out += name;
    out += "\":";
    text::append_json_quoted(out, value);
  };
  text_field("topic", e.topic);
  text_field("channel", e.channel);
  text_field("id", e.id);
  if (e.count >= 0) out += ",\"count\":" + std::to_string(e.count);
  if (e.bytes > 0) out += ",\"bytes\":" + std::to_string(e.bytes);
  text_field("text", e.text);
  out += "}";
  return out;
}

}  // namespace polybus::testing
