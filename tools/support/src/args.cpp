// SPDX-License-Identifier: Apache-2.0
#include "polybus/tools/args.hpp"

#include <charconv>

namespace polybus::cli {

Args::Args(const std::vector<std::string>& argv, const std::set<std::string>& value_flags,
           const std::set<std::string>& switch_flags) {
  for (std::size_t i = 0; i < argv.size(); ++i) {
    const std::string& arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      help_ = true;
      continue;
    }
    if (arg.rfind("--", 0) != 0 || arg == "--") {
      positional_.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2);
    std::optional<std::string> inline_value;
    if (auto eq = name.find('='); eq != std::string::npos) {
      inline_value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    if (switch_flags.count(name)) {
      if (inline_value) throw UsageError("--" + name + " takes no value");
      values_[name].push_back("true");
    } else if (value_flags.count(name)) {
      if (inline_value) {
        values_[name].push_back(*inline_value);
      } else {
        if (i + 1 >= argv.size()) throw UsageError("--" + name + " needs a value");
        values_[name].push_back(argv[++i]);
      }
    } else {
      throw UsageError("unknown flag --" + name);
    }
  }
}

const std::string& Args::positional(std::size_t i, const char* name) const {
  if (i >= positional_.size()) throw UsageError(std::string("missing ") + name);
  return positional_[i];
}

std::optional<std::string> Args::value(const std::string& flag) const {
  auto it = values_.find(flag);
  if (it == values_.end()) return std::nullopt;
  return it->second.back();
}

std::vector<std::string> Args::values(const std::string& flag) const {
  auto it = values_.find(flag);
  return it == values_.end() ? std::vector<std::string>{} : it->second;
}

std::uint64_t Args::number(const std::string& flag, std::uint64_t fallback, std::uint64_t min,
                           std::uint64_t max) const {
  auto text = value(flag);
  if (!text) return fallback;
  std::uint64_t n = 0;
  auto [ptr, ec] = std::from_chars(text->data(), text->data() + text->size(), n);
  if (ec != std::errc() || ptr != text->data() + text->size() || n < min || n > max)
    throw UsageError("--" + flag + " must be a number in [" + std::to_string(min) + ", " +
                     std::to_string(max) + "], not '" + *text + "'");
  return n;
}

}  // namespace polybus::cli
