// SPDX-License-Identifier: Apache-2.0
#include "polybus/options.hpp"

#include <algorithm>
#include <charconv>
#include <string_view>
#include <vector>

#include "polybus/error.hpp"

namespace polybus {
namespace {

// Edits (insert, delete, replace, swap two neighbours) from a to b, at most limit + 1: enough
// to tell a misspelt option from its name.
std::size_t edit_distance(std::string_view a, std::string_view b, std::size_t limit) {
  const std::size_t n = a.size(), m = b.size();
  if ((n > m ? n - m : m - n) > limit) return limit + 1;
  std::vector<std::vector<std::size_t>> d(n + 1, std::vector<std::size_t>(m + 1));
  for (std::size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= n; ++i) {
    for (std::size_t j = 1; j <= m; ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[n][m];
}

// The known name closest to a misspelt one (a third of its letters wrong at most), or empty.
std::string closest_name(std::string_view key, const OptionTable& table) {
  const std::size_t limit = std::max<std::size_t>(1, key.size() / 3);
  std::string best;
  std::size_t best_distance = limit + 1;
  for (const auto& spec : table.specs()) {
    const std::size_t distance = edit_distance(key, spec.name, limit);
    if (distance < best_distance) {
      best_distance = distance;
      best = spec.name;
    }
  }
  return best;
}

bool parse_int(std::string_view text, std::int64_t& out) {
  if (text.empty()) return false;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, out);
  return ec == std::errc() && ptr == end;
}

bool parse_bool(std::string_view text, bool& out) {
  if (text == "true" || text == "1" || text == "yes" || text == "on") return out = true, true;
  if (text == "false" || text == "0" || text == "no" || text == "off") return out = false, true;
  return false;
}

std::string range_text(const OptionSpec& spec) {
  switch (spec.type) {
    case OptionType::boolean:
      return "true or false";
    case OptionType::integer:
      return "an integer in [" + std::to_string(spec.min) + ", " + std::to_string(spec.max) + "]";
    case OptionType::duration:
      return "a duration with a unit (ms, s, m or h; e.g. 250ms, 2s, 1m) in [" +
             std::to_string(spec.min) + "ms, " + std::to_string(spec.max) + "ms]";
    case OptionType::string:
      return "a string";
    case OptionType::choice: {
      std::string text = "one of";
      for (const auto& c : spec.choices) text += " " + c;
      return text;
    }
  }
  return {};
}

[[noreturn]] void reject(std::string_view scheme, const OptionSpec& spec, std::string_view value) {
  throw Error(errc::invalid_option, std::string(scheme) + ": option '" + spec.name +
                                        "' has invalid value '" + std::string(value) +
                                        "': expected " + range_text(spec));
}

std::string rule_text(const OptionRule& rule) {
  switch (rule.kind) {
    case OptionRule::Kind::not_both_true:
      return "'" + rule.first + "' and '" + rule.second + "' cannot both be true";
    case OptionRule::Kind::not_above:
      return "'" + rule.first + "' cannot exceed '" + rule.second + "'";
    case OptionRule::Kind::both_or_neither:
      return "'" + rule.first + "' and '" + rule.second + "' go together";
  }
  return {};
}

}  // namespace

bool parse_duration(std::string_view text, std::chrono::milliseconds& out) {
  std::size_t digits = (!text.empty() && text[0] == '-') ? 1 : 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  std::int64_t number = 0;
  if (!parse_int(text.substr(0, digits), number)) return false;
  std::string_view unit = text.substr(digits);
  std::int64_t scale = 0;
  // A unit is required: "5" could mean 5 ms or 5 s. Only 0 and -1 (the "off" and "none" of some
  // options) are the same in every unit.
  if (unit.empty() && number != 0 && number != -1) return false;
  if (unit.empty() || unit == "ms")
    scale = 1;
  else if (unit == "s")
    scale = 1000;
  else if (unit == "m")
    scale = 60'000;
  else if (unit == "h")
    scale = 3'600'000;
  else
    return false;
  if (number > INT64_MAX / scale || number < INT64_MIN / scale) return false;
  out = std::chrono::milliseconds(number * scale);
  return true;
}

OptionTable::OptionTable(std::vector<OptionSpec> specs) {
  add(std::move(specs));
}

OptionTable& OptionTable::add(std::vector<OptionSpec> specs) {
  for (auto& spec : specs) {
    auto it = std::find_if(specs_.begin(), specs_.end(),
                           [&](const OptionSpec& s) { return s.name == spec.name; });
    if (it != specs_.end())
      *it = std::move(spec);
    else
      specs_.push_back(std::move(spec));
  }
  return *this;
}

OptionTable& OptionTable::set_default(std::string_view name, std::string value) {
  for (auto& spec : specs_) {
    if (spec.name == name) {
      spec.default_value = std::move(value);
      return *this;
    }
  }
  throw Error(errc::invalid_option, "set_default: no option named '" + std::string(name) + "'");
}

OptionTable& OptionTable::add_rule(OptionRule rule) {
  for (const auto* name : {&rule.first, &rule.second})
    if (find(*name) == nullptr)
      throw Error(errc::invalid_option, "add_rule: no option named '" + *name + "'");
  rules_.push_back(std::move(rule));
  return *this;
}

const OptionSpec* OptionTable::find(std::string_view name) const {
  for (const auto& spec : specs_)
    if (spec.name == name) return &spec;
  return nullptr;
}

std::string OptionTable::describe() const {
  std::string out = "| option | default | allowed | meaning |\n|---|---|---|---|\n";
  for (const auto& spec : specs_) {
    out += "| " + spec.name + " | " + (spec.default_value.empty() ? "(none)" : spec.default_value) +
           " | " + range_text(spec) + " | " + spec.doc + " |\n";
  }
  if (!rules_.empty()) out += "\nRules:\n";
  for (const auto& rule : rules_) out += "- " + rule_text(rule) + ": " + rule.why + "\n";
  return out;
}

Options& Options::set(std::string key, std::string value) {
  values_[std::move(key)] = std::move(value);
  return *this;
}

ResolvedOptions ResolvedOptions::resolve(const OptionTable& table, const Options& given,
                                         std::string_view scheme) {
  for (const auto& [key, value] : given.values()) {
    if (table.find(key) == nullptr) {
      std::string known;
      for (const auto& spec : table.specs()) known += (known.empty() ? "" : ", ") + spec.name;
      const std::string near = closest_name(key, table);
      throw Error(errc::invalid_option, std::string(scheme) + ": unknown option '" + key + "'" +
                                            (near.empty() ? "" : "; did you mean '" + near + "'?") +
                                            " (known: " + known + ")");
    }
  }
  ResolvedOptions resolved;
  for (const auto& spec : table.specs()) {
    auto it = given.values().find(spec.name);
    const bool set = it != given.values().end();
    const std::string& text = set ? it->second : spec.default_value;
    Value value{spec.type, 0, {}, set};
    switch (spec.type) {
      case OptionType::boolean: {
        bool b = false;
        if (!parse_bool(text, b)) reject(scheme, spec, text);
        value.number = b ? 1 : 0;
        break;
      }
      case OptionType::integer:
        if (!parse_int(text, value.number) || value.number < spec.min || value.number > spec.max)
          reject(scheme, spec, text);
        break;
      case OptionType::duration: {
        std::chrono::milliseconds ms{};
        if (!parse_duration(text, ms) || ms.count() < spec.min || ms.count() > spec.max)
          reject(scheme, spec, text);
        value.number = ms.count();
        break;
      }
      case OptionType::string:
        value.text = text;
        break;
      case OptionType::choice:
        if (std::find(spec.choices.begin(), spec.choices.end(), text) == spec.choices.end())
          reject(scheme, spec, text);
        value.text = text;
        break;
    }
    resolved.values_.emplace(spec.name, std::move(value));
  }
  for (const auto& rule : table.rules()) resolved.check(rule, scheme);
  return resolved;
}

void ResolvedOptions::check(const OptionRule& rule, std::string_view scheme) const {
  const Value& first = values_.at(rule.first);
  const Value& second = values_.at(rule.second);
  bool holds = true;
  std::string seen;
  switch (rule.kind) {
    case OptionRule::Kind::not_both_true:
      holds = !(first.number && second.number);
      break;
    case OptionRule::Kind::not_above: {
      const char* unit = first.type == OptionType::duration ? "ms" : "";
      holds = first.number <= second.number;
      seen = " (" + rule.first + "=" + std::to_string(first.number) + unit + ", " + rule.second +
             "=" + std::to_string(second.number) + unit + ")";
      break;
    }
    case OptionRule::Kind::both_or_neither:
      holds = first.text.empty() == second.text.empty();
      seen = " (" + (first.text.empty() ? rule.first : rule.second) + " is empty)";
      break;
  }
  if (!holds)
    throw Error(errc::invalid_option,
                std::string(scheme) + ": options " + rule_text(rule) + seen + ": " + rule.why);
}

const ResolvedOptions::Value& ResolvedOptions::lookup(std::string_view name,
                                                      OptionType type) const {
  auto it = values_.find(name);
  if (it == values_.end())
    throw Error(errc::invalid_option, "no option named '" + std::string(name) + "' in the table");
  bool compatible = it->second.type == type ||
                    (type == OptionType::string && it->second.type == OptionType::choice);
  if (!compatible)
    throw Error(errc::invalid_option,
                "option '" + std::string(name) + "' read with the wrong type");
  return it->second;
}

bool ResolvedOptions::get_bool(std::string_view name) const {
  return lookup(name, OptionType::boolean).number != 0;
}
std::int64_t ResolvedOptions::get_int(std::string_view name) const {
  return lookup(name, OptionType::integer).number;
}
std::chrono::milliseconds ResolvedOptions::get_duration(std::string_view name) const {
  return std::chrono::milliseconds(lookup(name, OptionType::duration).number);
}
const std::string& ResolvedOptions::get_string(std::string_view name) const {
  return lookup(name, OptionType::string).text;
}
bool ResolvedOptions::was_set(std::string_view name) const {
  auto it = values_.find(name);
  return it != values_.end() && it->second.explicitly_set;
}

}  // namespace polybus
