#include <atomic>
#include <map>
#include <mutex>

#include "polybus/mem.hpp"
#include "polybus/testing.hpp"

namespace polybus::testing {
namespace {

class MemTestBroker : public TestBroker {
 public:
  MemTestBroker() {
    static std::atomic<int> counter{0};
    name_ = "test-" + std::to_string(++counter);
    broker_ = mem::Broker::get(name_);
  }
  std::string url() const override {
    return "mem://" + name_ + "?msg_timeout=500ms&reconnect_initial=5ms&reconnect_max=100ms";
  }
  void stop() override { broker_->stop(); }
  void start() override { broker_->start(); }

 private:
  std::string name_;
  std::shared_ptr<mem::Broker> broker_;
};

struct Registry {
  std::mutex mutex;
  std::map<std::string, TestBrokerFactory> factories;
};

Registry& registry() {
  static auto* r = [] {
    auto* reg = new Registry;  // process lifetime: factories may register from static initialisers
    reg->factories["mem"] = TestBrokerFactory{"mem", "mem", start_mem_broker};
    return reg;
  }();
  return *r;
}

}  // namespace

std::unique_ptr<TestBroker> start_mem_broker() { return std::make_unique<MemTestBroker>(); }

void register_test_broker(TestBrokerFactory factory) {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::string name = factory.name;
  r.factories[name] = std::move(factory);
}

std::vector<TestBrokerFactory> test_brokers() {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::vector<TestBrokerFactory> out;
  for (auto& [name, f] : r.factories) out.push_back(f);
  return out;
}

}  // namespace polybus::testing
