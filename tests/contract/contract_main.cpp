#define CATCH_CONFIG_RUNNER
#include <cstdlib>
#include <sstream>

#include "contract.hpp"
#include "figg_server_broker.hpp"
#include "nsq_harness_broker.hpp"
#include "polybus/register_all_test_brokers.hpp"

namespace polybus::contract {

std::vector<std::string> broker_names() {
  std::vector<std::string> names;
  if (const char* env = std::getenv("POLYBUS_CONTRACT_BROKERS"); env && *env) {
    std::stringstream list(env);
    for (std::string item; std::getline(list, item, ',');)
      if (!item.empty()) names.push_back(item);
    return names;
  }
  for (const auto& f : testing::test_brokers()) names.push_back(f.name);
  return names;
}

std::unique_ptr<testing::TestBroker> start_broker(const std::string& name) {
  for (const auto& f : testing::test_brokers())
    if (f.name == name) return f.start();
  FAIL("no test broker named '" << name << "' is registered");
  return nullptr;
}

Env::Env(const std::string& name) : broker(start_broker(name)), url(broker->url()) {
  auto scheme = Url::parse(url).scheme;
  const SchemeInfo* info = find_scheme(scheme);
  REQUIRE(info != nullptr);
  caps = info->capabilities;
}

Client Env::connect(Options extra) const {
  ConnectOptions options;
  options.options = std::move(extra);
  return polybus::connect(url, std::move(options));
}

}  // namespace polybus::contract

int main(int argc, char* argv[]) {
  polybus::register_all_schemes();
  polybus::register_all_test_brokers();
  polybus::test::register_real_nsq_brokers();
  polybus::test::register_real_figg_broker();
  return Catch::Session().run(argc, argv);
}
