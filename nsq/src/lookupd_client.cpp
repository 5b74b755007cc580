// SPDX-License-Identifier: Apache-2.0
#include "lookupd_client.hpp"

#include <asio/steady_timer.hpp>

#include "polybus/error.hpp"
#include "polybus/text/http.hpp"

namespace polybus::nsq {
namespace {

// nsqlookupd's answers are small; 60,000 producers fit in 4 MiB.
constexpr std::size_t kMaxResponse = 4 << 20;

struct Request : std::enable_shared_from_this<Request> {
  explicit Request(const AdapterContext& context)
      : timer(context.strand()), reader(kMaxResponse, "lookupd_answer_limit") {}
  std::shared_ptr<Transport> transport;
  asio::steady_timer timer;
  http::ResponseReader reader;
  std::function<void(HttpResult)> done;
  std::string endpoint;

  void finish(HttpResult result) {
    if (!done) return;
    auto callback = std::move(done);
    done = nullptr;
    timer.cancel();
    // Dropping the transport breaks the cycle through its callbacks; a transport that is
    // running one of them keeps itself alive until it returns.
    if (auto t = std::move(transport)) t->close();
    callback(std::move(result));
  }
};

}  // namespace

void http_get(const std::shared_ptr<const AdapterContext>& context,
              const TransportSettings& settings, const HostPort& server, const std::string& target,
              std::chrono::milliseconds timeout, std::function<void(HttpResult)> done) {
  auto request = std::make_shared<Request>(*context);
  request->done = std::move(done);
  request->endpoint = server.to_string();
  std::weak_ptr<Request> weak = request;
  Transport::Callbacks callbacks;
  const std::string text = "GET " + target + " HTTP/1.1\r\nHost: " + server.to_string() +
                           "\r\nAccept: application/vnd.nsq; version=1.0\r\n"
                           "User-Agent: polybus\r\nConnection: close\r\n\r\n";
  // The callbacks hold the request: it lives until the response, the close or the deadline.
  callbacks.on_connected = [request, text] { request->transport->write(text); };
  callbacks.on_data = [request](const std::shared_ptr<ReadChunk>&, const char* data,
                                std::size_t n) {
    if (auto ec = request->reader.feed(std::string_view(data, n)))
      return request->finish({ec, 0, {}, request->endpoint + ": " + request->reader.why()});
    if (request->reader.complete())
      request->finish({{}, request->reader.status(), std::move(request->reader.body()), {}});
  };
  callbacks.on_closed = [request](std::error_code ec, const std::string& detail) {
    if (ec == polybus::errc::disconnected) {
      if (!request->reader.finish())
        return request->finish(
            {{}, request->reader.status(), std::move(request->reader.body()), {}});
      return request->finish({ec, 0, {}, request->endpoint + ": " + request->reader.why()});
    }
    request->finish({ec, 0, {}, detail});
  };
  TransportSettings plain = settings;
  plain.tls.enabled = false;
  plain.protocol = "HTTP";
  plain.handshake_timeout = {};  // the request's own timeout bounds the whole exchange
  request->transport = Transport::create(context->strand(), plain, std::move(callbacks));
  request->timer.expires_after(timeout);
  request->timer.async_wait([weak](std::error_code ec) {
    if (ec) return;
    if (auto r = weak.lock())
      r->finish(
          {make_error_code(polybus::errc::timeout), 0, {}, r->endpoint + ": no answer in time"});
  });
  request->transport->connect(server);
}

std::string skipped_producers_text(const HostPort& lookupd, std::size_t rejected,
                                   std::size_t used) {
  return "nsqlookupd " + lookupd.to_string() + ": " + std::to_string(rejected) +
         " malformed producer entries skipped, " + std::to_string(used) + " used";
}

}  // namespace polybus::nsq
