// SPDX-License-Identifier: Apache-2.0
// The core's URL and option handling: Url::parse on the whole input, then what connect() does
// with a URL of a registered scheme (ResolvedOptions::resolve against that scheme's option
// table, the adapters' settings from it: TransportSettings, Backoff, nsq::Settings,
// quickio::detail::ConnectionSettings), and parse_duration on the input and on each query value.
// Checks: only polybus::Error escapes; a parsed URL's parts are well-formed; hosts print and parse
// back; a resolved option reads back with its declared type and range; durations print and parse
// back.
#include <limits>

#include "fuzz_util.hpp"
#include "polybus/adapter/registry.hpp"
#include "polybus/all.hpp"
#include "polybus/backoff.hpp"
#include "polybus/error.hpp"
#include "polybus/io/transport.hpp"
#include "polybus/url.hpp"
// Internal: the settings the NSQ and QuickIO adapters derive from their options.
#include "nsq/src/options.hpp"
#include "quickio/src/connection.hpp"

using namespace polybus;

namespace {

void check_duration(std::string_view text) {
  std::chrono::milliseconds ms{};
  if (!parse_duration(text, ms)) return;
  std::chrono::milliseconds again{};
  FUZZ_CHECK(parse_duration(std::to_string(ms.count()) + "ms", again) && again == ms);
  // Without a unit only 0 and -1 parse: the same in every unit. Any other bare number is refused.
  const bool bare = parse_duration(std::to_string(ms.count()), again);
  FUZZ_CHECK(bare == (ms.count() == 0 || ms.count() == -1));
  if (bare) FUZZ_CHECK(again == ms);
}

void check_url(const Url& url) {
  FUZZ_CHECK(!url.scheme.empty());
  FUZZ_CHECK(url.path.empty() || url.path[0] == '/');
  for (const auto& hp : url.hosts) {
    FUZZ_CHECK(!hp.host.empty());
    // A host without brackets, commas, slashes or '?' prints to text that parses back to it.
    if (hp.host.find_first_of("[]") == std::string::npos) {
      Url again = Url::parse(url.scheme + "://" + hp.to_string());
      FUZZ_CHECK(again.hosts.size() == 1);
      FUZZ_CHECK(again.hosts[0].host == hp.host && again.hosts[0].port == hp.port);
    }
  }
  for (const auto& [key, value] : url.query.values()) {
    FUZZ_CHECK(!key.empty());
    check_duration(value);
  }
}

void resolve(const Url& url) {
  const auto info = find_scheme(url.scheme);
  if (!info) return;
  ResolvedOptions options = ResolvedOptions::resolve(info->options, url.query, url.scheme);
  for (const auto& spec : info->options.specs()) {
    switch (spec.type) {
      case OptionType::boolean:
        (void)options.get_bool(spec.name);
        break;
      case OptionType::integer: {
        auto v = options.get_int(spec.name);
        FUZZ_CHECK(v >= spec.min && v <= spec.max);
        break;
      }
      case OptionType::duration: {
        auto v = options.get_duration(spec.name).count();
        FUZZ_CHECK(v >= spec.min && v <= spec.max);
        break;
      }
      case OptionType::string:
        (void)options.get_string(spec.name);
        break;
      case OptionType::choice: {
        const auto& v = options.get_string(spec.name);
        FUZZ_CHECK(std::find(spec.choices.begin(), spec.choices.end(), v) != spec.choices.end());
        break;
      }
    }
    FUZZ_CHECK(options.was_set(spec.name) == (url.query.values().count(spec.name) == 1));
  }
  (void)TransportSettings::from_options(options);
  if (url.scheme == "nsq" || url.scheme == "nsq+lookupd") {
    auto s = nsq::Settings::from(options);
    FUZZ_CHECK(s.machine.max_frame_size > 0);
    FUZZ_CHECK(!s.machine.identify.to_json().empty());
  }
  if (url.scheme.rfind("quickio", 0) == 0) {
    auto s = quickio::detail::ConnectionSettings::from(url, options);
    FUZZ_CHECK(s.address.port != 0 && !s.address.host.empty());
  }
  Backoff backoff = Backoff::from_options(options);
  for (std::uint32_t attempt = 0; attempt < 40; ++attempt) {
    auto d = backoff.delay(attempt);
    FUZZ_CHECK(d.count() >= 0 && d <= options.get_duration("reconnect_max"));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const bool registered = [] {
    register_all_schemes();
    return true;
  }();
  (void)registered;
  const std::string text(reinterpret_cast<const char*>(data), size);
  check_duration(text);
  try {
    Url url = Url::parse(text);
    check_url(url);
    try {
      url.hosts_or_throw(1);
    } catch (const Error&) {
      FUZZ_CHECK(url.hosts.empty());
    }
    resolve(url);
  } catch (const Error& e) {
    FUZZ_CHECK(e.what()[0] != '\0');
  }
  return 0;
}
