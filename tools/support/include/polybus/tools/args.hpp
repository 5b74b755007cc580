// SPDX-License-Identifier: Apache-2.0
// Command-line parsing for the polybus command: positional arguments and --flags, each command
// declaring which flags it takes. Bad arguments throw UsageError (exit code 2).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace polybus::cli {

// A subcommand's arguments, after its name.
using Argv = std::vector<std::string>;

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Args {
 public:
  // value_flags take a value (--count 5 or --count=5); switch_flags do not.
  Args(const std::vector<std::string>& argv, const std::set<std::string>& value_flags,
       const std::set<std::string>& switch_flags = {});

  const std::vector<std::string>& positional() const { return positional_; }
  const std::string& positional(std::size_t i, const char* name) const;
  bool has(const std::string& flag) const { return values_.count(flag) != 0; }
  // The last value given (a flag given twice: the second wins).
  std::optional<std::string> value(const std::string& flag) const;
  // Every value given, in order (a repeatable flag such as --header).
  std::vector<std::string> values(const std::string& flag) const;
  std::uint64_t number(const std::string& flag, std::uint64_t fallback, std::uint64_t min,
                       std::uint64_t max) const;
  bool help() const { return help_; }

 private:
  std::vector<std::string> positional_;
  std::map<std::string, std::vector<std::string>> values_;
  bool help_ = false;
};

}  // namespace polybus::cli
