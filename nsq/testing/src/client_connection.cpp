// SPDX-License-Identifier: Apache-2.0
// A client connection's byte layers, output, timers and closing; the commands themselves are in
// client_commands.cpp.
#include "client_connection.hpp"

#include <asio/post.hpp>
#include <asio/write.hpp>

#include "polybus/nsq/codec.hpp"
#include "polybus/text/big_endian.hpp"

namespace polybus::nsq::testing::detail {
namespace {

constexpr std::int32_t kFrameResponse = 0;
constexpr std::int32_t kFrameError = 1;
constexpr std::int32_t kFrameMessage = 2;

constexpr std::size_t kPlainReadSize = 64 * 1024;
// Compressed input is read in small pieces so that what one read decompresses to stays small.
constexpr std::size_t kCompressedReadSize = 16 * 1024;
// Reading pauses while this much output waits for a client that does not read.
constexpr std::size_t kMaxQueuedBytes = 4 * 1024 * 1024;
// nsqd gives the TLS handshake 5 s.
constexpr std::chrono::seconds kTlsHandshakeTimeout{5};

void append_be(std::string& out, std::uint64_t value, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

std::string str(std::string_view text) {
  return std::string(text);
}
}  // namespace

ClientConnection::ClientConnection(ServerContext& server, asio::ip::tcp::socket socket,
                                   std::uint64_t id, asio::ssl::context& ssl_context)
    : server_(server),
      id_(id),
      stream_(std::move(socket), ssl_context),
      heartbeat_timer_(stream_.get_executor()),
      deadline_timer_(stream_.get_executor()),
      handshake_timer_(stream_.get_executor()),
      fault_timer_(stream_.get_executor()),
      parser_(server.options().max_line_length),
      settings_(ClientSettings::defaults(server.options())),
      read_buffer_(kPlainReadSize),
      sample_random_(static_cast<std::minstd_rand::result_type>(id)) {}

void ClientConnection::start() {
  std::error_code ec;
  const auto remote = stream_.lowest_layer().remote_endpoint(ec);
  if (!ec) remote_address_ = remote.address().to_string() + ":" + std::to_string(remote.port());
  connect_ts_ = std::chrono::duration_cast<std::chrono::seconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count();
  // Until the magic, only the read deadline runs: nsqd starts heartbeats with the protocol.
  last_command_ = Clock::now();
  if (settings_.heartbeat_interval.count() > 0) arm_read_deadline();
  read_next();
}

void ClientConnection::close() {
  finish_close();
}

// ---------------------------------------------------------------------------------------------
// Input

void ClientConnection::read_next() {
  if (reading_ || closed_ || closing_after_flush_ || tls_pending_ ||
      queued_bytes_ > kMaxQueuedBytes) {
    return;
  }
  reading_ = true;
  const std::size_t size = codec_ ? kCompressedReadSize : kPlainReadSize;
  auto handler = [self = shared_from_this()](std::error_code ec, std::size_t n) {
    self->on_read(ec, n);
  };
  if (tls_active_) {
    stream_.async_read_some(asio::buffer(read_buffer_.data(), size), std::move(handler));
  } else {
    stream_.next_layer().async_read_some(asio::buffer(read_buffer_.data(), size),
                                         std::move(handler));
  }
}

void ClientConnection::on_read(std::error_code ec, std::size_t size) {
  reading_ = false;
  if (closed_) return;
  if (ec) {
    finish_close();  // end of stream or a reset: nsqd exits its loop without a word
    return;
  }
  server_.count_traffic(size, 0);
  if (!closing_after_flush_) process_input(std::string_view(read_buffer_.data(), size));
  server_.state_changed();
  read_next();
}

void ClientConnection::process_input(std::string_view raw) {
  if (state_ == State::magic) {
    const std::size_t take = std::min(raw.size(), kMagicV2.size() - magic_.size());
    magic_.append(raw.data(), take);
    raw.remove_prefix(take);
    if (magic_.size() < kMagicV2.size()) return;
    if (magic_ != kMagicV2) {
      send_frame(kFrameError, "E_BAD_PROTOCOL");
      close_after_flush();
      return;
    }
    state_ = State::init;
    restart_heartbeats();
  }
  if (codec_) {
    decode_and_process(raw);
    return;
  }
  raw.remove_prefix(process_commands(raw));
  if (raw.empty() || closing_after_flush_ || closed_) return;
  // IDENTIFY switched layers: what follows it belongs to the new one.
  if (tls_pending_) {
    tls_leftover_.assign(raw.data(), raw.size());
  } else if (codec_) {
    decode_and_process(raw);
  }
}

void ClientConnection::decode_and_process(std::string_view compressed) {
  decoded_.clear();
  if (codec_->decode(compressed, decoded_)) {
    finish_close();  // a broken stream: nsqd's reader fails and the connection ends
    return;
  }
  process_commands(decoded_);
  if (decoded_.capacity() > 4 * kPlainReadSize) std::string().swap(decoded_);
}

std::size_t ClientConnection::process_commands(std::string_view plain) {
  std::size_t consumed = 0;
  layer_switched_ = false;
  while (consumed < plain.size() && !closing_after_flush_ && !closed_ && !layer_switched_) {
    const CommandParser::Result result = parser_.feed(plain.substr(consumed));
    consumed += result.consumed;
    if (result.error) {
      // A line that overflows nsqd's read buffer: it closes without an error frame.
      close_after_flush();
      break;
    }
    switch (result.event) {
      case CommandParser::Event::need_more:
        break;
      case CommandParser::Event::line:
        on_line(parser_.params());
        break;
      case CommandParser::Event::body_size:
        on_body_size(parser_.size());
        break;
      case CommandParser::Event::body:
        on_body(parser_.body());
        break;
    }
  }
  return consumed;
}

void ClientConnection::command_done() {
  last_command_ = Clock::now();
}

// ---------------------------------------------------------------------------------------------
// Subscriber

bool ClientConnection::ready_for_message() const {
  // A client that does not read gets nothing more once enough waits for it (nsqd blocks on the
  // write); RDY alone would let 2500 messages of 1 MiB pile up here.
  return state_ == State::subscribed && !closed_ && !closing_after_flush_ &&
         in_flight_ < ready_count_ && queued_bytes_ <= kMaxQueuedBytes;
}

bool ClientConnection::sampled_out() {
  // nsqd keeps a message when a draw from 0-99 is at most the sample rate.
  return settings_.sample_rate > 0 &&
         static_cast<int>(sample_random_() % 100) > settings_.sample_rate;
}

void ClientConnection::deliver(const Message& message) {
  ++in_flight_;
  ++message_count_;
  const std::string& body = message.body->bytes();
  std::string frame;
  frame.reserve(kFrameHeaderSize + kMessageHeaderSize + body.size());
  append_be(frame, kFrameTypeSize + kMessageHeaderSize + body.size(), 4);
  append_be(frame, kFrameMessage, 4);
  append_be(frame, static_cast<std::uint64_t>(message.timestamp_ns), 8);
  append_be(frame, message.attempts, 2);
  frame.append(message.id.view());
  frame.append(body);
  journal_sent("message", {}, &message);
  bool intercepted = false;
  const std::string_view topic = topic_ != nullptr ? std::string_view(topic_->name()) : "";
  const auto fault = fault_for("message", topic, intercepted);
  if (intercepted) return;  // the message stays in flight here, as if lost on the way
  if (fault && fault->action == polybus::testing::FaultRule::Action::duplicate) emit(frame);
  emit(std::move(frame));
}

void ClientConnection::message_timed_out() {
  if (in_flight_ > 0) --in_flight_;
}

void ClientConnection::channel_deleted() {
  channel_ = nullptr;
  topic_ = nullptr;
  finish_close();
}

void ClientConnection::count_published(std::size_t messages) {
  pub_counts_[body_topic_] += messages;
}

ClientStats ClientConnection::stats() const {
  ClientStats s;
  s.client_id = settings_.client_id;
  s.hostname = settings_.hostname;
  s.user_agent = settings_.user_agent;
  s.remote_address = remote_address_;
  s.state = state_ == State::subscribed ? 3 : state_ == State::closing ? 4 : 0;
  s.ready_count = ready_count_;
  s.in_flight_count = in_flight_;
  s.message_count = message_count_;
  s.finish_count = finish_count_;
  s.requeue_count = requeue_count_;
  s.connect_ts = connect_ts_;
  s.sample_rate = settings_.sample_rate;
  s.deflate = deflate_;
  s.snappy = snappy_;
  s.authed = authed_;
  if (authed_) s.auth_identity = server_.options().auth_identity;
  s.tls = tls_active_;
  if (tls_active_) {
    // As Go's crypto/tls names them: "TLS1.3", and the IANA name of the suite.
    SSL* ssl = const_cast<asio::ssl::stream<asio::ip::tcp::socket>&>(stream_).native_handle();
    const int version = SSL_version(ssl);
    s.tls_version = version == TLS1_3_VERSION   ? "TLS1.3"
                    : version == TLS1_2_VERSION ? "TLS1.2"
                    : version == TLS1_1_VERSION ? "TLS1.1"
                                                : "TLS1.0";
    if (const SSL_CIPHER* cipher = SSL_get_current_cipher(ssl)) {
      s.tls_cipher_suite = SSL_CIPHER_standard_name(cipher);
    }
  }
  s.pub_counts = pub_counts_;
  return s;
}

// ---------------------------------------------------------------------------------------------
// Journal

polybus::testing::JournalEntry ClientConnection::journal_entry(bool received,
                                                               std::string_view kind) const {
  polybus::testing::JournalEntry entry;
  entry.connection = id_;
  entry.received = received;
  entry.kind = str(kind);
  if (topic_ != nullptr) entry.topic = topic_->name();
  if (channel_ != nullptr) entry.channel = channel_->name();
  return entry;
}

void ClientConnection::journal_command(const std::vector<std::string_view>& params) {
  polybus::testing::Journal& journal = server_.journal();
  const std::string_view command = params[0];
  // Commands with a body are recorded with it (journal_body).
  if (!journal.enabled() || command == "IDENTIFY" || command == "AUTH" || command == "PUB" ||
      command == "MPUB" || command == "DPUB")
    return;
  polybus::testing::JournalEntry entry = journal_entry(true, command);
  const auto number = [](std::string_view text) -> std::int64_t {
    std::int64_t value = 0;
    for (char c : text) {
      if (c < '0' || c > '9' || value > (std::int64_t{1} << 40)) return -1;
      value = value * 10 + (c - '0');
    }
    return text.empty() ? -1 : value;
  };
  if (command == "SUB" && params.size() >= 3) {
    entry.topic = str(params[1]);
    entry.channel = str(params[2]);
  } else if (command == "RDY" && params.size() >= 2) {
    entry.count = number(params[1]);
  } else if ((command == "FIN" || command == "TOUCH" || command == "REQ") && params.size() >= 2) {
    entry.id = str(params[1]);
    if (command == "REQ" && params.size() >= 3) entry.count = number(params[2]);
  }
  // Arguments a command should not have, or that did not parse, stay visible.
  for (std::size_t i = 1; i < params.size(); ++i) entry.text += (i > 1 ? " " : "") + str(params[i]);
  journal.record(std::move(entry));
}

void ClientConnection::journal_body(std::string_view command, std::string_view body) {
  polybus::testing::Journal& journal = server_.journal();
  if (!journal.enabled() || command.empty()) return;
  polybus::testing::JournalEntry entry = journal_entry(true, command);
  entry.bytes = body.size();
  if (command == "PUB" || command == "MPUB" || command == "DPUB") {
    entry.topic = body_topic_;
    entry.channel.clear();
    entry.count = 1;
  }
  if (command == "MPUB")  // the message count that opens the body
    entry.count =
        body.size() >= 4 ? static_cast<std::int64_t>(read_big_endian<4>(body.data())) : -1;
  if (command == "DPUB") entry.text = std::to_string(body_defer_.count()) + "ms";
  if (command == "IDENTIFY") entry.text = str(body);  // AUTH's secret is left out
  journal.record(std::move(entry));
}

void ClientConnection::journal_sent(std::string_view kind, std::string_view text,
                                    const Message* message) {
  polybus::testing::Journal& journal = server_.journal();
  if (!journal.enabled()) return;
  polybus::testing::JournalEntry entry = journal_entry(false, kind);
  entry.text = str(text);
  if (message != nullptr) {
    entry.id = str(message->id.view());
    entry.count = message->attempts;
    entry.bytes = message->body->bytes().size();
  }
  journal.record(std::move(entry));
}

// ---------------------------------------------------------------------------------------------
// Faults

std::optional<polybus::testing::FaultRule> ClientConnection::fault_for(std::string_view unit,
                                                                       std::string_view topic,
                                                                       bool& intercepted) {
  using polybus::testing::FaultRule;
  intercepted = false;
  polybus::testing::FaultRules& rules = server_.faults();
  if (rules.empty()) return std::nullopt;
  const std::string channel = channel_ != nullptr ? channel_->name() : std::string();
  std::optional<FaultRule> fault = rules.fire({unit, topic, channel, id_});
  if (!fault) return fault;
  switch (fault->action) {
    case FaultRule::Action::error:
      journal_sent("error", fault->error);
      send_frame(kFrameError, fault->error);
      if (fault->fatal) close_after_flush();
      intercepted = true;
      break;
    case FaultRule::Action::swallow:
      intercepted = true;
      break;
    case FaultRule::Action::reset: {
      std::error_code ignored;
      stream_.lowest_layer().set_option(asio::socket_base::linger(true, 0), ignored);
      [[fallthrough]];
    }
    case FaultRule::Action::close:
      // Never close from inside a delivery: the channel is still walking its subscribers.
      asio::post(stream_.get_executor(), [self = shared_from_this()] { self->finish_close(); });
      closing_after_flush_ = true;  // nothing more is read or carried out meanwhile
      intercepted = true;
      break;
    case FaultRule::Action::delay:
      hold_output(fault->delay);
      break;
    case FaultRule::Action::hold:
      hold_output(std::chrono::hours(24 * 365));  // until the rule is removed
      rules.when_removed(fault->id, id_,
                         [weak = weak_from_this(), executor = stream_.get_executor()] {
                           asio::post(executor, [weak] {
                             if (const auto self = weak.lock())
                               self->hold_output(std::chrono::milliseconds(0));
                           });
                         });
      break;
    case FaultRule::Action::duplicate:
      break;
  }
  return fault;
}

void ClientConnection::hold_output(std::chrono::milliseconds delay) {
  output_held_ = true;
  fault_timer_.expires_after(delay);
  fault_timer_.async_wait([self = shared_from_this()](std::error_code ec) {
    if (ec || self->closed_) return;  // cancelled, or a later delay took over
    self->output_held_ = false;
    self->flush();
  });
}

// ---------------------------------------------------------------------------------------------
// Output

void ClientConnection::send_response(std::string_view body) {
  journal_sent("response", body);
  send_frame(kFrameResponse, body);
}

void ClientConnection::send_error(std::string_view code, std::string_view description) {
  const std::string frame = str(code) + " " + str(description);
  journal_sent("error", frame);
  send_frame(kFrameError, frame);
}

void ClientConnection::fatal(std::string_view code, std::string_view description) {
  send_error(code, description);
  close_after_flush();
}

void ClientConnection::send_frame(std::int32_t type, std::string_view body) {
  std::string frame;
  frame.reserve(kFrameHeaderSize + body.size());
  append_be(frame, kFrameTypeSize + body.size(), 4);
  append_be(frame, static_cast<std::uint32_t>(type), 4);
  frame.append(body);
  emit(std::move(frame));
}

void ClientConnection::emit(std::string plain) {
  if (closed_) return;
  std::string wire;
  if (codec_) {
    if (codec_->encode(plain, wire)) {
      // Never close from inside a delivery: the channel is still walking its subscribers.
      asio::post(stream_.get_executor(), [self = shared_from_this()] { self->finish_close(); });
      return;
    }
  } else {
    wire = std::move(plain);
  }
  queued_bytes_ += wire.size();
  (tls_pending_ ? held_queue_ : out_queue_).push_back(std::move(wire));
  flush();
}

void ClientConnection::flush() {
  if (writing_ || closed_ || output_held_ || out_queue_.empty()) return;
  writing_ = true;
  write_started_ = Clock::now();
  std::vector<asio::const_buffer> buffers;
  while (!out_queue_.empty()) {
    in_write_.push_back(std::move(out_queue_.front()));
    out_queue_.pop_front();
  }
  buffers.reserve(in_write_.size());
  for (const std::string& bytes : in_write_) buffers.emplace_back(asio::buffer(bytes));
  auto handler = [self = shared_from_this()](std::error_code ec, std::size_t n) {
    self->on_written(ec, n);
  };
  if (tls_active_) {
    asio::async_write(stream_, buffers, std::move(handler));
  } else {
    asio::async_write(stream_.next_layer(), buffers, std::move(handler));
  }
}

void ClientConnection::on_written(std::error_code ec, std::size_t size) {
  writing_ = false;
  const bool was_full = queued_bytes_ > kMaxQueuedBytes;
  queued_bytes_ -= size;
  in_write_.clear();
  server_.count_traffic(0, size);
  if (closed_) return;
  if (ec) return finish_close();
  if (was_full && queued_bytes_ <= kMaxQueuedBytes && channel_ != nullptr) {
    server_.broker().changed(*channel_);  // deliveries held back for this client may go on
  }
  if (!out_queue_.empty()) return flush();
  if (tls_pending_) return start_tls_when_flushed();
  if (closing_after_flush_) return finish_close();
  read_next();  // reading may have paused for this output
}

// ---------------------------------------------------------------------------------------------
// TLS

void ClientConnection::start_tls_when_flushed() {
  if (writing_ || !out_queue_.empty() || handshaking_ || closed_) return;
  handshaking_ = true;
  handshake_timer_.expires_after(kTlsHandshakeTimeout);
  handshake_timer_.async_wait([self = shared_from_this()](std::error_code ec) {
    if (!ec && self->handshaking_) self->finish_close();
  });
  stream_.async_handshake(
      asio::ssl::stream_base::server, asio::buffer(tls_leftover_),
      [self = shared_from_this()](std::error_code ec, std::size_t) { self->on_tls_handshake(ec); });
}

void ClientConnection::on_tls_handshake(std::error_code ec) {
  handshaking_ = false;
  handshake_timer_.cancel();
  if (closed_) return;
  if (ec) return finish_close();
  tls_active_ = true;
  tls_pending_ = false;
  std::string().swap(tls_leftover_);
  while (!held_queue_.empty()) {
    out_queue_.push_back(std::move(held_queue_.front()));
    held_queue_.pop_front();
  }
  flush();
  read_next();
  server_.state_changed();
}

// ---------------------------------------------------------------------------------------------
// Heartbeats and deadlines

void ClientConnection::restart_heartbeats() {
  heartbeat_timer_.cancel();
  deadline_timer_.cancel();
  if (settings_.heartbeat_interval.count() <= 0) return;
  arm_heartbeat();
  arm_read_deadline();
}

void ClientConnection::arm_heartbeat() {
  heartbeat_timer_.expires_after(settings_.heartbeat_interval);
  heartbeat_timer_.async_wait(
      [self = shared_from_this()](std::error_code ec) { self->on_heartbeat(ec); });
}

void ClientConnection::on_heartbeat(std::error_code ec) {
  if (ec || closed_ || settings_.heartbeat_interval.count() <= 0) return;
  // nsqd's write deadline is one heartbeat interval: a client that stopped reading goes.
  if (writing_ && Clock::now() - write_started_ >= settings_.heartbeat_interval) {
    return finish_close();
  }
  send_response(kHeartbeatBody);
  arm_heartbeat();
}

void ClientConnection::arm_read_deadline() {
  deadline_timer_.expires_at(last_command_ + 2 * settings_.heartbeat_interval);
  deadline_timer_.async_wait(
      [self = shared_from_this()](std::error_code ec) { self->on_read_deadline(ec); });
}

void ClientConnection::on_read_deadline(std::error_code ec) {
  if (ec || closed_ || settings_.heartbeat_interval.count() <= 0) return;
  // nsqd reads each command with a deadline of two heartbeat intervals.
  if (Clock::now() >= last_command_ + 2 * settings_.heartbeat_interval) return finish_close();
  arm_read_deadline();
}

// ---------------------------------------------------------------------------------------------
// Closing

void ClientConnection::close_after_flush() {
  closing_after_flush_ = true;
  if (!writing_ && out_queue_.empty()) finish_close();
}

void ClientConnection::finish_close() {
  if (closed_) return;
  const auto self = shared_from_this();  // the server lets go of it below
  closed_ = true;
  heartbeat_timer_.cancel();
  deadline_timer_.cancel();
  handshake_timer_.cancel();
  fault_timer_.cancel();
  std::error_code ignored;
  stream_.lowest_layer().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  stream_.lowest_layer().close(ignored);
  if (channel_ != nullptr) {
    Channel* channel = channel_;
    channel_ = nullptr;
    server_.broker().unsubscribe(*topic_, *channel, *this);
    topic_ = nullptr;
  }
  server_.connection_closed(id_);
  server_.state_changed();
}

}  // namespace polybus::nsq::testing::detail
