// SPDX-License-Identifier: Apache-2.0
#include "polybus/fault_rules.hpp"

#include <algorithm>
#include <charconv>
#include <stdexcept>
#include <utility>

namespace polybus::testing {
namespace {

std::uint64_t number(std::string_view key, std::string_view value) {
  std::uint64_t out = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), out);
  if (ec != std::errc() || end != value.data() + value.size() || value.empty())
    throw std::invalid_argument("fault rule: " + std::string(key) + "=" + std::string(value) +
                                " is not a whole number");
  return out;
}

double fraction(std::string_view key, std::string_view value) {
  std::size_t used = 0;
  double out = -1;
  try {
    out = std::stod(std::string(value), &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != value.size() || value.empty() || !(out >= 0.0 && out <= 1.0))
    throw std::invalid_argument("fault rule: " + std::string(key) + "=" + std::string(value) +
                                " is not a probability from 0 to 1");
  return out;
}

bool matches(const FaultRule& rule, const FaultUnit& unit) {
  return (rule.unit == "*" || rule.unit == unit.unit) &&
         (rule.topic.empty() || rule.topic == unit.topic) &&
         (rule.channel.empty() || rule.channel == unit.channel) &&
         (rule.connection == 0 || rule.connection == unit.connection);
}

}  // namespace

FaultRule parse_fault_rule(std::string_view text) {
  FaultRule rule;
  bool unit_given = false, action_given = false;
  const auto set_action = [&](FaultRule::Action action, std::string_view key) {
    if (action_given)
      throw std::invalid_argument("fault rule: " + std::string(key) +
                                  ": a rule has one action (error, swallow, delay, close, "
                                  "reset, duplicate or hold)");
    action_given = true;
    rule.action = action;
  };
  while (!text.empty()) {
    // error=TEXT takes the rest: an error's text may hold anything but the end.
    std::string_view item = text;
    if (text.substr(0, 6) != "error=") {
      const std::size_t comma = text.find(',');
      item = text.substr(0, comma);
      text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    } else {
      text = {};
    }
    const std::size_t equals = item.find('=');
    const std::string_view key = item.substr(0, equals);
    const std::string_view value =
        equals == std::string_view::npos ? std::string_view() : item.substr(equals + 1);
    if (key == "unit") {
      if (value.empty()) throw std::invalid_argument("fault rule: unit= names no unit");
      rule.unit = value;
      unit_given = true;
    } else if (key == "topic") {
      rule.topic = value;
    } else if (key == "channel") {
      rule.channel = value;
    } else if (key == "connection") {
      rule.connection = number(key, value);
    } else if (key == "once") {
      rule.when = FaultRule::When::once;
    } else if (key == "nth") {
      rule.when = FaultRule::When::nth;
      rule.n = number(key, value);
    } else if (key == "first") {
      rule.when = FaultRule::When::first_n;
      rule.n = number(key, value);
    } else if (key == "every") {
      rule.when = FaultRule::When::every;
    } else if (key == "probability") {
      rule.when = FaultRule::When::probability;
      rule.probability = fraction(key, value);
    } else if (key == "seed") {
      rule.seed = number(key, value);
    } else if (key == "after") {
      rule.after = std::chrono::milliseconds(number(key, value));
    } else if (key == "error") {
      set_action(FaultRule::Action::error, key);
      if (value.empty()) throw std::invalid_argument("fault rule: error= gives no text");
      rule.error = value;
    } else if (key == "fatal") {
      rule.fatal = true;
    } else if (key == "swallow") {
      set_action(FaultRule::Action::swallow, key);
    } else if (key == "delay") {
      set_action(FaultRule::Action::delay, key);
      rule.delay = std::chrono::milliseconds(number(key, value));
    } else if (key == "close") {
      set_action(FaultRule::Action::close, key);
    } else if (key == "reset") {
      set_action(FaultRule::Action::reset, key);
    } else if (key == "duplicate") {
      set_action(FaultRule::Action::duplicate, key);
    } else if (key == "hold") {
      set_action(FaultRule::Action::hold, key);
    } else {
      throw std::invalid_argument("fault rule: unknown key '" + std::string(key) + "'");
    }
  }
  if (!unit_given) throw std::invalid_argument("fault rule: no unit= (a command, or message)");
  if (!action_given)
    throw std::invalid_argument(
        "fault rule: no action (error=TEXT, swallow, delay=MS, close, reset, duplicate or "
        "hold)");
  if ((rule.when == FaultRule::When::nth || rule.when == FaultRule::When::first_n) && rule.n == 0)
    throw std::invalid_argument("fault rule: nth and first count from 1");
  return rule;
}

