// Options are declared once per adapter in a table (name, type, default, range, documentation),
// in the manner of go-nsq's Config. URL query parameters and programmatic settings are both
// validated against that table, so an unknown key or an out-of-range value is an error that
// names the key and the allowed range.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace polybus {

enum class OptionType { boolean, integer, duration, string, choice };

struct OptionSpec {
  std::string name;
  OptionType type;
  std::string default_value;  // in the same text form a URL query uses
  std::int64_t min = 0;       // integer: value; duration: milliseconds
  std::int64_t max = 0;
  std::string doc;
  std::vector<std::string> choices;  // for OptionType::choice
};

// A rule between two options that each value alone cannot say; resolve() checks every rule after
// every value, so a contradictory pair is refused at connect instead of one silently winning.
struct OptionRule {
  enum class Kind {
    not_both_true,    // two booleans: at most one is true
    not_above,        // two durations or integers: first <= second
    both_or_neither,  // two strings: both empty or both set
  };
  Kind kind;
  std::string first, second;
  std::string why;  // said in the error, e.g. "nsqd negotiates one compression per connection"
};

class OptionTable {
 public:
  OptionTable() = default;
  explicit OptionTable(std::vector<OptionSpec> specs);

  // Adds specs; a name already present is replaced (adapters override core defaults this way).
  OptionTable& add(std::vector<OptionSpec> specs);
  OptionTable& set_default(std::string_view name, std::string value);
  // Throws polybus::Error(errc::invalid_option) when either name is not in the table.
  OptionTable& add_rule(OptionRule rule);

  const OptionSpec* find(std::string_view name) const;
  const std::vector<OptionSpec>& specs() const { return specs_; }
  const std::vector<OptionRule>& rules() const { return rules_; }

  // Markdown table of every option, then the rules between them, for --help and docs.
  std::string describe() const;

 private:
  std::vector<OptionSpec> specs_;
  std::vector<OptionRule> rules_;
};

// Raw settings as text: from the URL query, then from the caller (which wins).
class Options {
 public:
  Options() = default;
  Options(std::initializer_list<std::pair<const std::string, std::string>> values)
      : values_(values) {}

  Options& set(std::string key, std::string value);
  Options& set(std::string key, std::int64_t value) { return set(std::move(key), std::to_string(value)); }
  Options& set(std::string key, bool value) { return set(std::move(key), std::string(value ? "true" : "false")); }
  Options& set(std::string key, const char* value) { return set(std::move(key), std::string(value)); }
  Options& set(std::string key, std::chrono::milliseconds value) {
    return set(std::move(key), std::to_string(value.count()) + "ms");
  }

  const std::map<std::string, std::string, std::less<>>& values() const { return values_; }

 private:
  std::map<std::string, std::string, std::less<>> values_;
};

// Options checked against a table: every declared option has a typed value.
class ResolvedOptions {
 public:
  // Throws polybus::Error(errc::invalid_option) naming the key and the allowed values.
  static ResolvedOptions resolve(const OptionTable& table, const Options& given,
                                 std::string_view scheme);

  bool get_bool(std::string_view name) const;
  std::int64_t get_int(std::string_view name) const;
  std::chrono::milliseconds get_duration(std::string_view name) const;
  const std::string& get_string(std::string_view name) const;  // string and choice
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

// "250ms", "2s", "1m", "1h"; a number without a unit only for 0 and -1.
bool parse_duration(std::string_view text, std::chrono::milliseconds& out);

}  // namespace polybus
