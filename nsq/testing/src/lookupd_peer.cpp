// SPDX-License-Identifier: Apache-2.0
#include "lookupd_peer.hpp"

#include <rapidjson/document.h>

#include <asio/connect.hpp>
#include <asio/read.hpp>
#include <asio/write.hpp>

#include "polybus/text/big_endian.hpp"

namespace polybus::nsq::testing::detail {
namespace {

// nsqlookupd's answers are "OK", an error text or IDENTIFY's small JSON.
constexpr std::uint32_t kMaxAnswer = 1024 * 1024;
// Commands waiting for their turn while one waits for its answer.
constexpr std::size_t kMaxQueued = 65536;

std::string size_prefixed(const std::string& body) {
  std::string out;
  append_big_endian<4>(out, body.size());
  return out + body;
}

}  // namespace

LookupdPeer::LookupdPeer(asio::io_context& io, std::string address, Callbacks callbacks)
    : resolver_(io), socket_(io), address_(std::move(address)), callbacks_(std::move(callbacks)) {}

void LookupdPeer::command(std::string line) {
  // Before the connection is up nothing is queued: the connection registers everything there is
  // when it comes up, which covers whatever changed meanwhile.
  if (state_ != State::connected) return;
  // An nsqlookupd that stops answering: the connection is dropped rather than the queue grown
  // (the next one registers everything again).
  if (queue_.size() >= kMaxQueued) {
    return fail("no answer while " + std::to_string(kMaxQueued) + " commands waited");
  }
  queue_.push_back(std::move(line));
  write_next();
}

void LookupdPeer::close() {
  state_ = State::closed;
  ++generation_;
  queue_.clear();
  std::error_code ignored;
  resolver_.cancel();
  socket_.close(ignored);
}

void LookupdPeer::connect() {
  state_ = State::connecting;
  const auto colon = address_.rfind(':');
  const std::string host = colon == std::string::npos ? address_ : address_.substr(0, colon);
  const std::string port = colon == std::string::npos ? "" : address_.substr(colon + 1);
  const std::uint64_t generation = ++generation_;
  resolver_.async_resolve(host, port,
                          [self = shared_from_this(), generation](
                              std::error_code ec, asio::ip::tcp::resolver::results_type results) {
                            if (generation != self->generation_) return;
                            if (ec) return self->fail("cannot resolve: " + ec.message());
                            asio::async_connect(self->socket_, results,
                                                [self, generation](std::error_code connected,
                                                                   const asio::ip::tcp::endpoint&) {
                                                  if (generation != self->generation_) return;
                                                  self->on_connected(connected);
                                                });
                          });
}

void LookupdPeer::on_connected(std::error_code ec) {
  if (ec) return fail("cannot connect: " + ec.message());
  std::error_code ignored;
  socket_.set_option(asio::ip::tcp::no_delay(true), ignored);
  state_ = State::connected;
  // What nsqd's connect callback sends, ahead of whatever was waiting.
  std::deque<std::string> first;
  first.push_back("  V1IDENTIFY\n" + size_prefixed(callbacks_.identify_body()));
  for (std::string& line : callbacks_.registrations()) first.push_back(std::move(line));
  queue_ = std::move(first);
  write_next();
}

void LookupdPeer::write_next() {
  if (busy_ || queue_.empty() || state_ != State::connected) return;
  busy_ = true;
  const std::uint64_t generation = generation_;
  asio::async_write(socket_, asio::buffer(queue_.front()),
                    [self = shared_from_this(), generation](std::error_code ec, std::size_t) {
                      if (generation != self->generation_) return;
                      if (ec) return self->fail("write failed: " + ec.message());
                      self->read_answer();
                    });
}

void LookupdPeer::read_answer() {
  header_.assign(4, '\0');
  const std::uint64_t generation = generation_;
  asio::async_read(
      socket_, asio::buffer(header_),
      [self = shared_from_this(), generation](std::error_code ec, std::size_t) {
        if (generation != self->generation_) return;
        if (ec) return self->fail("read failed: " + ec.message());
        const auto size = static_cast<std::uint32_t>(read_big_endian<4>(self->header_.data()));
        if (size > kMaxAnswer) {
          return self->fail("an answer of " + std::to_string(size) + " bytes, past the " +
                            std::to_string(kMaxAnswer) + "-byte bound");
        }
        self->answer_.assign(size, '\0');
        asio::async_read(self->socket_, asio::buffer(self->answer_),
                         [self, generation](std::error_code read, std::size_t) {
                           if (generation != self->generation_) return;
                           if (read) return self->fail("read failed: " + read.message());
                           const bool identify = self->queue_.front().rfind("  V1", 0) == 0;
                           self->queue_.pop_front();
                           self->busy_ = false;
                           // nsqd drops a connection whose IDENTIFY was refused.
                           if (identify && self->answer_.rfind("E_", 0) == 0) {
                             return self->fail("IDENTIFY refused: " + self->answer_);
                           }
                           if (identify) self->learn_http_address();
                           self->write_next();
                         });
      });
}

void LookupdPeer::learn_http_address() {
  rapidjson::Document document;
  document.Parse(answer_.data(), answer_.size());
  if (document.HasParseError() || !document.IsObject()) return;
  const auto address = document.FindMember("broadcast_address");
  const auto port = document.FindMember("http_port");
  if (address == document.MemberEnd() || !address->value.IsString() ||
      port == document.MemberEnd() || !port->value.IsInt()) {
    return;
  }
  http_address_ =
      std::string(address->value.GetString()) + ":" + std::to_string(port->value.GetInt());
}

void LookupdPeer::fail(const std::string& why) {
  if (callbacks_.report) callbacks_.report("LOOKUPD(" + address_ + "): " + why);
  ++generation_;
  std::error_code ignored;
  socket_.close(ignored);
  queue_.clear();
  busy_ = false;
  state_ = State::disconnected;  // start(), at the next ping, connects again
}

}  // namespace polybus::nsq::testing::detail
