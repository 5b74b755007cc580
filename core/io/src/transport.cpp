// SPDX-License-Identifier: Apache-2.0
#include "transport_impl.hpp"

#include <algorithm>
#include <asio/connect.hpp>
#include <asio/post.hpp>
#include <asio/write.hpp>
#include <cassert>
#include <map>
#include <mutex>
#include <tuple>

#include "block_pool.hpp"
#include "polybus/adapter/arrival_clock.hpp"
#include "polybus/adapter/payloads.hpp"
#include "polybus/error.hpp"
#include "polybus/io/protocol_guess.hpp"
#include "polybus/options.hpp"

namespace polybus {

// A payload adapters keep by value is one the transport copies anyway.
static_assert(KeptPayload::kSharedAbove <= Transport::kCopiedAtMost);

namespace {

// Enough to tell one protocol from another (protocol_guess.hpp).
constexpr std::size_t kFirstBytesKept = 16;
constexpr std::size_t kMaxGather = 64;                         // buffers per write
constexpr std::size_t kCoalesceLimit = Transport::kPieceSize;  // write_copy() appends up to it
constexpr std::size_t kCopyAtMost = Transport::kCopiedAtMost;
// Written pieces of owned bytes kept for write_copy() and spare_string(): enough for the frames
// queued while one write is under way. As many bytes of them as the queue has held at its
// deepest, up to a sixteenth of max_write_buffer (4 MiB by default), and at least kSpareBytes,
// in at most kSpareStrings strings. A publisher faster than its socket keeps the queue deep and
// refills it in bursts as writes complete; a fixed 256 KiB freed what each write gave back only
// for the next burst to allocate it again (QuickIO, 2-4 KiB events: 0.45-1 allocation each).
constexpr std::size_t kSpareStrings = 1024;
constexpr std::size_t kSpareBytes = 256 * 1024;

// The buffers of a write, viewed in place (a vector would be copied, and allocated, per write).
struct BufferSpan {
  const asio::const_buffer* first;
  const asio::const_buffer* last;
  const asio::const_buffer* begin() const { return first; }
  const asio::const_buffer* end() const { return last; }
};

// One TLS context per set of TLS settings, shared by every transport that uses it (loading a CA
// bundle costs about a megabyte and milliseconds; a client with many connections pays it once).
// Held weakly: the context goes when its last transport does.
std::shared_ptr<asio::ssl::context> shared_tls_context(const TlsSettings& tls) {
  using Key = std::tuple<bool, std::string, std::string, std::string>;
  static std::mutex mutex;
  static std::map<Key, std::weak_ptr<asio::ssl::context>> cache;
  const Key key{tls.verify, tls.ca_file, tls.cert_file, tls.key_file};
  std::lock_guard<std::mutex> lock(mutex);
  if (auto found = cache[key].lock()) return found;
  for (auto it = cache.begin(); it != cache.end();)
    it = it->second.expired() ? cache.erase(it) : ++it;
  auto ctx = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_client);
  ctx->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                   asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                   asio::ssl::context::no_tlsv1_1);
  std::error_code ec;
  if (!tls.ca_file.empty()) {
    ctx->load_verify_file(tls.ca_file, ec);
    if (ec)
      throw Error(errc::tls_error,
                  "cannot load TLS CA file '" + tls.ca_file + "': " + ec.message());
  } else {
    ctx->set_default_verify_paths(ec);
  }
  if (!tls.cert_file.empty()) {
    ctx->use_certificate_chain_file(tls.cert_file, ec);
    if (ec)
      throw Error(errc::tls_error,
                  "cannot load TLS certificate '" + tls.cert_file + "': " + ec.message());
    ctx->use_private_key_file(tls.key_file.empty() ? tls.cert_file : tls.key_file,
                              asio::ssl::context::pem, ec);
    if (ec)
      throw Error(errc::tls_error, "cannot load TLS key '" + tls.key_file + "': " + ec.message());
  }
  ctx->set_verify_mode(tls.verify ? asio::ssl::verify_peer : asio::ssl::verify_none);
  cache[key] = ctx;
  return ctx;
}
}  // namespace

