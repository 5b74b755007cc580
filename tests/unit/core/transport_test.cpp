// SPDX-License-Identifier: Apache-2.0
// The shared TCP/TLS transport against small blocking servers on loopback.
#include <sys/socket.h>
#include <asio/ip/tcp.hpp>
#include <asio/post.hpp>
#include <asio/read.hpp>
#include <asio/read_until.hpp>
#include <asio/ssl.hpp>
#include <asio/write.hpp>
#include <catch2/catch.hpp>
#include <future>
#include <set>
#include <thread>
#include <tuple>

#include "polybus/error.hpp"
#include "polybus/io/transport.hpp"
#include "polybus/tools/allocation_counter.hpp"
#include "test_support.hpp"
#include "tls_certs.hpp"

using namespace polybus;
using namespace polybus::test;
using asio::ip::tcp;

namespace {

enum class Mode { echo, tls_echo, starttls_echo, starttls_late_echo, silent };

// How long starttls_late_echo keeps the client's in-band handshake waiting: a stalled server, far
// past the write_timeout of the test that uses it and far within its connect_timeout.
constexpr auto kLateHandshake = std::chrono::milliseconds(800);

// Accepts connections on 127.0.0.1 and serves each on its own thread with blocking I/O.
class TestServer {
 public:
  TestServer(Mode mode, const TestCertificates* certs = nullptr, bool require_client_cert = false)
      : mode_(mode),
        acceptor_(io_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)),
        ssl_(asio::ssl::context::tls_server) {
    if (certs) {
      ssl_.use_certificate_chain_file(certs->server_cert_file);
      ssl_.use_private_key_file(certs->server_key_file, asio::ssl::context::pem);
      if (require_client_cert) {
        ssl_.load_verify_file(certs->ca_file);
        ssl_.set_verify_mode(asio::ssl::verify_peer | asio::ssl::verify_fail_if_no_peer_cert);
      }
    }
    accept_thread_ = std::thread([this] { accept_loop(); });
  }
  ~TestServer() {
    stopping_ = true;
    // Closing a descriptor does not wake a thread blocked on it; shutting it down does.
    ::shutdown(acceptor_.native_handle(), SHUT_RDWR);
    accept_thread_.join();
    std::error_code ignored;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (auto& s : sockets_) s->shutdown(tcp::socket::shutdown_both, ignored);
    }
    for (auto& t : connection_threads_) t.join();
    for (auto& s : sockets_) s->close(ignored);
    acceptor_.close(ignored);
  }
  HostPort address() const { return {"127.0.0.1", acceptor_.local_endpoint().port()}; }
  int accepted() const { return accepted_.load(); }

 private:
  void accept_loop() {
    while (!stopping_) {
      auto socket = std::make_shared<tcp::socket>(io_);
      std::error_code ec;
      acceptor_.accept(*socket, ec);
      if (ec) return;
      ++accepted_;
      std::lock_guard<std::mutex> lock(mutex_);
      sockets_.push_back(socket);
      connection_threads_.emplace_back([this, socket] { serve(socket); });
    }
  }
  void serve(const std::shared_ptr<tcp::socket>& socket) {
    std::error_code ec;
    char data[4096];
    if (mode_ == Mode::silent) {
      socket->read_some(asio::buffer(data), ec);  // until the peer or the test closes
      return;
    }
    if (mode_ == Mode::echo) {
      for (;;) {
        auto n = socket->read_some(asio::buffer(data), ec);
        if (ec) return;
        asio::write(*socket, asio::buffer(data, n), ec);
      }
    }
    asio::ssl::stream<tcp::socket&> tls(*socket, ssl_);
    if (mode_ == Mode::starttls_echo || mode_ == Mode::starttls_late_echo) {
      std::string line;
      asio::read_until(*socket, asio::dynamic_buffer(line), '\n', ec);
      if (ec) return;
      asio::write(*socket, asio::buffer("OK\n", 3), ec);
      if (mode_ == Mode::starttls_late_echo) std::this_thread::sleep_for(kLateHandshake);
    }
    tls.handshake(asio::ssl::stream_base::server, ec);
    if (ec) return;
    for (;;) {
      auto n = tls.read_some(asio::buffer(data), ec);
      if (ec) return;
      asio::write(tls, asio::buffer(data, n), ec);
    }
  }

  Mode mode_;
  asio::io_context io_;
  tcp::acceptor acceptor_;
  asio::ssl::context ssl_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> accepted_{0};
  std::mutex mutex_;
  std::vector<std::shared_ptr<tcp::socket>> sockets_;
  std::thread accept_thread_;
  std::vector<std::thread> connection_threads_;
};

