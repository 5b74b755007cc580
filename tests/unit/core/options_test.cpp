// SPDX-License-Identifier: Apache-2.0
#include <catch2/catch.hpp>

#include "polybus/adapter/registry.hpp"
#include "polybus/error.hpp"
#include "polybus/options.hpp"
#include "polybus/schemes.hpp"

using namespace polybus;
using namespace std::chrono_literals;

TEST_CASE("durations parse with units and reject garbage", "[options]") {
  std::chrono::milliseconds ms{};
  CHECK(parse_duration("250ms", ms));
  CHECK(ms == 250ms);
  CHECK(parse_duration("2s", ms));
  CHECK(ms == 2000ms);
  CHECK(parse_duration("1m", ms));
  CHECK(ms == 60000ms);
  CHECK(parse_duration("1h", ms));
  CHECK(ms == 3600000ms);
  // Without a unit, 42 could be ms or s: refused. 0 and -1 mean the same in every unit.
  CHECK_FALSE(parse_duration("42", ms));
  CHECK_FALSE(parse_duration("5", ms));
  CHECK(parse_duration("0", ms));
  CHECK(ms == 0ms);
  CHECK(parse_duration("-1", ms));
  CHECK(ms == -1ms);
  CHECK_FALSE(parse_duration("", ms));
  CHECK_FALSE(parse_duration("s", ms));
  CHECK_FALSE(parse_duration("5 s", ms));
  CHECK_FALSE(parse_duration("5d", ms));
  CHECK_FALSE(parse_duration("99999999999999999999", ms));
  CHECK_FALSE(parse_duration("9999999999999999h", ms));
}

TEST_CASE("defaults apply when nothing is set", "[options]") {
  auto resolved = ResolvedOptions::resolve(core_option_table(), {}, "test");
  CHECK(resolved.get_duration("op_timeout") == 10s);
  CHECK(resolved.get_int("max_in_flight") == 32);
  CHECK(resolved.get_bool("tls_verify"));
  CHECK(resolved.get_string("reconnect_backoff") == "exponential_jitter");  // +-20%: no herd
  CHECK_FALSE(resolved.was_set("op_timeout"));
}

TEST_CASE("an unknown option is an error naming the key and the known ones", "[options]") {
  Options given{{"max_in_fligt", "5"}};
  try {
    ResolvedOptions::resolve(core_option_table(), given, "nsq");
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(e.code() == errc::invalid_option);
    std::string what = e.what();
    CHECK(what.find("max_in_fligt") != std::string::npos);
    CHECK(what.find("max_in_flight") != std::string::npos);
    CHECK(what.find("nsq") != std::string::npos);
  }
}