TransportSettings TransportSettings::from_options(const ResolvedOptions& options) {
  TransportSettings s;
  s.connect_timeout = options.get_duration("connect_timeout");
  s.write_timeout = options.get_duration("write_timeout");
  s.max_write_buffer = static_cast<std::size_t>(options.get_int("max_write_buffer"));
  s.frame_timeout = options.get_duration("frame_timeout");
  s.tls.enabled = options.get_bool("tls");
  s.tls.verify = options.get_bool("tls_verify");
  s.tls.ca_file = options.get_string("tls_ca_file");
  s.tls.cert_file = options.get_string("tls_cert_file");
  s.tls.key_file = options.get_string("tls_key_file");
  s.tls.server_name = options.get_string("tls_server_name");
  return s;
}

std::shared_ptr<Transport> Transport::create(Strand strand, TransportSettings settings,
                                             Callbacks callbacks, const AdapterContext* stats) {
  return std::make_shared<TransportImpl>(std::move(strand), std::move(settings),
                                         std::move(callbacks), stats);
}

TransportImpl::TransportImpl(Strand strand, TransportSettings settings, Callbacks callbacks,
                             const AdapterContext* stats)
    : strand_(std::move(strand)),
      settings_(std::move(settings)),
      callbacks_(std::move(callbacks)),
      resolver_(strand_),
      connect_timer_(strand_),
      handshake_timer_(strand_),
      write_watch_(strand_),
      idle_timer_(strand_),
      frame_watch_(strand_) {
  if (stats) stats_.emplace(*stats);
  // A few spare chunks: one or two are live while a connection streams, and the rest come back
  // in bursts as handlers let their messages go. What comes back beyond them goes to the heap.
  constexpr std::size_t kSpareChunks = 4;
  chunk_states_ = std::make_shared<detail::BlockPool>(
      strand_, detail::shared_block_size<ReadChunk>(), kSpareChunks);
  chunk_bytes_ =
      std::make_shared<detail::BlockPool>(strand_, settings_.read_chunk_size, kSpareChunks);
  // Bad TLS settings are refused at once; a plain connection builds no TLS context at all (an
  // in-band upgrade gets one when it is asked for).
  if (settings_.tls.enabled) ssl_context_ = shared_tls_context(settings_.tls);
}

ReadChunk::ReadChunk(std::size_t n) : data(new char[n]), size(n) {}

ReadChunk::ReadChunk(std::size_t n, std::shared_ptr<detail::BlockPool> spare)
    : data(static_cast<char*>(spare->take()), GiveBack{spare}), size(n) {
  assert(spare->block_size() >= n);  // a pool rounds blocks up to a pointer's size
}

void ReadChunk::GiveBack::operator()(char* bytes) const noexcept {
  if (spare)
    spare->give(bytes);
  else
    delete[] bytes;
}

std::shared_ptr<ReadChunk> TransportImpl::fresh_chunk() {
  return std::allocate_shared<ReadChunk>(detail::PooledAllocator<ReadChunk>(chunk_states_),
                                         settings_.read_chunk_size, chunk_bytes_);
}

std::error_code TransportImpl::ensure_tls_context(std::string& detail) {
  if (ssl_context_) return {};
  try {
    ssl_context_ = shared_tls_context(settings_.tls);
  } catch (const Error& e) {
    detail = e.what();
    return e.code();
  }
  return {};
}

TransportImpl::~TransportImpl() = default;

void TransportImpl::reset_stream() {
  stream_ = std::make_shared<Stream>(strand_);
  tls_active_ = false;
  writes_at_once_ = false;
}