// A client transport on its own io thread, recording what happens to it.
class Client {
 public:
  explicit Client(TransportSettings settings = {})
      : strand_(asio::make_strand(io_)), work_(asio::make_work_guard(io_)) {
    Transport::Callbacks callbacks;
    callbacks.on_connected = [this] { events_.add("connected"); };
    callbacks.on_write_room = [this] { events_.add("write room"); };
    callbacks.on_written = [this](std::uint64_t total) {
      const auto before = polybus::cli::allocations_on_this_thread();
      {
        std::lock_guard<std::mutex> lock(mutex_);
        written_totals_.push_back(total);
        cv_.notify_all();
      }
      recording_allocations_ += polybus::cli::allocations_on_this_thread() - before;
    };
    callbacks.on_data = [this](const std::shared_ptr<ReadChunk>& chunk, const char* data,
                               std::size_t n) {
      const auto before = polybus::cli::allocations_on_this_thread();
      if (on_chunk_hook) on_chunk_hook(chunk, data, n);
      {
        std::lock_guard<std::mutex> lock(mutex_);
        received_.append(data, n);
        cv_.notify_all();
      }
      if (on_data_hook) on_data_hook();
      recording_allocations_ += polybus::cli::allocations_on_this_thread() - before;
    };
    callbacks.on_closed = [this](std::error_code ec, const std::string& detail) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        closed_ec_ = ec;
        closed_detail_ = detail;
      }
      events_.add("closed");
    };
    transport_ = Transport::create(strand_, std::move(settings), std::move(callbacks));
    thread_ = std::thread([this] { io_.run(); });
  }
  ~Client() {
    run([this] { transport_->close(); });
    work_.reset();
    io_.stop();
    thread_.join();
  }
  template <typename Fn>
  void run(Fn fn) {
    asio::post(strand_, fn);
  }
  // Connects; returns what the transport reported first ("connected" or "closed").
  std::string connect(const HostPort& address) {
    const auto before = events_.total();
    run([this, address] { transport_->connect(address); });
    if (!events_.wait_for_count(before + 1)) return "nothing within the wait bound";
    return events_.order()[before];
  }
  bool wait_received(const std::string& expected) {
    std::unique_lock<std::mutex> lock(mutex_);
    return cv_.wait_for(lock, kWaitBound, [&] { return received_ == expected; });
  }
  // The totals on_written reported, once the last reaches at least `total`.
  std::vector<std::uint64_t> wait_written(std::uint64_t total) {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait_for(lock, kWaitBound,
                 [&] { return !written_totals_.empty() && written_totals_.back() >= total; });
    return written_totals_;
  }
  std::uint64_t last_written() {
    std::lock_guard<std::mutex> lock(mutex_);
    return written_totals_.empty() ? 0 : written_totals_.back();
  }
  std::error_code closed_ec() {
    std::lock_guard<std::mutex> lock(mutex_);
    return closed_ec_;
  }
  std::string closed_detail() {
    std::lock_guard<std::mutex> lock(mutex_);
    return closed_detail_;
  }

  asio::io_context io_;
  Strand strand_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::shared_ptr<Transport> transport_;
  Collector events_;
  std::function<void()> on_data_hook;  // strand
  // Strand: sees each read's chunk, as a parser that keeps views into it does.
  std::function<void(const std::shared_ptr<ReadChunk>&, const char*, std::size_t)> on_chunk_hook;
  // Strand: what this class's own on_data and on_written allocated in recording what they saw
  // (the received string and the totals grow), which is not the transport's to count.
  std::uint64_t recording_allocations_ = 0;

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::string received_;
  std::vector<std::uint64_t> written_totals_;
  std::error_code closed_ec_;
  std::string closed_detail_;
  std::thread thread_;
};

}  // namespace

TEST_CASE("bytes written arrive in order and echo back", "[transport]") {
  TestServer server(Mode::echo);
  Client client;
  client.run([&] { client.transport_->connect(server.address()); });
  std::string expected;
  client.run([&] {
    for (int i = 0; i < 500; ++i) client.transport_->write("piece-" + std::to_string(i) + ";");
  });
  for (int i = 0; i < 500; ++i) expected += "piece-" + std::to_string(i) + ";";
  REQUIRE(client.wait_received(expected));
  CHECK(client.events_.count("connected") == 1);
}

