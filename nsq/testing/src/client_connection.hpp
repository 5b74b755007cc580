// SPDX-License-Identifier: Apache-2.0
// One client of the test nsqd: the byte layers (TCP, then optionally TLS, then optionally snappy or
// deflate, each switched on in band after IDENTIFY) and the V2 protocol on top, with nsqd's state
// rules, error frames, heartbeats and read deadline. Runs on the server's io thread. The layers,
// output and timers are in client_connection.cpp, the commands in client_commands.cpp.
//
// Output is never unbounded: a client is only sent what it asked for (responses) or made room for
// (RDY), and reading pauses while too much output waits for a client that does not read. Input is
// bounded by the command parser's limits and by decompressing at most one small read at a time.
#pragma once

#include <asio/ip/tcp.hpp>
#include <asio/ssl.hpp>
#include <asio/steady_timer.hpp>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "broker.hpp"
#include "command_parser.hpp"
#include "identify.hpp"
#include "polybus/fault_rules.hpp"
#include "polybus/journal.hpp"
#include "polybus/nsq/compression.hpp"

namespace polybus::nsq::testing::detail {

// What a connection needs from its server.
class ServerContext {
 public:
  virtual ~ServerContext() = default;
  virtual const NsqdOptions& options() const = 0;
  virtual Broker& broker() = 0;
  // Null when no certificate is configured: tls_v1 is then refused.
  virtual asio::ssl::context* tls_context() = 0;
  // nsqd's --tls-required: every command but IDENTIFY waits for the TLS upgrade.
  virtual bool tls_required() const = 0;
  virtual void connection_closed(std::uint64_t id) = 0;
  // Something a test may be waiting for happened.
  virtual void state_changed() = 0;
  // Bytes a connection read from its client, or wrote to it (after TLS, before compression).
  virtual void count_traffic(std::size_t received, std::size_t sent) = 0;
  // What connections sent and were sent, for tests (NsqdOptions::journal_capacity).
  virtual polybus::testing::Journal& journal() = 0;
  // Faults the tests asked for (NsqdOptions::faults, Nsqd::faults()).
  virtual polybus::testing::FaultRules& faults() = 0;
};

// One client as nsqd's /stats shows it (nsqd's ClientV2Stats).
struct ClientStats {
  std::string client_id;
  std::string hostname;
  std::string user_agent;
  std::string remote_address;  // "host:port"
  int state = 0;               // nsqd's: 0 init, 3 subscribed, 4 closing
  std::int64_t ready_count = 0;
  std::int64_t in_flight_count = 0;
  std::uint64_t message_count = 0;  // delivered to it
  std::uint64_t finish_count = 0;
  std::uint64_t requeue_count = 0;
  std::int64_t connect_ts = 0;  // s since the Unix epoch
  int sample_rate = 0;
  bool deflate = false;
  bool snappy = false;
  bool authed = false;
  std::string auth_identity;
  bool tls = false;
  std::string tls_cipher_suite;
  std::string tls_version;
  std::map<std::string, std::uint64_t> pub_counts;  // messages it published, per topic
};

class ClientConnection final : public Subscriber,
                               public std::enable_shared_from_this<ClientConnection> {
 public:
  ClientConnection(ServerContext& server, asio::ip::tcp::socket socket, std::uint64_t id,
                   asio::ssl::context& ssl_context);

  void start();
  // Closes at once (the server stops): unsubscribes and tells the server.
  void close();

  // Subscriber
  std::uint64_t client_id() const override { return id_; }
  bool ready_for_message() const override;
  std::int64_t ready_count() const override { return ready_count_; }
  bool sampled_out() override;
  std::chrono::milliseconds message_timeout() const override { return settings_.msg_timeout; }
  void deliver(const Message& message) override;
  void message_timed_out() override;
  void channel_emptied() override { in_flight_ = 0; }
  void channel_deleted() override;

  ClientStats stats() const;
  // The channel it is subscribed to, or null.
  const Topic* topic() const { return topic_; }
  const Channel* channel() const { return channel_; }
  // nsqd counts a client that published as a producer.
  bool producer() const { return !pub_counts_.empty(); }

 private:
  enum class State { magic, init, subscribed, closing };
  enum class BodyCommand { none, identify, auth, pub, mpub, dpub };

  // Input, layer by layer.
  void read_next();
  void on_read(std::error_code ec, std::size_t size);
  void process_input(std::string_view raw);
  void decode_and_process(std::string_view compressed);
  std::size_t process_commands(std::string_view plain);
  void on_line(const std::vector<std::string_view>& params);
  void on_body_size(std::int32_t size);
  void on_body(std::string_view body);
  void command_done();

  // Commands.
  void identify(const std::vector<std::string_view>& params);
  void identify_body(std::string_view body);
  void auth(const std::vector<std::string_view>& params);
  void auth_body(std::string_view body);
  void sub(const std::vector<std::string_view>& params);
  void rdy(const std::vector<std::string_view>& params);
  void fin(const std::vector<std::string_view>& params);
  void req(const std::vector<std::string_view>& params);
  void touch(const std::vector<std::string_view>& params);
  void cls();
  void pub(const std::vector<std::string_view>& params);
  void pub_body(std::string_view body);
  void mpub(const std::vector<std::string_view>& params);
  void mpub_body(std::string_view body);
  void dpub(const std::vector<std::string_view>& params);
  void dpub_body(std::string_view body);
  // E_AUTH_FIRST unless AUTH is off or done; true when the command may go on.
  bool check_auth(std::string_view command);
  // nsqd's state check shared by FIN, REQ and TOUCH.
  bool check_subscribed_or_closing(std::string_view command);

  // Output.
  void send_response(std::string_view body);
  void send_error(std::string_view code, std::string_view description);  // non-fatal
  void fatal(std::string_view code, std::string_view description);       // then close
  void send_frame(std::int32_t type, std::string_view body);
  // Records a command received (its line's arguments, or a body command with its body) or a
  // frame sent, with the subscription's topic and channel, when the journal is on.
  void journal_command(const std::vector<std::string_view>& params);
  void journal_body(std::string_view command, std::string_view body);
  void journal_sent(std::string_view kind, std::string_view text, const Message* message = nullptr);
  polybus::testing::JournalEntry journal_entry(bool received, std::string_view kind) const;
  // A fault rule that fires for this unit, if any; error, swallow, close and reset are done
  // here (`intercepted` then: the unit is not to be carried out), delay holds the output.
  std::optional<polybus::testing::FaultRule> fault_for(std::string_view unit,
                                                       std::string_view topic, bool& intercepted);
  // The command line after IDENTIFY's and TLS's checks.
  void run_line(const std::vector<std::string_view>& params);
  void run_body(BodyCommand command, std::string_view body);
  void hold_output(std::chrono::milliseconds delay);
  void emit(std::string plain);
  void flush();
  void on_written(std::error_code ec, std::size_t size);

  // In-band TLS, after IDENTIFY's response is on the wire.
  void start_tls_when_flushed();
  void on_tls_handshake(std::error_code ec);

  // Timers.
  void restart_heartbeats();
  void arm_heartbeat();
  void on_heartbeat(std::error_code ec);
  void arm_read_deadline();
  void on_read_deadline(std::error_code ec);

  void close_after_flush();
  void finish_close();
  void count_published(std::size_t messages);

  ServerContext& server_;
  const std::uint64_t id_;
  asio::ssl::stream<asio::ip::tcp::socket> stream_;
  asio::steady_timer heartbeat_timer_;
  asio::steady_timer deadline_timer_;
  asio::steady_timer handshake_timer_;
  asio::steady_timer fault_timer_;  // a delay fault: output held until it fires
  bool output_held_ = false;

  State state_ = State::magic;
  std::string magic_;
  CommandParser parser_;
  ClientSettings settings_;
  bool authed_ = false;

  // Layers.
  std::unique_ptr<StreamCodec> codec_;
  bool tls_active_ = false;
  bool tls_pending_ = false;  // IDENTIFY agreed on TLS; the handshake starts once output is flushed
  bool handshaking_ = false;
  bool layer_switched_ = false;  // stops command processing: the rest is for the new layer
  std::string tls_leftover_;     // bytes read past IDENTIFY that belong to the TLS handshake
  std::string decoded_;

  // Reading and writing.
  std::vector<char> read_buffer_;
  bool reading_ = false;
  bool writing_ = false;
  bool closing_after_flush_ = false;
  bool closed_ = false;
  std::deque<std::string> out_queue_;
  std::deque<std::string> held_queue_;  // written after the TLS handshake
  std::vector<std::string> in_write_;   // the buffers of the write under way
  std::size_t queued_bytes_ = 0;
  Clock::time_point last_command_;
  Clock::time_point write_started_;

  // A command whose body is being read.
  BodyCommand body_command_ = BodyCommand::none;
  std::string body_topic_;
  std::chrono::milliseconds body_defer_{0};

  // Subscription.
  Topic* topic_ = nullptr;
  Channel* channel_ = nullptr;
  std::int64_t ready_count_ = 0;
  std::int64_t in_flight_ = 0;
  std::minstd_rand sample_random_;

  // For stats().
  std::string remote_address_;
  std::int64_t connect_ts_ = 0;
  std::uint64_t message_count_ = 0;
  std::uint64_t finish_count_ = 0;
  std::uint64_t requeue_count_ = 0;
  bool snappy_ = false;
  bool deflate_ = false;
  std::map<std::string, std::uint64_t> pub_counts_;
};

}  // namespace polybus::nsq::testing::detail