void TransportImpl::connect(const HostPort& target) {
  close();
  ++generation_;
  connecting_ = true;
  host_ = target.host;
  endpoint_ = target.to_string();
  reset_stream();
  connect_timer_.expires_after(settings_.connect_timeout);
  connect_timer_.async_wait([weak = weak_self(), gen = generation_](std::error_code ec) {
    auto self = weak.lock();
    if (ec || !self || gen != self->generation_ || !self->connecting_) return;
    self->end(make_error_code(errc::timeout),
              "connecting to " + self->endpoint_ + " took longer than " +
                  std::to_string(self->settings_.connect_timeout.count()) + "ms",
              true);
  });
  resolver_.async_resolve(target.host, std::to_string(target.port),
                          [weak = weak_self(), gen = generation_](
                              std::error_code ec, asio::ip::tcp::resolver::results_type results) {
                            auto self = weak.lock();
                            if (!self || gen != self->generation_) return;
                            self->on_resolved(ec, std::move(results));
                          });
}

namespace {
// An OS error as a sentence part: "connection refused", the way Go and curl print it.
std::string os_error_text(const std::error_code& ec) {
  std::string text = ec.message();
  if (!text.empty() && text[0] >= 'A' && text[0] <= 'Z' && (text.size() < 2 || text[1] > 'Z'))
    text[0] = static_cast<char>(text[0] - 'A' + 'a');
  return text;
}
}  // namespace

void TransportImpl::on_resolved(std::error_code ec, asio::ip::tcp::resolver::results_type results) {
  if (ec)
    return end(make_error_code(errc::connect_failed),
               "cannot resolve " + endpoint_ + ": " + os_error_text(ec), true);
  asio::async_connect(stream_->socket, results,
                      [weak = weak_self(), gen = generation_, stream = stream_](
                          std::error_code e, const asio::ip::tcp::endpoint&) {
                        auto self = weak.lock();
                        if (!self || gen != self->generation_) return;
                        self->on_tcp_connected(e);
                      });
}

void TransportImpl::on_tcp_connected(std::error_code ec) {
  if (ec)
    return end(make_error_code(errc::connect_failed),
               "cannot connect to " + endpoint_ + ": " + os_error_text(ec), true);
  std::error_code ignored;
  stream_->socket.set_option(asio::ip::tcp::no_delay(true), ignored);
  // flush() writes at once where the socket has room: only a socket that says so when it has
  // none (a blocking one would stall the io thread).
  std::error_code blocking;
  stream_->socket.non_blocking(true, blocking);
  writes_at_once_ = !blocking;
  auto up = [this] {
    connecting_ = false;
    connected_ = true;
    connect_timer_.cancel();
    last_read_ = idle_since_ = Clock::now();
    arm_handshake_deadline();
    if (callbacks_.on_connected) callbacks_.on_connected();
    if (connected_) {
      read_next();
      flush();
    }
  };
  if (!settings_.tls.enabled) return up();
  handshake(asio::ssl::stream_base::client, [this, up](std::error_code e) {
    if (e)
      return end(make_error_code(errc::tls_error),
                 "TLS handshake with " + endpoint_ + " failed: " + e.message(), true);
    up();
  });
}

void TransportImpl::handshake(asio::ssl::stream_base::handshake_type type,
                              std::function<void(std::error_code)> done) {
  const auto& tls = settings_.tls;
  std::string detail;
  if (auto ec = ensure_tls_context(detail)) {
    // Reported as the connection's end (the caller's done is not needed after that).
    asio::post(strand_, [self = self(), gen = generation_, detail, ec] {
      if (gen == self->generation_) self->end(ec, detail, true);
    });
    return;
  }
  stream_->tls = std::make_unique<asio::ssl::stream<Socket&>>(stream_->socket, *ssl_context_);
  auto& tls_stream = *stream_->tls;
  const std::string& name = tls.server_name.empty() ? host_ : tls.server_name;
  // SNI only for names (RFC 6066 forbids IP literals); verification for both.
  asio::error_code parse_ec;
  asio::ip::make_address(name, parse_ec);
  if (parse_ec) SSL_set_tlsext_host_name(tls_stream.native_handle(), name.c_str());
  if (tls.verify) tls_stream.set_verify_callback(asio::ssl::host_name_verification(name));
  tls_stream.async_handshake(type, [self = self(), gen = generation_, stream = stream_,
                                    done = std::move(done)](std::error_code ec) {
    if (gen != self->generation_) return;
    if (!ec) self->tls_active_ = true;
    done(ec);
  });
}

