// SPDX-License-Identifier: Apache-2.0
// Options are declared once per adapter in a table (name, type, default, range, documentation),
// in the manner of go-nsq's Config. URL query parameters and programmatic settings are both
// validated against that table, so an unknown key or an out-of-range value is an error that
// names the key and the allowed range.
#pragma once

#include "polybus/export.hpp"

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace polybus {

/// The type of an option's value, as written in a URL query.
enum class OptionType {
  boolean,   ///< true, false, 1, 0, yes, no, on, off
  integer,   ///< a decimal integer, within OptionSpec's range
  duration,  ///< with a unit: "250ms", "2s", "1m", "1h"
  string,    ///< any text
  choice,    ///< one of OptionSpec::choices
};

/// One option of a scheme: its name, type, default, range and what it does.
struct POLYBUS_API OptionSpec {
  std::string name;                  ///< the key, as in the URL query
  OptionType type;                   ///< how its value is read and checked
  std::string default_value;         ///< in the same text form a URL query uses
  std::int64_t min = 0;              ///< integer: value; duration: milliseconds
  std::int64_t max = 0;              ///< the most allowed, in the same unit as min
  std::string doc;                   ///< what it does, in a line (describe(), `polybus schemes`)
  std::vector<std::string> choices;  ///< for OptionType::choice
};

/// A rule between two options that each value alone cannot say; resolve() checks every rule after
/// every value, so a contradictory pair is refused at connect instead of one silently winning.
struct POLYBUS_API OptionRule {
  /// What the rule requires of `first` and `second`.
  enum class Kind {
    not_both_true,    ///< two booleans: at most one is true
    not_above,        ///< two durations or integers: first <= second
    both_or_neither,  ///< two strings: both empty or both set
  };
  Kind kind;  ///< what the rule requires
  /// The option named first in the rule.
  std::string first, second;  ///< the option named second in the rule
  std::string why;  ///< said in the error, e.g. "nsqd negotiates one compression per connection"
};

/// A scheme's options (OptionSpec) and the rules between them (OptionRule).
class POLYBUS_API OptionTable {
 public:
  OptionTable() = default;
  /// A table of `specs`, as add() would make it.
  explicit OptionTable(std::vector<OptionSpec> specs);

  /// Adds specs; a name already present is replaced (adapters override core defaults this way).
  OptionTable& add(std::vector<OptionSpec> specs);
  /// Changes the default value of option `name`. Throws polybus::Error(errc::invalid_option) when
  /// the name is not in the table.
  OptionTable& set_default(std::string_view name, std::string value);
  /// Throws polybus::Error(errc::invalid_option) when either name is not in the table.
  OptionTable& add_rule(OptionRule rule);

  /// The option named `name`; null when there is none.
  const OptionSpec* find(std::string_view name) const;
  /// Every option, in the order they were first added.
  const std::vector<OptionSpec>& specs() const { return specs_; }
  /// Every rule, in the order they were added.
  const std::vector<OptionRule>& rules() const { return rules_; }

  /// Markdown table of every option, then the rules between them, for --help and docs.
  std::string describe() const;

 private:
  std::vector<OptionSpec> specs_;
  std::vector<OptionRule> rules_;
};

/// Raw settings as text: from the URL query, then from the caller (which wins).
class POLYBUS_API Options {
 public:
  Options() = default;
  /// The given keys and values, e.g. {{"max_in_flight", "100"}, {"tls", "true"}}.
  Options(std::initializer_list<std::pair<const std::string, std::string>> values)
      : values_(values) {}

  /// Sets `key` to `value` (in the text form a URL query uses), replacing an earlier value.
  /// Nothing is checked until the options are resolved against a table (at connect).
  Options& set(std::string key, std::string value);
  /// Sets an integer option: any integer type, so that a literal (`100`) picks this one.
  template <typename Integer,
            std::enable_if_t<std::is_integral_v<Integer> && !std::is_same_v<Integer, bool> &&
                                 !std::is_same_v<Integer, char>,
                             int> = 0>
  Options& set(std::string key, Integer value) {
    return set(std::move(key), std::to_string(value));
  }
  /// Sets a boolean option ("true" or "false").
  Options& set(std::string key, bool value) {
    return set(std::move(key), std::string(value ? "true" : "false"));
  }
  /// Sets a string option (without this, a string literal would pick the bool overload).
  Options& set(std::string key, const char* value) {
    return set(std::move(key), std::string(value));
  }
  /// Sets a string option.
  Options& set(std::string key, std::string_view value) {
    return set(std::move(key), std::string(value));
  }
  /// Sets a duration option, in whole milliseconds ("250ms"), from any std::chrono::duration.
  template <typename Rep, typename Period>
  Options& set(std::string key, std::chrono::duration<Rep, Period> value) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(value);
    return set(std::move(key), std::to_string(ms.count()) + "ms");
  }

  /// Every key set, with its value as text, sorted by key.
  const std::map<std::string, std::string, std::less<>>& values() const { return values_; }

 private:
  std::map<std::string, std::string, std::less<>> values_;
};

/// Options checked against a table: every declared option has a typed value. The get_*
/// functions throw polybus::Error(errc::invalid_option) for a name not in the table, or one
/// read as another type.
class POLYBUS_API ResolvedOptions {
 public:
  /// Reads every option of `table` from `given` (or its default) and checks the table's rules;
  /// `scheme` names the scheme in errors. Throws polybus::Error(errc::invalid_option) naming the
  /// key and the allowed values (an unknown key included).
  static ResolvedOptions resolve(const OptionTable& table, const Options& given,
                                 std::string_view scheme);

  /// The value of a boolean option.
  bool get_bool(std::string_view name) const;
  /// The value of an integer option.
  std::int64_t get_int(std::string_view name) const;
  /// The value of a duration option.
  std::chrono::milliseconds get_duration(std::string_view name) const;
  /// The value of a string or choice option.
  const std::string& get_string(std::string_view name) const;
  /// The option was given (in the URL or ConnectOptions), not left at its default.
  bool was_set(std::string_view name) const;

 private:
  struct Value {
    OptionType type;
    std::int64_t number = 0;
    std::string text;
    bool explicitly_set = false;
  };
  const Value& lookup(std::string_view name, OptionType type) const;
  void check(const OptionRule& rule, std::string_view scheme) const;
  std::map<std::string, Value, std::less<>> values_;
};

/// Reads a duration into `out`: "250ms", "2s", "1m", "1h"; a number without a unit only for 0
/// and -1. False (and `out` unchanged) for anything else.
POLYBUS_API bool parse_duration(std::string_view text, std::chrono::milliseconds& out);

}  // namespace polybus
