// SPDX-License-Identifier: Apache-2.0
// Faults at the protocol's level, for a test broker: "the third FIN is answered E_FIN_FAILED",
// "hold the answer to SUB for 2 s", "drop the connection when SUB arrives", "deliver a message
// twice". A rule names the protocol's own unit, when it fires, and what the broker does instead
// of its usual. The same rules, seed and traffic give the same faults.
#pragma once

#include "polybus/export.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace polybus::testing {

/// What a test broker does instead of its usual, when and to what.
struct POLYBUS_API FaultRule {
  /// The protocol's unit: a command a client sends ("FIN", "SUB", "PUB") or a frame the broker
  /// sends ("message"); "*" is any.
  std::string unit = "*";
  std::string topic;             ///< only units of this topic; empty: any
  std::string channel;           ///< only units of this channel (subscription); empty: any
  std::uint64_t connection = 0;  ///< only this connection (the journal's number); 0: any

  /// When, counting the units the rule matches from when it was added.
  enum class When {
    once,         ///< the first
    nth,          ///< the nth only
    first_n,      ///< each of the first n
    every,        ///< each
    probability,  ///< each with `probability`, drawn from `seed`
  };
  When when = When::once;              ///< when the rule fires
  std::uint64_t n = 1;                 ///< for nth and first_n
  double probability = 1.0;            ///< for probability: 0 to 1
  std::uint64_t seed = 0;              ///< for probability: the same seed draws the same faults
  std::chrono::milliseconds after{0};  ///< matches nothing until this long after it was added

  /// What the broker does.
  enum class Action {
    error,      ///< answers `error` (the protocol's own code and text) instead of the command
    swallow,    ///< neither does nor answers it; a message is not sent (it times out)
    delay,      ///< holds what the connection is sent, from this unit on, for `delay`
    close,      ///< closes the connection at once
    reset,      ///< resets the connection (TCP RST) at once
    duplicate,  ///< does it twice: a message is delivered twice
    hold,       ///< holds what the connection is sent, from this unit on, until the rule is removed
  };
  Action action = Action::error;  ///< what the broker does when the rule fires
  std::string error;              ///< for error: the frame's text, "E_FIN_FAILED FIN failed"
  bool fatal = false;             ///< for error: the connection closes after it, as nsqd's fatal
  std::chrono::milliseconds delay{0};  ///< for delay
  /// Its number in FaultRules (add() sets it), in the copy fire() returns: what a broker holding
  /// output for a `hold` waits to see removed.
  std::uint64_t id = 0;
};

/// A unit as a broker meets it, to match rules against.
struct POLYBUS_API FaultUnit {
  std::string_view unit;         ///< the protocol's name for it
  std::string_view topic;        ///< the topic it names or implies, if any
  std::string_view channel;      ///< the subscription's channel, if any
  std::uint64_t connection = 0;  ///< the journal's number for the connection
};

/// A rule parsed from text, as `polybus broker` takes it: comma-separated, for example
/// "unit=FIN,nth=3,error=E_FIN_FAILED FIN failed" or "unit=SUB,topic=t,delay=2000" or
/// "unit=message,probability=0.1,seed=7,duplicate". Keys: unit, topic, channel, connection;
/// once, nth=N, first=N, every, probability=P (with seed=S); after=MS; error=TEXT (and fatal),
/// swallow, delay=MS, close, reset, duplicate, hold. Throws std::invalid_argument naming what is
/// wrong.
POLYBUS_API FaultRule parse_fault_rule(std::string_view text);

/// An error rule's text as a status and the rest, for a protocol that answers with a number
/// (HTTP, a QuickIO callback): "503 overloaded" is 503 and "overloaded".
struct POLYBUS_API FaultStatus {
  int status = 500;       ///< the number the text begins with, or the fallback
  std::string_view text;  ///< what follows it (a view into the rule's text)
};
/// A text that does not begin with a number of 3 or 4 digits and a space (or nothing) is
/// `fallback` and the whole text.
POLYBUS_API FaultStatus fault_status(std::string_view error, int fallback = 500);

/// The rules a broker applies. Safe from any thread: tests add and remove rules while the
/// broker's thread asks which fires.
class POLYBUS_API FaultRules {
 public:
  FaultRules();   ///< no rules
  ~FaultRules();  ///< forgets them
  FaultRules(const FaultRules&) = delete;
  FaultRules& operator=(const FaultRules&) = delete;

  /// Adds a rule; its number, for remove() and fired().
  std::uint64_t add(FaultRule rule);
  /// False when there is no such rule (any more).
  bool remove(std::uint64_t id);
  /// Removes every rule.
  void clear();
  /// Cheap: no rules, nothing to match.
  bool empty() const { return count_.load(std::memory_order_relaxed) == 0; }

  /// The rule that fires for `unit`, if one does: rules are asked in the order they were added,
  /// each that matches counts the unit, and the first that fires is the answer.
  std::optional<FaultRule> fire(const FaultUnit& unit);
  /// How many times a rule fired so far (0 for an unknown one).
  std::uint64_t fired(std::uint64_t id) const;
  /// Calls `released` once rule `id` is removed (remove() or clear(), on the thread that removes
  /// it), or at once when there is no such rule any more: how a broker holding output for a
  /// `hold` hears that it may go on. Callbacks still waiting when the rules are destroyed are
  /// dropped unrun.
  void when_removed(std::uint64_t id, std::function<void()> released);
  /// The same for what `connection` holds: while one callback of rule `id` waits for that
  /// connection, another adds nothing, so a rule that fires every time on a held connection
  /// keeps one callback, not one per firing. Connection 0 is no connection: each is kept.
  void when_removed(std::uint64_t id, std::uint64_t connection, std::function<void()> released);

 private:
  struct Entry {
    std::uint64_t id;
    FaultRule rule;
    std::chrono::steady_clock::time_point added;
    std::uint64_t matched = 0;
    std::uint64_t fired = 0;
    std::mt19937_64 random;
  };
  mutable std::mutex mutex_;
  std::vector<Entry> entries_;
  struct Waiter {
    std::uint64_t id;          // the rule's
    std::uint64_t connection;  // whose output it releases; 0: none said
    std::function<void()> released;
  };
  std::vector<Waiter> on_removed_;
  std::uint64_t next_id_ = 1;
  std::atomic<std::size_t> count_{0};
};

}  // namespace polybus::testing