void TransportImpl::start_tls(std::function<void(std::error_code)> done) {
  if (!connected_ || tls_active_) {
    asio::post(strand_, [done = std::move(done), active = tls_active_] {
      done(make_error_code(active ? errc::invalid_argument : errc::disconnected));
    });
    return;
  }
  pending_tls_ = std::move(done);
  if (!reading_) read_next();  // picks up the upgrade
}

void TransportImpl::arm_handshake_deadline() {
  if (settings_.handshake_timeout.count() <= 0) return;
  handshake_timer_.expires_after(settings_.handshake_timeout);
  handshake_timer_.async_wait([weak = weak_self(), gen = generation_](std::error_code ec) {
    auto self = weak.lock();
    if (ec || !self || gen != self->generation_ || !self->connected_) return;
    self->end(make_error_code(errc::timeout),
              self->endpoint_ + " accepted the connection but its handshake did not end within " +
                  std::to_string(self->settings_.handshake_timeout.count()) + "ms",
              true);
  });
}

void TransportImpl::established() {
  handshake_timer_.cancel();
}

void TransportImpl::read_next() {
  if (!connected_ || reading_ || upgrading_ || read_paused_) return;
  if (pending_tls_) {
    // A plain write still in flight finishes first (on_written comes back here): its bytes and
    // the handshake's must not interleave on the socket.
    if (writing_) return;
    auto done = std::move(pending_tls_);
    pending_tls_ = nullptr;
    connect_timer_.expires_after(settings_.connect_timeout);
    connect_timer_.async_wait([weak = weak_self(), gen = generation_](std::error_code ec) {
      auto self = weak.lock();
      if (ec || !self || gen != self->generation_ || self->tls_active_) return;
      self->end(make_error_code(errc::timeout),
                "TLS upgrade with " + self->endpoint_ + " timed out", true);
    });
    writing_ = true;  // hold writes until the handshake is done
    upgrading_ = true;
    handshake(asio::ssl::stream_base::client, [this, done](std::error_code ec) {
      connect_timer_.cancel();
      writing_ = false;
      upgrading_ = false;
      if (ec) {
        done(make_error_code(errc::tls_error));
        return end(make_error_code(errc::tls_error),
                   "TLS upgrade with " + endpoint_ + " failed: " + ec.message(), true);
      }
      done({});
      read_next();
      flush();
    });
    return;
  }
  // On into the rest of the chunk, held or not: whether a handler thread still reads a view
  // into the part already filled cannot be known without racing it (use_count() is a relaxed
  // load), so no byte of a chunk is read into twice.
  if (!chunk_ || chunk_->size - chunk_used_ < std::max<std::size_t>(chunk_->size / 4, 1)) {
    chunk_ = fresh_chunk();
    chunk_used_ = 0;
  }
  reading_ = true;
  // Pending reads hold the transport and the stream (see stream_); closing ends them.
  auto handler = [self = self(), gen = generation_, stream = stream_](std::error_code ec,
                                                                      std::size_t n) {
    if (gen != self->generation_) return;
    self->on_read(ec, n);
  };
  auto buffer = asio::buffer(chunk_->data.get() + chunk_used_, chunk_->size - chunk_used_);
  if (tls_active_)
    stream_->tls->async_read_some(buffer, in_memory(read_memory_, std::move(handler)));
  else
    stream_->socket.async_read_some(buffer, in_memory(read_memory_, std::move(handler)));
}

void TransportImpl::on_read(std::error_code ec, std::size_t n) {
  reading_ = false;
  if (ec) {
    const bool orderly = ec == asio::error::eof || ec == asio::ssl::error::stream_truncated;
    return end(make_error_code(errc::disconnected),
               endpoint_ + (orderly ? " closed the connection" : ": read failed: " + ec.message()),
               true);
  }
  last_read_ = Clock::now();
  if (idle_counts_ == IdleCounts::bytes) idle_since_ = last_read_;
  if (stats_) stats_->count_bytes_in(n);
  const char* data = chunk_->data.get() + chunk_used_;
  chunk_used_ += n;
  if (first_bytes_.size() < kFirstBytesKept)
    first_bytes_.append(data, std::min(n, kFirstBytesKept - first_bytes_.size()));
  const std::uint64_t gen = generation_;
  if (callbacks_.on_data) {
    // Held only for the call (the callback may end the connection): read_next() must see only
    // the views the parser kept.
    auto chunk = chunk_;
    ArrivalClock::Scope arrived(last_read_);
    callbacks_.on_data(chunk, data, n);
  }
  if (gen == generation_) read_next();
}

