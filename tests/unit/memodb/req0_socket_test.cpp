// SPDX-License-Identifier: Apache-2.0
// The req0 socket's exchange deadlines against a scripted rep0 peer: an unanswered request is
// resent at its resend time and fails at its give_up time, a sooner deadline added after a later
// one is kept, and an answered exchange completes once and never times out. One watchdog timer
// serves all of them (Req0Socket::watch_deadline), so these are what it must keep.
#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/post.hpp>
#include <asio/read.hpp>
#include <asio/write.hpp>
#include <atomic>
#include <catch2/catch.hpp>
#include <future>
#include <map>
#include <thread>

#include "memodb/src/req0_socket.hpp"
#include "polybus/error.hpp"
#include "polybus/io/io_thread.hpp"
#include "polybus/memodb/sp.hpp"
#include "test_support.hpp"

using namespace polybus;
using namespace polybus::memodb;
using namespace std::chrono_literals;

namespace {

// A rep0 peer on its own thread (blocking socket calls, all on that thread): it records every
// request it reads and answers those whose body starts with "answer".
class ScriptedRep0 {
 public:
  ScriptedRep0() : acceptor_(io_, {asio::ip::make_address("127.0.0.1"), 0}) {
    thread_ = std::thread([this] { serve(); });
  }
  ~ScriptedRep0() {
    std::error_code ignored;
    {
      std::lock_guard<std::mutex> lock(mutex_);  // serve() clears peer_ before its socket goes
      if (peer_) peer_->shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
    }
    acceptor_.close(ignored);
    thread_.join();
  }
  std::string address() const {
    return "tcp://127.0.0.1:" + std::to_string(acceptor_.local_endpoint().port());
  }
  // How many times a request with this body has arrived, and under how many request IDs.
  int copies(const std::string& body) {
    std::lock_guard<std::mutex> lock(mutex_);
    return copies_[body];
  }
  bool wait_for_copies(const std::string& body, int n) {
    std::unique_lock<std::mutex> lock(mutex_);
    return cv_.wait_for(lock, test::kWaitBound, [&] { return copies_[body] >= n; });
  }
  // What was wrong with the bytes the socket sent, if anything (checked on the test's thread:
  // Catch2's assertions are not thread-safe).
  std::string bad_stream() {
    std::lock_guard<std::mutex> lock(mutex_);
    return bad_stream_;
  }

 private:
  void serve() {
    std::error_code ec;
    asio::ip::tcp::socket socket(io_);
    acceptor_.accept(socket, ec);
    if (ec) return;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      peer_ = &socket;
    }
    const std::string header = sp::connection_header(sp::Protocol::rep0);
    char theirs[sp::kHeaderSize];
    asio::write(socket, asio::buffer(header), ec);
    asio::read(socket, asio::buffer(theirs), ec);
    sp::FrameDecoder decoder(sp::Carrier::tcp, 1 << 20);
    char buffer[4096];
    while (!ec) {
      const std::size_t n = socket.read_some(asio::buffer(buffer), ec);
      std::string_view in(buffer, n);
      while (!in.empty() && !ec) {
        std::error_code bad;
        in.remove_prefix(decoder.feed(in, bad));
        if (bad) {
          std::lock_guard<std::mutex> lock(mutex_);
          bad_stream_ = bad.message();
          ec = bad;  // ends the loop; peer_ is cleared below
          break;
        }
        if (!decoder.ready()) continue;
        const std::string request = decoder.take();
        const std::string body = request.substr(4);
        {
          std::lock_guard<std::mutex> lock(mutex_);
          ++copies_[body];
          cv_.notify_all();
        }
        if (body.rfind("answer", 0) != 0) continue;
        const std::string reply = request.substr(0, 4) + "re:" + body;
        asio::write(socket, asio::buffer(sp::frame_prefix(sp::Carrier::tcp, reply.size()) + reply),
                    ec);
      }
    }
    std::lock_guard<std::mutex> lock(mutex_);
    peer_ = nullptr;
  }

  asio::io_context io_;
  asio::ip::tcp::acceptor acceptor_;
  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::map<std::string, int> copies_;
  std::string bad_stream_;
  asio::ip::tcp::socket* peer_ = nullptr;
};

struct Outcome {
  std::error_code ec;
  std::string reply, detail;
};