TEST_CASE("copied, owned and shared writes interleave in order, over many writes", "[transport]") {
  // write_copy appends to a queued piece or reuses strings kept from earlier writes; small
  // owned and shared bytes are copied into those pieces, large ones queued as their own (either
  // side of kCopyAtMost); the queue slides and compacts as it drains. Whatever the mix, the
  // bytes arrive as written.
  const auto body_of = [](int i) {
    const std::size_t n = i % 25 == 0 ? 1025 + static_cast<std::size_t>(i) : i % 7;
    return std::string(n, static_cast<char>('a' + i % 26)) + ";";
  };
  const auto tail_of = [](int i) {
    return std::string(static_cast<std::size_t>(i * 13 % 2500), 't');
  };
  TestServer server(Mode::echo);
  Client client;
  client.run([&] { client.transport_->connect(server.address()); });
  std::string expected;
  for (int round = 0; round < 20; ++round) {
    std::string sent;
    for (int i = 0; i < 300; ++i) {
      const std::string head = "h" + std::to_string(round) + "." + std::to_string(i) + "|";
      sent += head + body_of(i) + (i % 3 == 0 ? tail_of(i) : "");
    }
    expected += sent;
    client.run([&client, round, &body_of, &tail_of] {
      for (int i = 0; i < 300; ++i) {
        const std::string head = "h" + std::to_string(round) + "." + std::to_string(i) + "|";
        client.transport_->write_copy(head);
        client.transport_->write(std::make_shared<const std::string>(body_of(i)));
        if (i % 3 == 0) client.transport_->write(tail_of(i));
      }
    });
    REQUIRE(client.wait_received(expected));  // drained before the next round: strings recycled
  }
  CHECK(client.events_.count("connected") == 1);
}

TEST_CASE("large writes built in spare_string's strings allocate nothing once they have grown",
          "[transport]") {
  // A caller that builds a large write itself (QuickIO's events past kCopiedAtMost) takes a
  // written piece's string back instead of making one per write.
  constexpr std::size_t kSize = 20 * 1024;
  TestServer server(Mode::echo);
  Client client;
  client.run([&] { client.transport_->connect(server.address()); });
  // Writes one large string built in a spare one; says what spare_string gave and the io
  // thread's allocations over the whole of it (take, fill, write).
  struct Round {
    std::size_t capacity_given = 0;
    bool empty_given = false;
    std::uint64_t allocations = 0;
  };
  std::string expected;
  const auto write_round = [&](int round) {
    std::promise<Round> done;
    client.run([&] {
      Round r;
      const auto before =
          polybus::cli::allocations_on_this_thread() - client.recording_allocations_;
      std::string bytes = client.transport_->spare_string(kSize);
      r.capacity_given = bytes.capacity();
      r.empty_given = bytes.empty();
      bytes.assign(kSize, static_cast<char>('a' + round % 26));
      client.transport_->write(std::move(bytes));
      // Counted once the write has started too: its flush was posted ahead of this.
      // Whether the echo of it has come back by then is the scheduler's to say, so what
      // recording it allocated is left out.
      client.run([&client, &done, r, before]() mutable {
        r.allocations =
            polybus::cli::allocations_on_this_thread() - client.recording_allocations_ - before;
        done.set_value(r);
      });
    });
    expected += std::string(kSize, static_cast<char>('a' + round % 26));
    const Round r = done.get_future().get();
    REQUIRE(client.wait_received(expected));  // written, so its string is spare again
    return r;
  };
  const Round first = write_round(0);
  CHECK(first.capacity_given < kSize);                         // nothing written yet: nothing spare
  for (int round = 1; round < 4; ++round) write_round(round);  // asio's caches warm up
  for (int round = 4; round < 20; ++round) {
    const Round r = write_round(round);
    CAPTURE(round);
    CHECK(r.capacity_given >= kSize);
    CHECK(r.empty_given);
    CHECK(r.allocations == 0);
  }
}

