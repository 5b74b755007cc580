// SPDX-License-Identifier: Apache-2.0
// Command lines and config files as the real servers (nsqd, nsqlookupd; Go's flag package and
// go-options) read them, so that a script written for a real server runs against an in-process
// one: -flag and --flag, "-flag=value" and "-flag value", boolean flags that take no separate
// value, repeatable flags, and a TOML config file whose keys are the flags' names with '_' for
// '-' (the command line wins). Every flag is either taken or refused with its reason; a flag
// or config key that is neither is an error, never ignored. Errors throw UsageError (exit 2).
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "polybus/tools/args.hpp"

namespace polybus::cli {

class GoFlags {
 public:
  // duration: a value a config file may also give as an integer of milliseconds (go-options).
  enum class Kind { value, duration, boolean, repeated };
  using Setter = std::function<void(const std::string& value)>;

  // `config_key`: its name in the config file ("" for the flag's name with '_' for '-').
  void take(const std::string& name, Kind kind, Setter set, std::string config_key = "");
  // Accepted and without effect here (logging), said in `why` by --help only.
  void accept(const std::string& name, Kind kind, std::string config_key = "");
  // Refused, naming `why`, on the command line and in the config file.
  void refuse(const std::string& name, Kind kind, std::string why, std::string config_key = "");

  // Reads argv (after the command's name): --help gives true (print usage, exit 0). Then the
  // config file named by `config_flag`, if given, then the command line over it.
  bool parse(const std::vector<std::string>& argv, const std::string& config_flag);

  // Every flag and what becomes of it, for --help.
  std::string describe() const;

 private:
  struct Flag {
    Kind kind;
    Setter set;  // null: accepted without effect, or refused
    std::string refused;
    std::string config_key;
  };
  const Flag& find(const std::string& name) const;
  void apply(const std::string& name, const Flag& flag, const std::string& value,
             bool& repeated_cleared);
  void read_config(const std::string& path);

  std::map<std::string, Flag> flags_;
  std::map<std::string, std::string> by_config_key_;
};

// Go's time.ParseDuration ("1h2m3.5s", "300ms", "0"); UsageError naming `what` otherwise.
std::chrono::nanoseconds parse_go_duration(const std::string& text, const std::string& what);
// Go's strconv.ParseBool.
bool parse_go_bool(const std::string& text, const std::string& what);
// strconv.ParseInt(text, 0, 64): decimal, 0x hex, 0o or 0 octal, 0b binary.
std::int64_t parse_go_int(const std::string& text, const std::string& what);
// "host:port" as Go's net.Listen takes it: an empty host is every interface.
std::pair<std::string, std::uint16_t> parse_listen_address(const std::string& text,
                                                           const std::string& what);

}  // namespace polybus::cli