TEST_CASE("a misspelt option is answered with the name it is closest to", "[options]") {
  const auto refusal = [](const std::string& key) {
    try {
      ResolvedOptions::resolve(core_option_table(), Options{{key, "1"}}, "mem");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  CHECK_THAT(refusal("max_in_fligt"), Catch::Contains("did you mean 'max_in_flight'?"));
  CHECK_THAT(refusal("envelop"), Catch::Contains("did you mean 'envelope'?"));
  CHECK_THAT(refusal("op_timout"), Catch::Contains("did you mean 'op_timeout'?"));
  CHECK_THAT(refusal("requeue_dleay"), Catch::Contains("did you mean 'requeue_delay'?"));
  // Nothing near: no guess.
  CHECK_THAT(refusal("colour"), !Catch::Contains("did you mean"));
}

TEST_CASE("an out-of-range value names the key and the allowed range", "[options]") {
  Options given{{"handler_concurrency", "0"}};
  try {
    ResolvedOptions::resolve(core_option_table(), given, "mem");
    FAIL("expected an error");
  } catch (const Error& e) {
    std::string what = e.what();
    CHECK(what.find("handler_concurrency") != std::string::npos);
    CHECK(what.find("[1, 256]") != std::string::npos);
  }
}

TEST_CASE("bad booleans, integers, durations and choices are rejected", "[options]") {
  auto table = core_option_table();
  for (auto [key, value] :
       std::vector<std::pair<std::string, std::string>>{{"tls", "maybe"},
                                                        {"max_in_flight", "12x"},
                                                        {"max_in_flight", "-1"},
                                                        {"op_timeout", "0"},
                                                        {"op_timeout", "soon"},
                                                        {"reconnect_backoff", "linear"},
                                                        {"max_frame_size", "1"}}) {
    INFO(key << "=" << value);
    CHECK_THROWS_AS(ResolvedOptions::resolve(table, Options{{key, value}}, "t"), Error);
  }
}

TEST_CASE("adapters override core defaults and add options", "[options]") {
  auto table = core_option_table();
  table.set_default("max_attempts", "5");
  table.add({{"msg_timeout", OptionType::duration, "60s", 1000, 900000, "doc"}});
  auto resolved = ResolvedOptions::resolve(table, Options{{"msg_timeout", "2s"}}, "t");
  CHECK(resolved.get_int("max_attempts") == 5);
  CHECK(resolved.get_duration("msg_timeout") == 2s);
  CHECK(resolved.was_set("msg_timeout"));
  CHECK_THROWS_AS(table.set_default("nope", "1"), Error);
  CHECK(table.describe().find("| msg_timeout | 60s |") != std::string::npos);
}

TEST_CASE("reading an option with the wrong type is a programming error", "[options]") {
  auto resolved = ResolvedOptions::resolve(core_option_table(), {}, "t");
  CHECK_THROWS_AS(resolved.get_int("op_timeout"), Error);
  CHECK_THROWS_AS(resolved.get_bool("no_such_option"), Error);
}

TEST_CASE("a contradictory pair of options is refused, naming both and the values", "[options]") {
  auto table = core_option_table();
  auto refusal = [&](Options given) {
    try {
      ResolvedOptions::resolve(table, given, "t");
    } catch (const Error& e) {
      CHECK(e.code() == errc::invalid_option);
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  // Each value alone is in range; together they contradict each other.
  auto what = refusal({{"reconnect_initial", "5s"}, {"reconnect_max", "1s"}});
  CHECK(what.find("'reconnect_initial' cannot exceed 'reconnect_max'") != std::string::npos);
  CHECK(what.find("reconnect_initial=5000ms, reconnect_max=1000ms") != std::string::npos);
  what = refusal({{"requeue_delay", "2m"}});  // above the default max_requeue_delay (60s)
  CHECK(what.find("'requeue_delay' cannot exceed 'max_requeue_delay'") != std::string::npos);
  what = refusal({{"tls_cert_file", "client.pem"}});
  CHECK(what.find("tls_key_file is empty") != std::string::npos);
  CHECK(refusal({{"tls_cert_file", "c.pem"}, {"tls_key_file", "k.pem"}}) == "accepted");
  CHECK(refusal({{"reconnect_initial", "1s"}, {"reconnect_max", "1s"}}) == "accepted");

  table.add({{"a", OptionType::boolean, "false", 0, 0, "doc"},
             {"b", OptionType::boolean, "false", 0, 0, "doc"}});
  table.add_rule({OptionRule::Kind::not_both_true, "a", "b", "one only"});
  what = refusal({{"a", "true"}, {"b", "true"}});
  CHECK(what.find("t: options 'a' and 'b' cannot both be true: one only") != std::string::npos);
  CHECK(refusal({{"a", "true"}}) == "accepted");
  CHECK(table.describe().find("- 'a' and 'b' cannot both be true: one only") != std::string::npos);
  CHECK_THROWS_AS(table.add_rule({OptionRule::Kind::not_above, "a", "nope", "x"}), Error);
}

TEST_CASE("every scheme's own rules hold for its defaults and refuse contradictions", "[options]") {
  // A default that broke a rule would make every connect of that scheme fail.
  const auto schemes = registered_schemes();
  REQUIRE(schemes.size() >= 7);
  for (const auto& name : schemes) {
    INFO(name);
    auto info = describe_scheme(name);
    REQUIRE(info.has_value());
    CHECK_NOTHROW(ResolvedOptions::resolve(info->options, {}, name));
  }
  for (const auto& name : {"nsq", "nsq+lookupd"}) {
    auto info = describe_scheme(name);
    REQUIRE(info.has_value());
    CHECK_THROWS_WITH(
        ResolvedOptions::resolve(info->options, {{"snappy", "true"}, {"deflate", "true"}}, name),
        Catch::Contains("'snappy' and 'deflate' cannot both be true"));
  }
}

TEST_CASE("a duration without a unit is refused, naming the key and the units", "[options]") {
  try {
    ResolvedOptions::resolve(core_option_table(), {{"op_timeout", "5"}}, "t");
    FAIL("op_timeout=5 was taken (as 5 ms)");
  } catch (const Error& e) {
    CHECK(e.code() == errc::invalid_option);
    CHECK_THAT(e.what(), Catch::Contains("'op_timeout'") && Catch::Contains("'5'") &&
                             Catch::Contains("with a unit (ms, s, m or h"));
  }
  // Every duration option of every scheme: a bare number is refused, the same with a unit is not.
  for (const auto& name : registered_schemes()) {
    auto info = describe_scheme(name);
    REQUIRE(info.has_value());
    for (const auto& spec : info->options.specs()) {
      if (spec.type != OptionType::duration) continue;
      INFO(name << " " << spec.name);
      const auto value = std::to_string(std::max<std::int64_t>(spec.min, 2));
      CHECK_THROWS_AS(ResolvedOptions::resolve(info->options, {{spec.name, value}}, name), Error);
    }
  }
}