TEST_CASE("what a handler writes before close() or fail() still goes out", "[transport]") {
  // Writes leave when the handler that made them is done; closing in the same handler must not
  // drop them (a WebSocket close frame answered as the link fails, a last POST).
  const bool failing = GENERATE(false, true);
  CAPTURE(failing);
  asio::io_context server_io;
  tcp::acceptor acceptor(server_io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  Client client;
  REQUIRE(client.connect({"127.0.0.1", acceptor.local_endpoint().port()}) == "connected");
  tcp::socket peer(server_io);
  acceptor.accept(peer);
  client.run([&client, failing] {
    client.transport_->write_copy("last ");
    client.transport_->write(std::string(2000, 'w'));  // past kCopiedAtMost: a piece of its own
    if (failing)
      client.transport_->fail(make_error_code(errc::protocol_error), "the test fails it");
    else
      client.transport_->close();
  });
  std::string got;
  std::error_code ec;
  asio::read(peer, asio::dynamic_buffer(got), ec);  // to the end of the stream
  CHECK(ec == asio::error::eof);
  CHECK(got == "last " + std::string(2000, 'w'));
}

TEST_CASE("on_written reports a running total that reaches each write's total_queued mark",
          "[transport]") {
  TestServer server(Mode::echo);
  Client client;
  std::promise<std::vector<std::uint64_t>> marks;
  client.run([&] {
    client.transport_->connect(server.address());
    std::vector<std::uint64_t> m;
    for (int i = 0; i < 100; ++i) {
      client.transport_->write(std::string(1000 + i, 'x'));
      m.push_back(client.transport_->total_queued());
    }
    marks.set_value(m);
  });
  auto m = marks.get_future().get();
  REQUIRE(m.size() == 100);
  CHECK(m.front() == 1000);
  auto totals = client.wait_written(m.back());
  REQUIRE(!totals.empty());
  CHECK(totals.back() == m.back());  // every byte, and no more
  for (std::size_t i = 1; i < totals.size(); ++i) CHECK(totals[i] > totals[i - 1]);
}

TEST_CASE("a write the socket takes at once is reported written before the strand's next handler",
          "[transport]") {
  // A consumer's acks go out in the flush's own turn: no turn of the event loop for the write's
  // completion.
  TestServer server(Mode::echo);
  Client client;
  REQUIRE(client.connect(server.address()) == "connected");
  std::promise<std::pair<std::uint64_t, std::uint64_t>> seen;  // (written, queued) after the turn
  bool answered = false;                                       // strand
  client.on_data_hook = [&] {
    if (answered) return;
    answered = true;
    client.transport_->write_copy("answer");
    const std::uint64_t queued = client.transport_->total_queued();
    // Posted after the flush: the answer is written by then.
    asio::post(client.strand_, [&, queued] { seen.set_value({client.last_written(), queued}); });
  };
  client.run([&] { client.transport_->write_copy("ping"); });
  auto future = seen.get_future();
  REQUIRE(future.wait_for(kWaitBound) == std::future_status::ready);
  const auto [written, queued] = future.get();
  CHECK(queued == 10);
  CHECK(written == queued);
  CHECK(client.wait_received("pinganswer"));
}

TEST_CASE("a write larger than the socket takes at once goes out whole, the rest as the peer reads",
          "[transport]") {
  TestServer server(Mode::echo);
  Client client;
  REQUIRE(client.connect(server.address()) == "connected");
  std::string big(8 * 1024 * 1024, '\0');
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>('a' + (i * 7) % 26);
  client.run([&client, big] {
    client.transport_->write_copy("head;");
    client.transport_->write(big);
    client.transport_->write_copy(";tail");
  });
  const std::string expected = "head;" + big + ";tail";
  REQUIRE(client.wait_received(expected));
  const auto totals = client.wait_written(expected.size());
  REQUIRE(!totals.empty());
  CHECK(totals.back() == expected.size());
}

TEST_CASE("writes queued before the connection is up are sent once it is", "[transport]") {
  TestServer server(Mode::echo);
  Client client;
  client.run([&] {
    client.transport_->connect(server.address());
    client.transport_->write("early");
  });
  REQUIRE(client.wait_received("early"));
}

TEST_CASE("a refused connection reports connect_failed naming the endpoint", "[transport]") {
  // Bind then close a listener: its port is very likely unused for the moment of the test.
  std::uint16_t port;
  {
    asio::io_context io;
    tcp::acceptor a(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    port = a.local_endpoint().port();
  }
  Client client;
  client.run([&] { client.transport_->connect({"127.0.0.1", port}); });
  REQUIRE(client.events_.wait_for_count(1));
  CHECK(client.events_.count("closed") == 1);
  CHECK(client.closed_ec() == errc::connect_failed);
  CHECK(client.closed_detail().find("127.0.0.1:" + std::to_string(port)) != std::string::npos);
}

TEST_CASE("a peer that closes is reported once as disconnected", "[transport]") {
  Client client;
  {
    TestServer server(Mode::echo);
    REQUIRE(client.connect(server.address()) == "connected");
  }  // the server goes away
  REQUIRE(client.events_.wait_for_count(2));
  CHECK(client.events_.count("closed") == 1);
  CHECK(client.closed_ec() == errc::disconnected);
}

TEST_CASE("close() ends the connection without reporting it", "[transport]") {
  TestServer server(Mode::echo);
  Client client;
  REQUIRE(client.connect(server.address()) == "connected");
  Latch closed;
  std::atomic<bool> still_connected{true};
  client.run([&] {
    client.transport_->close();
    client.transport_->close();
    still_connected = client.transport_->connected();
    closed.count_down();
  });
  REQUIRE(closed.wait_for(1));
  CHECK_FALSE(still_connected.load());
  CHECK(client.events_.count("closed") == 0);
}

TEST_CASE("silence past the idle timeout calls the idle hook", "[transport]") {
  TestServer server(Mode::silent);
  Client client;
  Latch idle;
  client.run([&] {
    client.transport_->connect(server.address());
    client.transport_->set_idle_timeout(std::chrono::milliseconds(50), [&] { idle.count_down(); });
  });
  REQUIRE(idle.wait_for(2));
}

namespace {

// Writes far more than loopback's socket buffers hold to a peer that stopped reading, so that a
// write is left waiting; the connection must then end with errc::timeout. Returns its detail.
std::string stall_until_write_timeout(Client& client) {
  const auto chunk = std::make_shared<const std::string>(std::size_t{1} << 20, 'w');
  client.run([&] {
    for (int i = 0; i < 64; ++i) client.transport_->write(chunk);
  });
  REQUIRE(client.events_.wait_for_count(2));
  CHECK(client.events_.count("closed") == 1);
  CHECK(client.closed_ec() == errc::timeout);
  return client.closed_detail();
}

}  // namespace

TEST_CASE("a peer that stops reading trips write_timeout, named with the endpoint", "[transport]") {
  TestServer server(Mode::silent);  // reads once, then never again
  TransportSettings settings;
  settings.write_timeout = std::chrono::milliseconds(200);
  settings.max_write_buffer = std::size_t{1} << 30;
  Client client(settings);
  REQUIRE(client.connect(server.address()) == "connected");
  CHECK_THAT(stall_until_write_timeout(client), Catch::Contains("made no progress for 200ms") &&
                                                    Catch::Contains(server.address().to_string()));
}

TEST_CASE("write_timeout still trips after writes that went through outlived its first deadline",
          "[transport]") {
  // One timer watches every write, armed by the first and moved on only when it fires: it must
  // neither fail writes that complete nor stop watching once it found none under way.
  TestServer server(Mode::silent);  // reads once; loopback's buffers take the small writes
  TransportSettings settings;
  settings.write_timeout = std::chrono::milliseconds(50);
  settings.max_write_buffer = std::size_t{1} << 30;
  Client client(settings);
  REQUIRE(client.connect(server.address()) == "connected");
  const std::string small(100, 's');
  std::uint64_t total = 0;
  const auto begun = std::chrono::steady_clock::now();
  // Each write waits for the last to be written; past three deadlines of the first.
  while (std::chrono::steady_clock::now() - begun < 3 * settings.write_timeout) {
    client.run([&client, small] { client.transport_->write_copy(small); });
    total += small.size();
    const auto written = client.wait_written(total);
    REQUIRE((!written.empty() && written.back() >= total));
  }
  CHECK(client.events_.count("closed") == 0);
  CHECK_THAT(stall_until_write_timeout(client), Catch::Contains("made no progress for 50ms"));
}

TEST_CASE("writes past max_write_buffer end the connection with limit_exceeded, naming both",
          "[transport]") {
  TestServer server(Mode::silent);
  TransportSettings settings;
  settings.write_timeout = std::chrono::milliseconds(0);  // only the buffer bound is at work
  settings.max_write_buffer = std::size_t{1} << 20;
  Client client(settings);
  REQUIRE(client.connect(server.address()) == "connected");
  const auto chunk = std::make_shared<const std::string>(std::size_t{64} << 10, 'b');
  client.run([&] {
    for (int i = 0; i < 1024 && client.transport_->connected(); ++i)
      client.transport_->write(chunk);
  });
  REQUIRE(client.events_.wait_for_count(2));
  CHECK(client.events_.count("closed") == 1);
  CHECK(client.closed_ec() == errc::limit_exceeded);
  CHECK_THAT(client.closed_detail(), Catch::Contains("max_write_buffer=1048576") &&
                                         Catch::Contains(server.address().to_string()));
}

TEST_CASE("write_room says no past half of max_write_buffer and on_write_room follows the drain",
          "[transport]") {
  TestServer server(Mode::echo);
  TransportSettings settings;
  settings.max_write_buffer = std::size_t{1} << 20;
  Client client(settings);
  REQUIRE(client.connect(server.address()) == "connected");
  const auto chunk = std::make_shared<const std::string>(std::size_t{64} << 10, 'r');
  Latch filled;
  std::size_t queued_at_no = 0;
  int writes = 0;
  client.run([&] {
    // One strand turn: nothing is written meanwhile, so the queue only grows.
    while (client.transport_->write_room()) {
      client.transport_->write(chunk);
      ++writes;
    }
    queued_at_no = client.transport_->queued_bytes();
    filled.count_down();
  });
  REQUIRE(filled.wait_for(1));
  CHECK(queued_at_no >= settings.max_write_buffer / 2);
  CHECK(queued_at_no < settings.max_write_buffer);
  REQUIRE(client.events_.wait_until([](const auto& seen) { return seen.count("write room") > 0; }));
  CHECK(client.events_.count("closed") == 0);
  CHECK(client.events_.count("write room") == 1);  // owed once per "no"
  CHECK(client.wait_written(static_cast<std::uint64_t>(writes) * chunk->size()).back() ==
        static_cast<std::uint64_t>(writes) * chunk->size());
}

TEST_CASE("TLS with the test CA verifies and carries data", "[transport][tls]") {
  TestCertificates certs;
  TestServer server(Mode::tls_echo, &certs);
  TransportSettings settings;
  settings.tls.enabled = true;
  settings.tls.ca_file = certs.ca_file;
  Client client(settings);
  client.run([&] { client.transport_->connect({"localhost", server.address().port}); });
  client.run([&] { client.transport_->write("secret"); });
  REQUIRE(client.wait_received("secret"));
}

TEST_CASE("TLS verification fails against an unrelated CA, and passes with verify off",
          "[transport][tls]") {
  TestCertificates certs;
  TestServer server(Mode::tls_echo, &certs);
  {
    TransportSettings settings;
    settings.tls.enabled = true;
    settings.tls.ca_file = certs.other_ca_file;
    Client client(settings);
    REQUIRE(client.connect(server.address()) == "closed");
    CHECK(client.closed_ec() == errc::tls_error);
  }
  {
    TransportSettings settings;
    settings.tls.enabled = true;
    settings.tls.verify = false;
    Client client(settings);
    client.run([&] { client.transport_->connect(server.address()); });
    client.run([&] { client.transport_->write("x"); });
    REQUIRE(client.wait_received("x"));
  }
}

TEST_CASE("TLS verification fails for a name the certificate does not carry", "[transport][tls]") {
  TestCertificates certs;
  TestServer server(Mode::tls_echo, &certs);
  TransportSettings settings;
  settings.tls.enabled = true;
  settings.tls.ca_file = certs.ca_file;
  settings.tls.server_name = "not-this-host.example";
  Client client(settings);
  REQUIRE(client.connect(server.address()) == "closed");
  CHECK(client.closed_ec() == errc::tls_error);
}

TEST_CASE("a client certificate is presented when the server requires one", "[transport][tls]") {
  TestCertificates certs;
  TestServer server(Mode::tls_echo, &certs, true);
  TransportSettings settings;
  settings.tls.enabled = true;
  settings.tls.ca_file = certs.ca_file;
  settings.tls.cert_file = certs.client_cert_file;
  settings.tls.key_file = certs.client_key_file;
  Client client(settings);
  client.run([&] { client.transport_->connect(server.address()); });
  client.run([&] { client.transport_->write("mutual"); });
  REQUIRE(client.wait_received("mutual"));
}

TEST_CASE("unreadable TLS files are an error naming the file", "[transport][tls]") {
  TransportSettings settings;
  settings.tls.enabled = true;
  settings.tls.ca_file = "/nonexistent/ca.pem";
  asio::io_context io;
  try {
    Transport::create(asio::make_strand(io), settings, {});
    FAIL("accepted");
  } catch (const Error& e) {
    CHECK(e.code() == errc::tls_error);
    CHECK(std::string(e.what()).find("/nonexistent/ca.pem") != std::string::npos);
  }
}

TEST_CASE("a TLS handshake the server never answers times out", "[transport][tls]") {
  TestServer server(Mode::silent);
  TransportSettings settings;
  settings.tls.enabled = true;
  settings.connect_timeout = std::chrono::milliseconds(200);
  Client client(settings);
  REQUIRE(client.connect(server.address()) == "closed");
  CHECK(client.closed_ec() == errc::timeout);
}

namespace {

// Sends STARTTLS, upgrades in band once "OK\n" arrives in plain text (from within on_data), then
// checks that a write after the handshake comes back through TLS.
void upgrade_in_band(Client& client, const TestServer& server) {
  // Shared with the hook, which outlives this call on the client's strand.
  struct Upgrade {
    Latch upgraded;
    std::error_code result;
    bool asked = false;
  };
  auto upgrade = std::make_shared<Upgrade>();
  client.on_data_hook = [&client, upgrade] {
    if (upgrade->asked) return;
    upgrade->asked = true;
    client.transport_->start_tls([&client, upgrade](std::error_code ec) {
      upgrade->result = ec;
      upgrade->upgraded.count_down();
      client.transport_->write("inside");
    });
  };
  client.run([&client, address = server.address()] {
    client.transport_->connect(address);
    client.transport_->write("STARTTLS\n");
  });
  REQUIRE(upgrade->upgraded.wait_for(1));
  CHECK(upgrade->result == std::error_code{});
  REQUIRE(client.wait_received("OK\ninside"));
}

}  // namespace

TEST_CASE("an in-band upgrade switches an open connection to TLS", "[transport][tls]") {
  TestCertificates certs;
  TestServer server(Mode::starttls_echo, &certs);
  TransportSettings settings;
  settings.tls.ca_file = certs.ca_file;  // TLS not enabled at connect: the protocol upgrades
  Client client(settings);
  upgrade_in_band(client, server);
}

TEST_CASE("an in-band TLS handshake slower than write_timeout is left to connect_timeout",
          "[transport][tls]") {
  // The handshake writes its ClientHello and then waits on the server, with a write under way:
  // write_timeout's watchdog, armed by the STARTTLS line before it, must not count that wait as a
  // write that made no progress.
  TestCertificates certs;
  TestServer server(Mode::starttls_late_echo, &certs);
  TransportSettings settings;
  settings.tls.ca_file = certs.ca_file;
  settings.write_timeout = std::chrono::milliseconds(100);
  settings.connect_timeout = std::chrono::milliseconds(20000);
  Client client(settings);
  upgrade_in_band(client, server);
  INFO(client.closed_detail());
  CHECK(client.closed_ec() == std::error_code{});
}

namespace {

// Holds every read's chunk, as a parser that keeps views into each read does, while `client`
// sends `messages` one at a time through the echo server (each echoed before the next goes, so
// each arrives in a read of its own); then reports what the views hold.
struct HeldReads {
  std::string joined;     // the held views' bytes, in order
  std::size_t chunks{0};  // distinct chunks among them
  bool inside{true};      // every view within its chunk's bytes
};

HeldReads hold_every_read(Client& client, const HostPort& echo,
                          const std::vector<std::string>& messages, std::string& expected) {
  struct Held {
    std::shared_ptr<ReadChunk> chunk;
    const char* data;
    std::size_t size;
  };
  auto held = std::make_shared<std::vector<Held>>();  // strand only
  client.on_chunk_hook = [held](const std::shared_ptr<ReadChunk>& chunk, const char* data,
                                std::size_t n) {
    held->push_back({chunk, data, n});
  };
  REQUIRE(client.connect(echo) == "connected");
  for (const auto& message : messages) {
    expected += message;
    client.run([&client, message] { client.transport_->write(message); });
    REQUIRE(client.wait_received(expected));
  }
  std::promise<HeldReads> seen;
  client.run([&seen, held] {
    HeldReads result;
    std::set<const ReadChunk*> chunks;
    for (const auto& h : *held) {
      result.joined.append(h.data, h.size);
      chunks.insert(h.chunk.get());
      result.inside = result.inside && h.data >= h.chunk->data.get() &&
                      h.data + h.size <= h.chunk->data.get() + h.chunk->size;
    }
    result.chunks = chunks.size();
    seen.set_value(std::move(result));
  });
  return seen.get_future().get();
}

}  // namespace

TEST_CASE("small reads whose bytes are still held share a chunk instead of pinning one each",
          "[transport]") {
  // A parser keeps views into every read (messages a handler still has). Were each read to take
  // a fresh 64 KiB chunk, 100 held messages of 200 bytes would pin 6.4 MiB.
  TestServer server(Mode::echo);
  Client client;
  std::vector<std::string> messages;
  for (int i = 0; i < 100; ++i)
    messages.push_back(std::to_string(i) + std::string(200, static_cast<char>('a' + i % 26)));
  std::string expected;
  const HeldReads held = hold_every_read(client, server.address(), messages, expected);
  CHECK(held.inside);
  CHECK(held.joined == expected);  // no later read wrote over bytes still held
  CHECK(held.chunks <= 2);         // 20 KiB of reads within 64 KiB chunks
}

TEST_CASE("a chunk filled to its last quarter while held gives way to a fresh one", "[transport]") {
  TestServer server(Mode::echo);
  TransportSettings settings;
  settings.read_chunk_size = 4096;
  Client client(settings);
  std::vector<std::string> messages;
  for (int i = 0; i < 40; ++i) messages.emplace_back(500, static_cast<char>('A' + i % 26));
  std::string expected;
  const HeldReads held = hold_every_read(client, server.address(), messages, expected);
  CHECK(held.inside);
  CHECK(held.joined == expected);
  // 20,000 bytes in 4 KiB chunks, each left once under 1 KiB remains: 6 or 7 chunks, not 40.
  CHECK(held.chunks >= 5);
  CHECK(held.chunks <= 8);
}

TEST_CASE("chunks come back when their last view goes: steady reading allocates nothing",
          "[transport]") {
  // A connection that streams wants a fresh chunk every read_chunk_size bytes, two allocations
  // each before the transport kept the chunks that came back. Here no view is held, so each
  // chunk comes back when the next replaces it; the io thread's allocations are counted over
  // the reads after a warm-up (connect, the first chunks, asio's own caches).
  constexpr std::size_t kChunk = 4096;
  constexpr std::size_t kWarmUp = 64 * 1024;
  constexpr std::size_t kTotal = 1024 * 1024;
  asio::io_context server_io;
  tcp::acceptor acceptor(server_io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  asio::io_context io;
  auto work = asio::make_work_guard(io);
  Strand strand = asio::make_strand(io);
  std::size_t received = 0;  // io thread only
  std::uint64_t at_warm_up = 0;
  std::promise<std::uint64_t> at_end;
  Transport::Callbacks callbacks;
  callbacks.on_connected = [] {};
  callbacks.on_closed = [](std::error_code, const std::string&) {};
  callbacks.on_data = [&](const std::shared_ptr<ReadChunk>&, const char*, std::size_t n) {
    const std::size_t before = received;
    received += n;
    if (before < kWarmUp && received >= kWarmUp)
      at_warm_up = polybus::cli::allocations_on_this_thread();
    if (received == kTotal) at_end.set_value(polybus::cli::allocations_on_this_thread());
  };
  TransportSettings settings;
  settings.read_chunk_size = kChunk;
  auto transport = Transport::create(strand, settings, std::move(callbacks));
  std::thread io_thread([&io] { io.run(); });
  const HostPort address{"127.0.0.1", acceptor.local_endpoint().port()};
  asio::post(strand, [&transport, address] { transport->connect(address); });
  tcp::socket peer(server_io);
  acceptor.accept(peer);
  const std::string bytes(1000, 'x');
  for (std::size_t sent = 0; sent < kTotal;) {
    const std::size_t n = std::min(bytes.size(), kTotal - sent);
    asio::write(peer, asio::buffer(bytes.data(), n));
    sent += n;
  }
  auto end = at_end.get_future();
  REQUIRE(end.wait_for(kWaitBound) == std::future_status::ready);
  const std::uint64_t steady = end.get() - at_warm_up;
  INFO("allocations on the io thread over " << (kTotal - kWarmUp) / kChunk
                                            << " chunks or more: " << steady);
  CHECK(steady < 16);
  asio::post(strand, [&transport] { transport->close(); });
  work.reset();
  io_thread.join();
}
