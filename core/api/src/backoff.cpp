// SPDX-License-Identifier: Apache-2.0
#include "polybus/backoff.hpp"

#include <algorithm>
#include <mutex>

#include "polybus/options.hpp"

namespace polybus {
namespace {

std::chrono::milliseconds capped_exponential(std::chrono::milliseconds initial,
                                             std::chrono::milliseconds max, std::uint32_t attempt) {
  if (attempt == 0) attempt = 1;
  std::int64_t value = initial.count();
  for (std::uint32_t i = 1; i < attempt && value < max.count(); ++i) value *= 2;
  return std::chrono::milliseconds(std::min<std::int64_t>(value, max.count()));
}

double random_unit() {
  static std::mutex mutex;
  static std::mt19937_64 engine{std::random_device{}()};
  std::lock_guard<std::mutex> lock(mutex);
  return std::uniform_real_distribution<double>(0.0, 1.0)(engine);
}

}  // namespace

Backoff Backoff::exponential(std::chrono::milliseconds initial, std::chrono::milliseconds max) {
  return Backoff([=](std::uint32_t attempt) { return capped_exponential(initial, max, attempt); });
}

Backoff Backoff::full_jitter(std::chrono::milliseconds initial, std::chrono::milliseconds max) {
  return Backoff([=](std::uint32_t attempt) {
    auto cap = capped_exponential(initial, max, attempt);
    return std::chrono::milliseconds(static_cast<std::int64_t>(random_unit() * cap.count()));
  });
}

Backoff Backoff::exponential_jitter(std::chrono::milliseconds initial,
                                    std::chrono::milliseconds max, double fraction) {
  return Backoff([=](std::uint32_t attempt) {
    auto base = capped_exponential(initial, max, attempt);
    double factor = 1.0 - fraction + 2.0 * fraction * random_unit();
    auto value = static_cast<std::int64_t>(base.count() * factor);
    return std::chrono::milliseconds(std::min<std::int64_t>(value, max.count()));
  });
}

Backoff Backoff::custom(BackoffFunction fn) {
  return Backoff(std::move(fn));
}

Backoff Backoff::from_options(const ResolvedOptions& options) {
  auto initial = options.get_duration("reconnect_initial");
  auto max = options.get_duration("reconnect_max");
  const std::string& kind = options.get_string("reconnect_backoff");
  if (kind == "full_jitter") return full_jitter(initial, max);
  if (kind == "exponential_jitter") return exponential_jitter(initial, max, 0.2);
  return exponential(initial, max);
}

}  // namespace polybus
