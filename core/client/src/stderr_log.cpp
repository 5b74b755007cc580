// SPDX-License-Identifier: Apache-2.0
#include "stderr_log.hpp"

#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>

namespace polybus::detail {
namespace {

constexpr int kBurst = 5;                          // lines of a kind at once
constexpr auto kRefill = std::chrono::seconds(1);  // then one per this
constexpr std::size_t kKinds = 256;                // kinds remembered; past it, one bucket
constexpr std::size_t kKindLength = 64;            // characters of a line that make its kind

// What makes lines of one kind: the text without digits and without what '...' or "..." quote
// (ids, offsets, topic names in quotes), up to kKindLength characters.
std::string kind_of(std::string_view text) {
  std::string kind;
  char quote = 0;
  for (char c : text) {
    if (kind.size() >= kKindLength) break;
    if (quote) {
      if (c == quote) quote = 0;
      continue;
    }
    if (c == '\'' || c == '"') {
      quote = c;
      continue;
    }
    if (c >= '0' && c <= '9') continue;
    kind += c;
  }
  return kind;
}

struct Limiter {
  struct Bucket {
    double tokens = kBurst;
    std::chrono::steady_clock::time_point refilled = std::chrono::steady_clock::now();
    std::size_t held_back = 0;
  };
  std::mutex mutex;
  std::map<std::string, Bucket> buckets;
  Bucket overflow;

  // Whether a line of `kind` goes out now; held_back: how many of it did not since the last.
  bool admit(const std::string& kind, std::size_t& held_back) {
    std::lock_guard<std::mutex> lock(mutex);
    Bucket* bucket = &overflow;
    if (auto it = buckets.find(kind); it != buckets.end())
      bucket = &it->second;
    else if (buckets.size() < kKinds)
      bucket = &buckets[kind];
    const auto now = std::chrono::steady_clock::now();
    const double gained = std::chrono::duration<double>(now - bucket->refilled) / kRefill;
    bucket->tokens = std::min<double>(kBurst, bucket->tokens + gained);
    bucket->refilled = now;
    if (bucket->tokens < 1) {
      ++bucket->held_back;
      return false;
    }
    bucket->tokens -= 1;
    held_back = bucket->held_back;
    bucket->held_back = 0;
    return true;
  }
};

}  // namespace

LogSink stderr_log(std::string client_name) {
  auto limiter = std::make_shared<Limiter>();
  return [limiter, name = std::move(client_name)](LogLevel level, std::string_view text) {
    std::size_t held_back = 0;
    if (!limiter->admit(kind_of(text), held_back)) return;
    std::string line = "polybus[" + name + "] " + to_string(level) + ": ";
    line.append(text);
    if (held_back > 0) line += " (and " + std::to_string(held_back) + " more like it held back)";
    line += '\n';
    std::fwrite(line.data(), 1, line.size(), stderr);  // one write a line: lines do not interleave
  };
}

}  // namespace polybus::detail