// A Req0Socket on a strand of its own io thread, connected to `address`.
class Requester {
 public:
  explicit Requester(const std::string& address) : strand_(asio::make_strand(io_.context())) {
    auto connected = std::make_shared<std::promise<void>>();
    auto future = connected->get_future();
    memodb::detail::Req0Settings settings;
    settings.address = address;
    memodb::detail::Req0Socket::Events events;
    events.connected = [connected, once = std::make_shared<std::atomic<bool>>(false)] {
      if (!once->exchange(true)) connected->set_value();
    };
    socket_ = std::make_shared<memodb::detail::Req0Socket>(strand_, settings, std::move(events));
    asio::post(strand_, [this] { socket_->connect(); });
    up_ = future.wait_for(test::kWaitBound) == std::future_status::ready;
  }
  bool up() const { return up_; }  // the SP headers were exchanged within the wait bound
  ~Requester() {
    // On the io thread (its only thread, so in the strand's order); io_'s destructor then joins
    // it once the socket's cancelled handlers have run.
    io_.run([this] { socket_->close(); });
  }
  // Starts an exchange; its outcome (and how many times it completed) is kept under `name`.
  void exchange(const std::string& body, std::chrono::milliseconds resend,
                std::chrono::milliseconds give_up) {
    asio::post(strand_, [this, body, resend, give_up] {
      socket_->exchange(body, resend, give_up, {},
                        [this, body](std::error_code ec, std::string reply, std::string detail) {
                          std::lock_guard<std::mutex> lock(mutex_);
                          outcomes_[body] = Outcome{ec, std::move(reply), std::move(detail)};
                          ++completions_[body];
                          cv_.notify_all();
                        });
    });
  }
  std::optional<Outcome> wait_for(const std::string& body) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!cv_.wait_for(lock, test::kWaitBound, [&] { return completions_.count(body) > 0; }))
      return std::nullopt;
    return outcomes_[body];
  }
  std::optional<Outcome> outcome(const std::string& body) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!completions_.count(body)) return std::nullopt;
    return outcomes_[body];
  }
  int completions(const std::string& body) {
    std::lock_guard<std::mutex> lock(mutex_);
    return completions_[body];
  }

 private:
  IoThread io_;  // declared first: joined last, after the socket is closed
  Strand strand_;
  std::shared_ptr<memodb::detail::Req0Socket> socket_;
  bool up_ = false;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::map<std::string, Outcome> outcomes_;
  std::map<std::string, int> completions_;
};

}  // namespace

TEST_CASE(
    "req0 socket: an unanswered request is resent at its resend time, then fails at "
    "give_up naming it",
    "[memodb][req0]") {
  ScriptedRep0 peer;
  Requester requester(peer.address());
  REQUIRE(requester.up());
  const auto start = std::chrono::steady_clock::now();
  requester.exchange("silence", 40ms, 400ms);
  REQUIRE(peer.wait_for_copies("silence", 3));  // the first, then two resends
  const auto outcome = requester.wait_for("silence");
  REQUIRE(outcome);
  CHECK(std::chrono::steady_clock::now() - start >= 400ms);
  CHECK(outcome->ec == errc::timeout);
  CHECK(outcome->detail == "no reply within 400ms");
  CHECK(requester.completions("silence") == 1);
  CHECK(peer.bad_stream().empty());
}

TEST_CASE("req0 socket: a sooner deadline made after a later one comes first", "[memodb][req0]") {
  ScriptedRep0 peer;
  Requester requester(peer.address());
  REQUIRE(requester.up());
  requester.exchange("late", 0ms, 60'000ms);
  REQUIRE(peer.wait_for_copies("late", 1));
  const auto start = std::chrono::steady_clock::now();
  requester.exchange("soon", 0ms, 150ms);
  const auto soon = requester.wait_for("soon");
  REQUIRE(soon);
  CHECK(soon->ec == errc::timeout);
  // Bounded well under the later one's minute: the watchdog moved to the sooner time.
  CHECK(std::chrono::steady_clock::now() - start < 30s);
  CHECK_FALSE(requester.outcome("late"));
  CHECK(peer.copies("late") == 1);  // resend 0: never sent again
  CHECK(peer.bad_stream().empty());
}

TEST_CASE("req0 socket: an answered exchange completes once with its reply and never times out",
          "[memodb][req0]") {
  ScriptedRep0 peer;
  Requester requester(peer.address());
  REQUIRE(requester.up());
  // Times far above a loopback round trip, even under TSan on busy cores, so that the answer
  // comes before the first resend and the give_up.
  requester.exchange("answer me", 400ms, 1000ms);
  const auto answered = requester.wait_for("answer me");
  REQUIRE(answered);
  CHECK_FALSE(answered->ec);
  CHECK(answered->reply == "re:answer me");
  const int copies_when_answered = peer.copies("answer me");
  // A later exchange's timeout, after the first one's give_up time and its resend times have
  // passed: the answered one neither completed again nor went out again.
  requester.exchange("silence", 0ms, 1500ms);
  const auto silence = requester.wait_for("silence");
  REQUIRE(silence);
  CHECK(silence->ec == errc::timeout);
  CHECK(requester.completions("answer me") == 1);
  CHECK(peer.copies("answer me") == copies_when_answered);
  CHECK(peer.bad_stream().empty());
}
