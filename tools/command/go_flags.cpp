// SPDX-License-Identifier: Apache-2.0
#include "go_flags.hpp"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>

namespace polybus::cli {
namespace {

std::string trim(const std::string& text) {
  const auto begin = text.find_first_not_of(" \t\r");
  if (begin == std::string::npos) return "";
  const auto end = text.find_last_not_of(" \t\r");
  return text.substr(begin, end - begin + 1);
}

// One TOML value of the subset nsqd's config files use: strings, integers, floats, booleans,
// and arrays of them. `integer` tells a bare integer from the rest.
struct ConfigValue {
  std::vector<std::string> items;  // one, or an array's
  bool array = false;
  bool integer = false;
};

// Reads one scalar at text[pos]; advances pos.
std::string read_scalar(const std::string& text, std::size_t& pos, bool& integer,
                        const std::string& where) {
  integer = false;
  if (text[pos] == '"') {
    std::string out;
    for (++pos; pos < text.size() && text[pos] != '"'; ++pos) {
      if (text[pos] != '\\') {
        out += text[pos];
        continue;
      }
      if (++pos == text.size()) break;
      const char c = text[pos];
      out += c == 'n' ? '\n' : c == 't' ? '\t' : c == 'r' ? '\r' : c;
    }
    if (pos >= text.size()) throw UsageError(where + ": unterminated string");
    ++pos;
    return out;
  }
  if (text[pos] == '\'') {
    const auto end = text.find('\'', pos + 1);
    if (end == std::string::npos) throw UsageError(where + ": unterminated string");
    std::string out = text.substr(pos + 1, end - pos - 1);
    pos = end + 1;
    return out;
  }
  const auto end = text.find_first_of(",]# \t\r\n", pos);
  std::string out = text.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
  pos = end == std::string::npos ? text.size() : end;
  if (out.empty()) throw UsageError(where + ": a value is missing");
  integer = out.find_first_not_of("+-0123456789_") == std::string::npos;
  if (integer) out.erase(std::remove(out.begin(), out.end(), '_'), out.end());
  return out;
}

void skip_space(const std::string& text, std::size_t& pos) {
  while (pos < text.size()) {
    if (text[pos] == '#') {
      pos = text.find('\n', pos);
      if (pos == std::string::npos) pos = text.size();
    } else if (std::isspace(static_cast<unsigned char>(text[pos]))) {
      ++pos;
    } else {
      break;
    }
  }
}

std::map<std::string, ConfigValue> read_toml(const std::string& path) {
  std::ifstream file(path);
  if (!file) throw UsageError("cannot read config file " + path);
  std::stringstream buffer;
  buffer << file.rdbuf();
  const std::string text = buffer.str();
  std::map<std::string, ConfigValue> values;
  std::size_t pos = 0;
  int line = 1;
  const auto where = [&] { return path + ":" + std::to_string(line); };
  while (true) {
    const std::size_t before = pos;
    skip_space(text, pos);
    for (std::size_t i = before; i < pos; ++i) line += text[i] == '\n';
    if (pos >= text.size()) break;
    if (text[pos] == '[') throw UsageError(where() + ": tables are not part of this config");
    const auto equals = text.find('=', pos);
    const auto newline = text.find('\n', pos);
    if (equals == std::string::npos || equals > newline) {
      throw UsageError(where() + ": expected key = value");
    }
    std::string key = trim(text.substr(pos, equals - pos));
    if (key.size() >= 2 && (key.front() == '"' || key.front() == '\'')) {
      key = key.substr(1, key.size() - 2);
    }
    pos = equals + 1;
    while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\t')) ++pos;
    if (pos >= text.size()) throw UsageError(where() + ": a value is missing");
    ConfigValue value;
    if (text[pos] == '[') {
      value.array = true;
      ++pos;
      while (true) {
        const std::size_t start = pos;
        skip_space(text, pos);
        for (std::size_t i = start; i < pos; ++i) line += text[i] == '\n';
        if (pos >= text.size()) throw UsageError(where() + ": unterminated array");
        if (text[pos] == ']') {
          ++pos;
          break;
        }
        bool integer = false;
        value.items.push_back(read_scalar(text, pos, integer, where()));
        value.integer = integer;
        skip_space(text, pos);
        if (pos < text.size() && text[pos] == ',') ++pos;
      }
    } else {
      bool integer = false;
      value.items.push_back(read_scalar(text, pos, integer, where()));
      value.integer = integer;
    }
    if (!values.emplace(key, std::move(value)).second) {
      throw UsageError(where() + ": " + key + " is given twice");
    }
  }
  return values;
}

}  // namespace

void GoFlags::take(const std::string& name, Kind kind, Setter set, std::string config_key) {
  if (config_key.empty()) {
    config_key = name;
    std::replace(config_key.begin(), config_key.end(), '-', '_');
  }
  by_config_key_[config_key] = name;
  flags_[name] = Flag{kind, std::move(set), {}, std::move(config_key)};
}

void GoFlags::accept(const std::string& name, Kind kind, std::string config_key) {
  take(name, kind, nullptr, std::move(config_key));
}

void GoFlags::refuse(const std::string& name, Kind kind, std::string why, std::string config_key) {
  take(name, kind, nullptr, std::move(config_key));
  flags_[name].refused = std::move(why);
}

const GoFlags::Flag& GoFlags::find(const std::string& name) const {
  const auto found = flags_.find(name);
  if (found == flags_.end()) throw UsageError("flag provided but not defined: -" + name);
  if (!found->second.refused.empty()) {
    throw UsageError("-" + name + " is not supported by polybus: " + found->second.refused);
  }
  return found->second;
}

void GoFlags::apply(const std::string& name, const Flag& flag, const std::string& value,
                    bool& repeated_cleared) {
  if (!flag.set) return;
  if (flag.kind == Kind::repeated && !repeated_cleared) {
    flag.set("");  // the first value replaces what the config file gave
    repeated_cleared = true;
  }
  try {
    flag.set(value);
  } catch (const UsageError& e) {
    throw UsageError("invalid value \"" + value + "\" for flag -" + name + ": " + e.what());
  }
}

bool GoFlags::parse(const std::vector<std::string>& argv, const std::string& config_flag) {
  std::vector<std::pair<std::string, std::string>> given;
  for (std::size_t i = 0; i < argv.size(); ++i) {
    const std::string& arg = argv[i];
    if (arg == "--") {
      if (i + 1 < argv.size()) throw UsageError("unexpected argument '" + argv[i + 1] + "'");
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') throw UsageError("unexpected argument '" + arg + "'");
    std::string name = arg.substr(arg[1] == '-' ? 2 : 1);
    if (name.empty() || name[0] == '-' || name[0] == '=') {
      throw UsageError("bad flag syntax: " + arg);
    }
    if (name == "h" || name == "help") return true;
    std::optional<std::string> value;
    if (const auto equals = name.find('='); equals != std::string::npos) {
      value = name.substr(equals + 1);
      name.resize(equals);
    }
    const Flag& flag = find(name);
    if (!value) {
      if (flag.kind == Kind::boolean) {
        value = "true";
      } else if (i + 1 < argv.size()) {
        value = argv[++i];
      } else {
        throw UsageError("flag needs an argument: -" + name);
      }
    }
    given.emplace_back(name, *value);
  }
  for (const auto& [name, value] : given) {
    if (name == config_flag && !value.empty()) read_config(value);
  }
  std::map<std::string, bool> cleared;
  for (const auto& [name, value] : given) {
    if (name == config_flag) continue;
    apply(name, flags_.at(name), value, cleared[name]);
  }
  return false;
}

void GoFlags::read_config(const std::string& path) {
  for (const auto& [key, value] : read_toml(path)) {
    const auto name = by_config_key_.find(key);
    if (name == by_config_key_.end()) {
      throw UsageError(path + ": option " + key + " is not one of this server's");
    }
    const Flag& flag = find(name->second);
    bool cleared = false;
    if (value.array && flag.kind != Kind::repeated) {
      throw UsageError(path + ": " + key + " takes one value, not a list");
    }
    for (std::string item : value.items) {
      if (flag.kind == Kind::duration && value.integer)
        item += "ms";  // go-options: integers are ms
      apply(name->second, flag, item, cleared);
    }
  }
}

std::string GoFlags::describe() const {
  std::string taken, accepted, refused;
  for (const auto& [name, flag] : flags_) {
    if (!flag.refused.empty()) {
      refused += "  -" + name + ": " + flag.refused + "\n";
    } else if (flag.set) {
      taken += " -" + name;
    } else {
      accepted += " -" + name;
    }
  }
  return "Flags taken as the real server takes them:" + taken +
         "\nAccepted without effect (logging):" + accepted + "\nRefused (exit 2):\n" + refused;
}

std::chrono::nanoseconds parse_go_duration(const std::string& text, const std::string& what) {
  std::size_t pos = 0;
  bool negative = false;
  if (pos < text.size() && (text[pos] == '-' || text[pos] == '+')) negative = text[pos++] == '-';
  if (text.substr(pos) == "0") return std::chrono::nanoseconds(0);
  if (pos == text.size()) throw UsageError("invalid duration \"" + text + "\" for " + what);
  long double total = 0;
  while (pos < text.size()) {
    const std::size_t start = pos;
    while (pos < text.size() &&
           (std::isdigit(static_cast<unsigned char>(text[pos])) || text[pos] == '.')) {
      ++pos;
    }
    const std::string number = text.substr(start, pos - start);
    const std::size_t unit_start = pos;
    while (pos < text.size() && !std::isdigit(static_cast<unsigned char>(text[pos])) &&
           text[pos] != '.') {
      ++pos;
    }
    const std::string unit = text.substr(unit_start, pos - unit_start);
    static const std::map<std::string, long double> kUnits = {
        {"ns", 1},   {"us", 1e3}, {"\xc2\xb5s", 1e3}, {"\xce\xbcs", 1e3},
        {"ms", 1e6}, {"s", 1e9},  {"m", 60e9},        {"h", 3600e9}};
    const auto found = kUnits.find(unit);
    if (number.empty() || number == "." || found == kUnits.end()) {
      throw UsageError("invalid duration \"" + text + "\" for " + what);
    }
    total += std::stold(number) * found->second;
  }
  if (total > 9.2e18L) throw UsageError("invalid duration \"" + text + "\" for " + what);
  const auto ns = static_cast<std::int64_t>(total);
  return std::chrono::nanoseconds(negative ? -ns : ns);
}

bool parse_go_bool(const std::string& text, const std::string& what) {
  if (text == "1" || text == "t" || text == "T" || text == "TRUE" || text == "true" ||
      text == "True")
    return true;
  if (text == "0" || text == "f" || text == "F" || text == "FALSE" || text == "false" ||
      text == "False")
    return false;
  throw UsageError("invalid boolean \"" + text + "\" for " + what);
}

std::int64_t parse_go_int(const std::string& text, const std::string& what) {
  std::string digits = text;
  bool negative = false;
  if (!digits.empty() && (digits[0] == '-' || digits[0] == '+')) {
    negative = digits[0] == '-';
    digits.erase(0, 1);
  }
  int base = 10;
  if (digits.size() > 2 && digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X')) {
    base = 16, digits.erase(0, 2);
  } else if (digits.size() > 2 && digits[0] == '0' && (digits[1] == 'o' || digits[1] == 'O')) {
    base = 8, digits.erase(0, 2);
  } else if (digits.size() > 2 && digits[0] == '0' && (digits[1] == 'b' || digits[1] == 'B')) {
    base = 2, digits.erase(0, 2);
  } else if (digits.size() > 1 && digits[0] == '0') {
    base = 8, digits.erase(0, 1);
  }
  std::size_t used = 0;
  long long value = 0;
  try {
    value = std::stoll(digits, &used, base);
  } catch (const std::exception&) {
    used = 0;
  }
  if (digits.empty() || used != digits.size() || digits[0] == '-' || digits[0] == '+') {
    throw UsageError("invalid integer \"" + text + "\" for " + what);
  }
  return negative ? -value : value;
}

std::pair<std::string, std::uint16_t> parse_listen_address(const std::string& text,
                                                           const std::string& what) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos) throw UsageError(what + " \"" + text + "\": missing port");
  std::string host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host.empty()) host = "0.0.0.0";
  if (host == "localhost") host = "127.0.0.1";
  const std::int64_t port = parse_go_int(text.substr(colon + 1), what);
  if (port < 0 || port > 65535) throw UsageError(what + " \"" + text + "\": invalid port");
  return {host, static_cast<std::uint16_t>(port)};
}

}  // namespace polybus::cli
