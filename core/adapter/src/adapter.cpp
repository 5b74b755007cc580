// SPDX-License-Identifier: Apache-2.0
// What an Adapter does for the operations it does not override: not supported, by name.
#include "polybus/adapter/adapter.hpp"

#include "polybus/error.hpp"

namespace polybus {

void Adapter::request(RequestWork work) {
  work.done(make_error_code(errc::not_supported));
}
std::shared_ptr<AdapterSubscription> Adapter::serve(const ServeSpec&,
                                                    std::shared_ptr<SubscriptionSink>) {
  throw Error(errc::not_supported, "serve is not supported by this adapter");
}
void Adapter::ping(OpCompletion done) {
  done(make_error_code(errc::not_supported));
}
std::string Adapter::reply_topic(std::string_view unique_name) const {
  return std::string(unique_name);
}

}  // namespace polybus
