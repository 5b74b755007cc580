// SPDX-License-Identifier: Apache-2.0
#include "lookupd_channels_query.hpp"

#include <rapidjson/document.h>

#include <asio/connect.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/steady_timer.hpp>
#include <asio/write.hpp>
#include <memory>

#include "polybus/text/http.hpp"

namespace polybus::nsq::testing::detail {
namespace {

constexpr std::chrono::seconds kBound{5};
constexpr std::size_t kMaxAnswer = 1024 * 1024;

class ChannelsQuery : public LookupdChannelsQuery,
                      public std::enable_shared_from_this<ChannelsQuery> {
 public:
  void cancel() override { finish({}); }

  ChannelsQuery(asio::io_context& io, std::function<void(std::vector<std::string>)> done)
      : resolver_(io), socket_(io), timer_(io), reader_(kMaxAnswer), done_(std::move(done)) {}

  void start(const std::string& address, const std::string& topic) {
    const auto colon = address.rfind(':');
    if (colon == std::string::npos) return finish({});
    // A valid topic name's one character a query must escape is the '#' of "#ephemeral".
    std::string escaped;
    for (const char c : topic) escaped += c == '#' ? std::string("%23") : std::string(1, c);
    request_ = "GET /channels?topic=" + escaped + " HTTP/1.1\r\nHost: " + address +
               "\r\nAccept: application/vnd.nsq; version=1.0\r\nConnection: close\r\n\r\n";
    timer_.expires_after(kBound);
    timer_.async_wait([self = shared_from_this()](std::error_code ec) {
      if (!ec) self->finish({});
    });
    resolver_.async_resolve(
        address.substr(0, colon), address.substr(colon + 1),
        [self = shared_from_this()](std::error_code ec,
                                    asio::ip::tcp::resolver::results_type results) {
          if (ec) return self->finish({});
          asio::async_connect(self->socket_, results,
                              [self](std::error_code connected, const asio::ip::tcp::endpoint&) {
                                if (connected) return self->finish({});
                                self->send();
                              });
        });
  }

 private:
  void send() {
    asio::async_write(socket_, asio::buffer(request_),
                      [self = shared_from_this()](std::error_code ec, std::size_t) {
                        if (ec) return self->finish({});
                        self->read();
                      });
  }

  void read() {
    socket_.async_read_some(asio::buffer(buffer_),
                            [self = shared_from_this()](std::error_code ec, std::size_t n) {
                              if (self->finished_) return;
                              if (!ec && self->reader_.feed(std::string_view(self->buffer_, n)))
                                return self->finish({});
                              if (ec && self->reader_.finish()) return self->finish({});
                              if (!self->reader_.complete()) {
                                if (ec) return self->finish({});
                                return self->read();
                              }
                              self->finish(self->channels());
                            });
  }

  std::vector<std::string> channels() {
    std::vector<std::string> names;
    if (reader_.status() != 200) return names;
    rapidjson::Document document;
    document.Parse(reader_.body().data(), reader_.body().size());
    if (document.HasParseError() || !document.IsObject()) return names;
    // nsqlookupd 1.x answers {"channels":[...]}; before 1.0 inside "data".
    const rapidjson::Value* root = &document;
    if (document.HasMember("data") && document["data"].IsObject()) root = &document["data"];
    const auto found = root->FindMember("channels");
    if (found == root->MemberEnd() || !found->value.IsArray()) return names;
    for (const auto& value : found->value.GetArray()) {
      if (value.IsString()) names.emplace_back(value.GetString(), value.GetStringLength());
    }
    return names;
  }

  void finish(std::vector<std::string> names) {
    if (finished_) return;
    finished_ = true;
    std::error_code ignored;
    timer_.cancel();
    resolver_.cancel();
    socket_.close(ignored);
    auto done = std::move(done_);
    done(std::move(names));
  }

  asio::ip::tcp::resolver resolver_;
  asio::ip::tcp::socket socket_;
  asio::steady_timer timer_;
  http::ResponseReader reader_;
  std::function<void(std::vector<std::string>)> done_;
  std::string request_;
  char buffer_[16 * 1024];
  bool finished_ = false;
};

}  // namespace

std::shared_ptr<LookupdChannelsQuery> query_lookupd_channels(
    asio::io_context& io, const std::string& http_address, const std::string& topic,
    std::function<void(std::vector<std::string>)> done) {
  auto query = std::make_shared<ChannelsQuery>(io, std::move(done));
  query->start(http_address, topic);
  return query;
}

}  // namespace polybus::nsq::testing::detail