bool TransportImpl::write_room() {
  if (queued_bytes_ < settings_.max_write_buffer / 2) return true;
  room_wanted_ = true;
  return false;
}

bool TransportImpl::admit(std::size_t n) {
  if (queued_bytes_ + n <= settings_.max_write_buffer) {
    deepest_queue_ = std::max(deepest_queue_, queued_bytes_ + n);
    return true;
  }
  if (connecting_ || connected_)
    fail(make_error_code(errc::limit_exceeded),
         limit_exceeded_text("bytes queued for writing to " + endpoint_, "max_write_buffer",
                             settings_.max_write_buffer, queued_bytes_ + n));
  return false;
}

void TransportImpl::write(std::string bytes) {
  if (bytes.size() <= kCopyAtMost) return write_copy(bytes);
  if (!admit(bytes.size())) return;
  queued_bytes_ += bytes.size();
  total_queued_ += bytes.size();
  queue_.push_back(Piece{std::move(bytes), nullptr});
  flush_soon();
}

void TransportImpl::write_copy(std::string_view bytes) {
  if (bytes.empty() || !admit(bytes.size())) return;
  queued_bytes_ += bytes.size();
  total_queued_ += bytes.size();
  if (queue_.empty() || queue_.back().shared || queue_.back().owned.size() >= kCoalesceLimit) {
    Piece piece;
    if (!spare_strings_.empty()) {
      piece.owned = std::move(spare_strings_.back());
      spare_strings_.pop_back();
      spare_bytes_ -= piece.owned.capacity();
    }
    queue_.push_back(std::move(piece));
  }
  std::string& owned = queue_.back().owned;
  // A piece that gathers frames grows to its full size at once, not by doublings; one that
  // holds a lone header stays that small.
  if (!owned.empty() && owned.size() + bytes.size() > owned.capacity())
    owned.reserve(std::max(kCoalesceLimit + kCopyAtMost, owned.size() + bytes.size()));
  owned.append(bytes.data(), bytes.size());
  flush_soon();
}

std::string TransportImpl::spare_string(std::size_t size) {
  if (spare_strings_.empty()) return {};
  auto chosen = spare_strings_.begin();
  for (auto it = spare_strings_.begin(); it != spare_strings_.end(); ++it) {
    if (it->capacity() > chosen->capacity()) chosen = it;
    if (chosen->capacity() >= size) break;
  }
  std::string spare = std::move(*chosen);
  if (&*chosen != &spare_strings_.back()) *chosen = std::move(spare_strings_.back());
  spare_strings_.pop_back();
  spare_bytes_ -= spare.capacity();
  return spare;
}

void TransportImpl::write(std::shared_ptr<const std::string> bytes) {
  if (bytes && bytes->size() <= kCopyAtMost) return write_copy(*bytes);
  if (!bytes || bytes->empty() || !admit(bytes->size())) return;
  queued_bytes_ += bytes->size();
  total_queued_ += bytes->size();
  queue_.push_back(Piece{{}, std::move(bytes)});
  flush_soon();
}

// What a handler writes goes out in one write when it is done: a frame's header and its body,
// a burst of publishes. Written at once, the first write_copy() of a burst (a PUBLISH header,
// 38 bytes) went out by itself, in 30% of Figg's writes, and the server read it alone too.
void TransportImpl::flush_soon() {
  if (flush_posted_ || writing_ || !connected_) return;  // on_written or on_connected flushes
  flush_posted_ = true;
  asio::post(strand_, in_memory(flush_memory_, [self = self()] {
               self->flush_posted_ = false;
               self->flush();  // whichever connection is up now: flush() checks
             }));
}