FaultRules::FaultRules() = default;
FaultRules::~FaultRules() = default;

std::uint64_t FaultRules::add(FaultRule rule) {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::uint64_t id = next_id_++;
  const std::uint64_t seed = rule.seed;
  rule.id = id;
  entries_.push_back(
      Entry{id, std::move(rule), std::chrono::steady_clock::now(), 0, 0, std::mt19937_64(seed)});
  count_.store(entries_.size(), std::memory_order_relaxed);
  return id;
}

bool FaultRules::remove(std::uint64_t id) {
  std::vector<std::function<void()>> released;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it =
        std::find_if(entries_.begin(), entries_.end(), [id](const Entry& e) { return e.id == id; });
    if (it == entries_.end()) return false;
    entries_.erase(it);
    count_.store(entries_.size(), std::memory_order_relaxed);
    for (auto waiting = on_removed_.begin(); waiting != on_removed_.end();) {
      if (waiting->id != id) {
        ++waiting;
        continue;
      }
      released.push_back(std::move(waiting->released));
      waiting = on_removed_.erase(waiting);
    }
  }
  for (auto& callback : released) callback();  // outside the lock: it may ask the rules
  return true;
}

void FaultRules::clear() {
  std::vector<Waiter> released;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    entries_.clear();
    count_.store(0, std::memory_order_relaxed);
    released.swap(on_removed_);
  }
  for (auto& waiter : released) waiter.released();
}

void FaultRules::when_removed(std::uint64_t id, std::function<void()> released) {
  when_removed(id, 0, std::move(released));
}

void FaultRules::when_removed(std::uint64_t id, std::uint64_t connection,
                              std::function<void()> released) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const bool present =
        std::any_of(entries_.begin(), entries_.end(), [id](const Entry& e) { return e.id == id; });
    if (present) {
      const bool waits_already =
          connection != 0 &&
          std::any_of(on_removed_.begin(), on_removed_.end(),
                      [&](const Waiter& w) { return w.id == id && w.connection == connection; });
      if (!waits_already) on_removed_.push_back(Waiter{id, connection, std::move(released)});
      return;
    }
  }
  released();
}

std::optional<FaultRule> FaultRules::fire(const FaultUnit& unit) {
  if (empty()) return std::nullopt;
  std::lock_guard<std::mutex> lock(mutex_);
  const auto now = std::chrono::steady_clock::now();
  std::optional<FaultRule> answer;
  for (Entry& entry : entries_) {
    const FaultRule& rule = entry.rule;
    if (!matches(rule, unit) || now < entry.added + rule.after) continue;
    const std::uint64_t nth = ++entry.matched;
    bool fires = false;
    switch (rule.when) {
      case FaultRule::When::once:
        fires = nth == 1;
        break;
      case FaultRule::When::nth:
        fires = nth == rule.n;
        break;
      case FaultRule::When::first_n:
        fires = nth <= rule.n;
        break;
      case FaultRule::When::every:
        fires = true;
        break;
      case FaultRule::When::probability:
        // One draw per match, whatever the outcome: the sequence depends on the traffic only.
        fires = std::uniform_real_distribution<double>(0.0, 1.0)(entry.random) < rule.probability;
        break;
    }
    if (!fires || answer) continue;  // every rule that matches counts; the first to fire wins
    ++entry.fired;
    answer = rule;
  }
  return answer;
}

std::uint64_t FaultRules::fired(std::uint64_t id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const Entry& entry : entries_)
    if (entry.id == id) return entry.fired;
  return 0;
}

FaultStatus fault_status(std::string_view error, int fallback) {
  std::size_t digits = 0;
  while (digits < error.size() && digits < 5 && error[digits] >= '0' && error[digits] <= '9')
    ++digits;
  if (digits < 3 || digits > 4 || (digits < error.size() && error[digits] != ' '))
    return {fallback, error};
  int status = 0;
  for (std::size_t i = 0; i < digits; ++i) status = status * 10 + (error[i] - '0');
  return {status, error.substr(std::min(error.size(), digits + 1))};
}

}  // namespace polybus::testing
