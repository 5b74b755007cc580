// SPDX-License-Identifier: Apache-2.0
#include "worker_client.hpp"

#include <asio/connect.hpp>
#include <asio/write.hpp>

#include <array>
#include <optional>

#include "polybus/text/http.hpp"

namespace polybus::bench::coordinator {
namespace {

using asio::ip::tcp;
using Clock = std::chrono::steady_clock;

}  // namespace

WorkerClient::WorkerClient(const std::string& base_url, std::chrono::milliseconds timeout,
                           std::size_t max_answer)
    : url_(base_url), timeout_(timeout), max_answer_(max_answer) {
  while (!url_.empty() && url_.back() == '/') url_.pop_back();
  constexpr std::string_view kScheme = "http://";
  if (url_.compare(0, kScheme.size(), kScheme) != 0)
    throw std::invalid_argument("worker '" + base_url + "': not http://HOST:PORT");
  const std::string authority = url_.substr(kScheme.size());
  const auto colon = authority.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == authority.size() ||
      authority.find('/') != std::string::npos)
    throw std::invalid_argument("worker '" + base_url + "': not http://HOST:PORT");
  host_ = authority.substr(0, colon);
  if (host_.size() > 2 && host_.front() == '[' && host_.back() == ']')
    host_ = host_.substr(1, host_.size() - 2);
  port_ = authority.substr(colon + 1);
}

std::string WorkerClient::post(std::string_view path, std::string_view body) {
  return call("POST", path, body);
}

std::string WorkerClient::get(std::string_view path) {
  return call("GET", path, {});
}

void WorkerClient::close() {
  std::error_code ignored;
  socket_.close(ignored);
}

std::string WorkerClient::call(std::string_view method, std::string_view path,
                               std::string_view body) {
  std::string request = std::string(method) + " " + std::string(path) +
                        " HTTP/1.1\r\nHost: " + url_.substr(7) +
                        "\r\nAccept: */*\r\nUser-Agent: polybus-bench\r\n";
  if (method == "POST") request += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  request += "\r\n";
  request.append(body.data(), body.size());
  // A kept connection the worker has closed meanwhile fails before any answer: once more on a
  // new one, as OMB's HTTP client resends then. Never after the deadline: the worker may be
  // doing it still, and a second /create-consumers would make twice the consumers.
  const bool reused = socket_.is_open();
  bool answered = false;
  try {
    return attempt(request, path, answered);
  } catch (const WorkerCallError& e) {
    if (!reused || answered || e.timed_out) throw;
  }
  return attempt(request, path, answered);
}

std::string WorkerClient::attempt(const std::string& request, std::string_view path,
                                  bool& answered) {
  const auto deadline = Clock::now() + timeout_;
  const std::string where = url_ + std::string(path);
  tcp::resolver resolver(io_);
  // Runs the io_context until `done` or the deadline; past it the resolve is cancelled and the
  // socket closed (which ends the operation) and its handler run, so that nothing is left
  // pending.
  const auto wait = [&](const std::optional<std::error_code>& done) {
    io_.restart();
    while (!done && io_.run_one_until(deadline) > 0) {
    }
    if (done) return;
    resolver.cancel();
    close();
    io_.restart();
    io_.run();
    throw WorkerCallError(where + ": no answer within " + std::to_string(timeout_.count()) + " ms",
                          0, true);
  };
  std::optional<std::error_code> done;
  if (!socket_.is_open()) {
    tcp::resolver::results_type endpoints;
    resolver.async_resolve(host_, port_,
                           [&](std::error_code ec, tcp::resolver::results_type results) {
                             endpoints = std::move(results);
                             done = ec;
                           });
    wait(done);
    if (*done) throw WorkerCallError(where + ": cannot resolve " + host_ + ": " + done->message());
    done.reset();
    asio::async_connect(socket_, endpoints,
                        [&](std::error_code ec, const tcp::endpoint&) { done = ec; });
    wait(done);
    if (*done) {
      close();
      throw WorkerCallError(where + ": cannot connect: " + done->message());
    }
    std::error_code ignored;
    socket_.set_option(tcp::no_delay(true), ignored);
  }
  done.reset();
  asio::async_write(socket_, asio::buffer(request),
                    [&](std::error_code ec, std::size_t) { done = ec; });
  wait(done);
  if (*done) {
    close();
    throw WorkerCallError(where + ": cannot send: " + done->message());
  }
  http::ResponseReader reader(max_answer_, "the answer's bound");
  std::array<char, 64 * 1024> buffer;
  while (!reader.complete()) {
    done.reset();
    std::size_t got = 0;
    socket_.async_read_some(asio::buffer(buffer), [&](std::error_code ec, std::size_t n) {
      got = n;
      done = ec;
    });
    wait(done);
    if (got > 0) answered = true;
    std::error_code ec =
        *done ? std::error_code{} : reader.feed(std::string_view(buffer.data(), got));
    if (*done == asio::error::eof) ec = reader.finish();
    if (ec || (*done && *done != asio::error::eof)) {
      close();
      throw WorkerCallError(where + ": " +
                            (ec ? reader.why() : "the connection ended: " + done->message()));
    }
    if (*done == asio::error::eof && !reader.complete()) {
      close();
      throw WorkerCallError(where + ": the connection ended before the answer");
    }
  }
  if (!reader.reusable()) close();
  if (reader.status() != 200) {
    std::string words = reader.body().substr(0, 200);
    throw WorkerCallError(
        where + ": status " + std::to_string(reader.status()) + (words.empty() ? "" : ": " + words),
        reader.status());
  }
  return std::move(reader.body());
}

}  // namespace polybus::bench::coordinator