void TransportImpl::flush(bool may_finish_now) {
  for (;;) {
    // Once an upgrade is asked for, what is queued goes out over TLS, after the handshake.
    if (!connected_ || writing_ || pending_tls_ || queue_.empty()) return;
    in_flight_.clear();
    buffers_.clear();
    std::size_t total = 0;
    while (!queue_.empty() && in_flight_.size() < kMaxGather) {
      in_flight_.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
    for (auto& piece : in_flight_) {
      buffers_.push_back(asio::buffer(piece.bytes()));
      total += buffers_.back().size();
    }
    // A socket with room takes the write at once: sent here, it needs no completion posted and
    // no turn of the event loop of its own (one of each per write, about a third of the
    // wake-ups of a consumer that acks what each read brought). What it does not take goes on
    // as an asynchronous write; a failure is left to that write to report.
    std::size_t sent = 0;
    if (may_finish_now && writes_at_once_ && !tls_active_) {
      std::error_code ec;
      sent = stream_->socket.write_some(
          BufferSpan{buffers_.data(), buffers_.data() + buffers_.size()}, ec);
      if (ec) sent = 0;
      if (sent == total) {
        if (!written(sent)) return;
        continue;  // a callback may have queued more
      }
      std::size_t skip = sent;
      auto first = buffers_.begin();
      while (skip >= first->size()) skip -= (first++)->size();
      *first += skip;
      buffers_.erase(buffers_.begin(), first);
    }
    const BufferSpan buffers{buffers_.data(), buffers_.data() + buffers_.size()};
    writing_ = true;
    write_watch_.started = Clock::now();
    watch(write_watch_, settings_.write_timeout);
    // The write holds the transport: bytes queued before its owner let go still go out
    // (close_after_flush), bounded by the write deadline.
    auto handler = [self = self(), gen = generation_, stream = stream_, sent](std::error_code ec,
                                                                              std::size_t n) {
      if (gen != self->generation_) return;
      self->on_written(ec, sent + n);
    };
    if (tls_active_)
      asio::async_write(*stream_->tls, buffers, in_memory(write_memory_, std::move(handler)));
    else
      asio::async_write(stream_->socket, buffers, in_memory(write_memory_, std::move(handler)));
    return;
  }
}

void TransportImpl::watch(Watch& watch, std::chrono::milliseconds limit) {
  // One timer for everything of a kind (every write, every frame), armed while one is under way
  // and moved on only when it fires: arming and cancelling one each time cost an operation and a
  // cancelled completion each, and most reads end inside a frame.
  if (watch.armed || limit.count() <= 0) return;
  watch.armed = true;
  watch.timer.expires_at(watch.started + limit);
  watch.timer.async_wait(
      [weak = weak_self(), gen = generation_, watched = &watch, limit](std::error_code ec) {
        auto self = weak.lock();
        if (ec || !self || gen != self->generation_) return;
        watched->armed = false;
        if (!self->under_way(*watched)) return;  // the next one arms it again
        // A later one, begun since it was armed, has time left.
        if (Clock::now() < watched->started + limit) return self->watch(*watched, limit);
        self->overdue(*watched);
      });
}

bool TransportImpl::under_way(const Watch& watch) const {
  // An in-band TLS handshake holds writes too (writing_): connect_timeout bounds it.
  if (&watch == &write_watch_) return writing_ && !upgrading_;
  return frame_pending_;
}

void TransportImpl::overdue(const Watch& watch) {
  if (&watch == &write_watch_)
    return end(make_error_code(errc::timeout),
               "writing to " + endpoint_ + " made no progress for " +
                   std::to_string(settings_.write_timeout.count()) + "ms",
               true);
  frame_pending_ = false;
  const auto limit = std::to_string(settings_.frame_timeout.count()) + "ms";
  end(make_error_code(errc::limit_exceeded),
      "a frame from " + endpoint_ + " was still incomplete " + limit +
          " after its first byte: exceeds frame_timeout=" + limit,
      true);
}

void TransportImpl::on_written(std::error_code ec, std::size_t n) {
  writing_ = false;
  if (ec)
    return end(make_error_code(errc::disconnected),
               "write to " + endpoint_ + " failed: " + ec.message(), true);
  if (written(n)) flush();
}

bool TransportImpl::written(std::size_t n) {
  queued_bytes_ -= std::min(queued_bytes_, n);
  total_written_ += n;
  if (stats_) stats_->count_bytes_out(n);
  const std::size_t spare_limit =
      std::max(kSpareBytes, std::min(deepest_queue_, settings_.max_write_buffer / 16));
  for (auto& piece : in_flight_) {
    if (piece.shared || spare_strings_.size() >= kSpareStrings ||
        spare_bytes_ + piece.owned.capacity() > spare_limit)
      continue;
    piece.owned.clear();
    spare_bytes_ += piece.owned.capacity();
    spare_strings_.push_back(std::move(piece.owned));
  }
  in_flight_.clear();
  if (callbacks_.on_written) {
    const std::uint64_t gen = generation_;
    callbacks_.on_written(total_written_);
    if (gen != generation_) return false;  // the callback ended this connection
  }
  if (room_wanted_ && queued_bytes_ <= settings_.max_write_buffer / 4) {
    room_wanted_ = false;
    if (callbacks_.on_write_room) {
      const std::uint64_t gen = generation_;
      callbacks_.on_write_room();
      if (gen != generation_) return false;
    }
  }
  // A callback above may have written: that write is in flight, not flushed.
  if (close_when_flushed_ && queue_.empty() && !writing_) {
    close();
    return false;
  }
  if (pending_tls_) {
    read_next();  // the upgrade waited for this write
    return false;
  }
  return true;
}

void TransportImpl::set_idle_timeout(std::chrono::milliseconds idle, std::function<void()> on_idle,
                                     IdleCounts counts) {
  idle_ = idle;
  on_idle_ = std::move(on_idle);
  idle_counts_ = counts;
  idle_since_ = Clock::now();
  arm_idle();
}

void TransportImpl::pause_reading() {
  read_paused_ = true;
  idle_timer_.cancel();
}

void TransportImpl::resume_reading() {
  if (!read_paused_) return;
  read_paused_ = false;
  last_read_ = idle_since_ = Clock::now();
  if (!connected_) return;
  arm_idle();
  read_next();
}

void TransportImpl::frame_state(bool partial_frame, bool completed_frame) {
  if (idle_counts_ == IdleCounts::frames && (completed_frame || !partial_frame))
    idle_since_ = last_read_;
  if (!partial_frame || !connected_) {
    frame_pending_ = false;  // an armed watchdog finds none and stops
    return;
  }
  if (frame_pending_ && !completed_frame) return;  // the same frame is still coming
  frame_pending_ = true;
  frame_watch_.started = last_read_;  // its first byte came with the last read
  watch(frame_watch_, settings_.frame_timeout);
}

void TransportImpl::arm_idle() {
  if (read_paused_) return;
  if (idle_.count() <= 0 || !on_idle_) {
    idle_timer_.cancel();
    return;
  }
  idle_timer_.expires_at(idle_since_ + idle_);
  idle_timer_.async_wait([weak = weak_self(), gen = generation_](std::error_code ec) {
    auto self = weak.lock();
    if (ec || !self || gen != self->generation_ || !self->connected_) return;
    if (Clock::now() - self->idle_since_ >= self->idle_) {
      self->idle_since_ = Clock::now();  // the next call comes one idle period later
      if (self->on_idle_) self->on_idle_();
    }
    if (gen == self->generation_) self->arm_idle();
  });
}

void TransportImpl::close() {
  flush_posted_writes();
  end({}, {}, false);
}

void TransportImpl::close_after_flush() {
  if (!connected_ || (!writing_ && queue_.empty())) return close();
  close_when_flushed_ = true;
}

void TransportImpl::fail(std::error_code ec, const std::string& detail) {
  flush_posted_writes();
  end(ec, detail, true);
}

// What the current handler wrote before closing still goes out, as it did when every write
// started at once: a WebSocket close frame answered just before the link fails, a POST queued
// in the same turn as the failure that ends its connection.
void TransportImpl::flush_posted_writes() {
  if (flush_posted_) flush(false);  // the owner is on the stack: its callbacks wait
}

void TransportImpl::end(std::error_code ec, const std::string& detail, bool report) {
  const bool was_active = connecting_ || connected_;
  // A connection whose server spoke another protocol from its first bytes says so.
  const std::string hint =
      report && was_active && !settings_.protocol.empty() && !first_bytes_.empty()
          ? protocol_mismatch_hint(first_bytes_, settings_.protocol)
          : std::string();
  first_bytes_.clear();
  ++generation_;
  connecting_ = connected_ = reading_ = writing_ = upgrading_ = close_when_flushed_ = false;
  read_paused_ = frame_pending_ = frame_watch_.armed = write_watch_.armed = false;
  tls_active_ = false;
  pending_tls_ = nullptr;
  resolver_.cancel();
  connect_timer_.cancel();
  handshake_timer_.cancel();
  write_watch_.timer.cancel();
  idle_timer_.cancel();
  frame_watch_.timer.cancel();
  if (stream_) {
    std::error_code ignored;
    stream_->socket.shutdown(Socket::shutdown_both, ignored);
    stream_->socket.close(ignored);
  }
  queue_.clear();
  in_flight_.clear();
  queued_bytes_ = 0;
  room_wanted_ = false;
  total_queued_ = total_written_;  // what was dropped is never written: marks before this are void
  if (report && was_active && callbacks_.on_closed) callbacks_.on_closed(ec, detail + hint);
}

// ---- Transport: each call is its TransportImpl's ----

namespace {
TransportImpl& impl(Transport& t) {
  return static_cast<TransportImpl&>(t);
}
const TransportImpl& impl(const Transport& t) {
  return static_cast<const TransportImpl&>(t);
}
}  // namespace

void Transport::connect(const HostPort& target) {
  impl(*this).connect(target);
}
void Transport::write(std::string bytes) {
  impl(*this).write(std::move(bytes));
}
void Transport::write(std::shared_ptr<const std::string> bytes) {
  impl(*this).write(std::move(bytes));
}
void Transport::write_copy(std::string_view bytes) {
  impl(*this).write_copy(bytes);
}
std::string Transport::spare_string(std::size_t size) {
  return impl(*this).spare_string(size);
}
void Transport::start_tls(std::function<void(std::error_code)> done) {
  impl(*this).start_tls(std::move(done));
}
void Transport::set_idle_timeout(std::chrono::milliseconds idle, std::function<void()> on_idle,
                                 IdleCounts counts) {
  impl(*this).set_idle_timeout(idle, std::move(on_idle), counts);
}
void Transport::pause_reading() {
  impl(*this).pause_reading();
}
void Transport::resume_reading() {
  impl(*this).resume_reading();
}
bool Transport::reading_paused() const {
  return impl(*this).reading_paused();
}
bool Transport::partial_frame() const {
  return impl(*this).partial_frame();
}
void Transport::frame_state(bool partial_frame, bool completed_frame) {
  impl(*this).frame_state(partial_frame, completed_frame);
}
void Transport::established() {
  impl(*this).established();
}
void Transport::close() {
  impl(*this).close();
}
void Transport::close_after_flush() {
  impl(*this).close_after_flush();
}
void Transport::fail(std::error_code ec, const std::string& detail) {
  impl(*this).fail(ec, detail);
}
bool Transport::connected() const {
  return impl(*this).connected();
}
bool Transport::tls_active() const {
  return impl(*this).tls_active();
}
const std::string& Transport::endpoint() const {
  return impl(*this).endpoint();
}
std::size_t Transport::queued_bytes() const {
  return impl(*this).queued_bytes();
}
bool Transport::write_room() {
  return impl(*this).write_room();
}
std::uint64_t Transport::total_queued() const {
  return impl(*this).total_queued();
}
std::uint64_t Transport::total_written() const {
  return impl(*this).total_written();
}

}  // namespace polybus
