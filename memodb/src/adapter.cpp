// SPDX-License-Identifier: Apache-2.0
// The MemoDB adapter: request/reply only, over req0 of our own (see connection.hpp). memodb+tcp
// and memodb+ipc share everything but the address.
#include <mutex>

#include "connection.hpp"
#include "options.hpp"
#include "polybus/adapter/registry.hpp"
#include "polybus/error.hpp"
#include "polybus/memodb.hpp"

namespace polybus::memodb {
namespace {

Capabilities memodb_capabilities() {
  Capabilities c;
  c.request_reply = true;
  c.reconnect_policy = true;
  c.publish = false;
  c.subscribe = false;
  c.publish_confirmed = false;
  c.reply_errors = false;  // memo01 hands the requester a RESULT payload and nothing else
  return c;
}

class MemoDbAdapter : public Adapter {
 public:
  explicit MemoDbAdapter(AdapterContext& context)
      : connection_(std::make_shared<detail::Connection>(context, detail::settings_for(context))),
        workers_option_(static_cast<std::uint32_t>(context.options().get_int("workers"))) {
    connection_->open();
  }
  // Nothing runs after this: the connection is closed and every exchange completed.
  ~MemoDbAdapter() override { connection_->shutdown(); }

  Capabilities capabilities() const override { return memodb_capabilities(); }
  void publish(PublishWork work) override {
    work.done(make_error_code(polybus::errc::not_supported), {},
              "memodb: no publish (a job needs a worker's result: use request)");
  }
  std::shared_ptr<AdapterSubscription> subscribe(const SubscribeSpec&,
                                                 std::shared_ptr<SubscriptionSink>) override {
    throw Error(polybus::errc::not_supported, "memodb: no subscribe (request/reply only)");
  }
  void request(RequestWork work) override { connection_->request(std::move(work)); }
  std::shared_ptr<AdapterSubscription> serve(const ServeSpec& spec,
                                             std::shared_ptr<SubscriptionSink> sink) override {
    // The workers option, when set, else one worker per handler the core runs for this serve.
    const std::uint32_t workers = workers_option_ > 0 ? workers_option_ : spec.concurrency;
    return connection_->serve(spec.topic, std::max<std::uint32_t>(1, workers), std::move(sink));
  }
  void close(Clock::time_point deadline, std::function<void()> done) override {
    connection_->close(deadline, std::move(done));
  }

 private:
  std::shared_ptr<detail::Connection> connection_;
  std::uint32_t workers_option_;  // 0: follow the serve's concurrency
};

SchemeInfo scheme_info(const char* scheme, const char* summary) {
  SchemeInfo info;
  info.scheme = scheme;
  info.summary = summary;
  info.options = detail::option_table();
  info.capabilities = memodb_capabilities();
  info.factory = [](AdapterContext& context) -> std::unique_ptr<Adapter> {
    return std::make_unique<MemoDbAdapter>(context);
  };
  return info;
}

}  // namespace

void register_scheme() {
  // Once: registering again would rewrite the entries while another thread may be connecting.
  static std::once_flag once;
  std::call_once(once, [] {
    polybus::register_scheme(scheme_info("memodb+tcp",
                                         "MemoDB broker (memo01 over NNG's req/rep, "
                                         "tcp://host:port): request/reply jobs and workers"));
    polybus::register_scheme(scheme_info(
        "memodb+ipc",
        "MemoDB broker (memo01 over NNG's req/rep, ipc:///path): request/reply jobs and workers"));
  });
}

}  // namespace polybus::memodb
