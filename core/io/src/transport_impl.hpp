// SPDX-License-Identifier: Apache-2.0
// What a Transport is (polybus/io/transport.hpp has what it does): the socket and its TLS
// layer, the write queue and its spare strings, the read chunks, the deadlines. Transport's
// methods forward here; create() makes one of these.
#pragma once

#include <asio/ip/tcp.hpp>
#include <asio/ssl.hpp>
#include <asio/steady_timer.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "polybus/adapter/clock.hpp"
#include "polybus/adapter/fifo.hpp"
#include "polybus/adapter/handler_memory.hpp"
#include "polybus/io/transport.hpp"

namespace polybus {

class TransportImpl final : public Transport {
 public:
  TransportImpl(Strand strand, TransportSettings settings, Callbacks callbacks,
                const AdapterContext* stats);
  ~TransportImpl();

  void connect(const HostPort& target);
  void write(std::string bytes);
  void write(std::shared_ptr<const std::string> bytes);
  void write_copy(std::string_view bytes);
  std::string spare_string(std::size_t size);
  void start_tls(std::function<void(std::error_code)> done);
  void set_idle_timeout(std::chrono::milliseconds idle, std::function<void()> on_idle,
                        IdleCounts counts);
  void pause_reading();
  void resume_reading();
  bool reading_paused() const { return read_paused_; }
  bool partial_frame() const { return frame_pending_; }
  void frame_state(bool partial_frame, bool completed_frame);
  void established();
  void close();
  void close_after_flush();
  void fail(std::error_code ec, const std::string& detail);
  bool connected() const { return connected_; }
  bool tls_active() const { return tls_active_; }
  const std::string& endpoint() const { return endpoint_; }
  std::size_t queued_bytes() const { return queued_bytes_; }
  bool write_room();
  std::uint64_t total_queued() const { return total_queued_; }
  std::uint64_t total_written() const { return total_written_; }

 private:
  std::shared_ptr<TransportImpl> self() {
    return std::static_pointer_cast<TransportImpl>(shared_from_this());
  }
  std::weak_ptr<TransportImpl> weak_self() { return self(); }

  void on_resolved(std::error_code ec, asio::ip::tcp::resolver::results_type results);
  void on_tcp_connected(std::error_code ec);
  void handshake(asio::ssl::stream_base::handshake_type type,
                 std::function<void(std::error_code)> done);
  void read_next();
  void on_read(std::error_code ec, std::size_t n);
  // Writes what is queued now, unless a write is under way. With `may_finish_now`, a write the
  // socket takes whole at once is finished here (its callbacks run before this returns):
  // callers that are a handler of their own, never one called by the owner.
  void flush(bool may_finish_now = true);
  void flush_soon();           // flush() once the strand's current handler is done
  void flush_posted_writes();  // close() and fail(): flush_soon()'s bytes go first
  void on_written(std::error_code ec, std::size_t n);
  // A write is done: its pieces go back, the owner hears of it. False: write nothing more now
  // (a callback ended the connection, it closes, or a TLS upgrade waited for it).
  bool written(std::size_t n);
  // A deadline on what begins often (a write, a frame): what is still under way `limit` after
  // it began fails the connection.
  struct Watch {
    explicit Watch(const Strand& strand) : timer(strand) {}
    asio::steady_timer timer;
    bool armed = false;
    Clock::time_point started;  // of the one under way
  };
  void watch(Watch& watch, std::chrono::milliseconds limit);  // 0: none
  bool under_way(const Watch& watch) const;
  void overdue(const Watch& watch);
  void arm_idle();
  void arm_handshake_deadline();
  void end(std::error_code ec, const std::string& detail, bool report);
  void reset_stream();
  bool admit(std::size_t n);  // room for n more queued bytes, else fail the connection
  // Plain TCP needs none; TLS contexts are shared by every transport with the same settings.
  std::error_code ensure_tls_context(std::string& detail);

  Strand strand_;
  TransportSettings settings_;
  Callbacks callbacks_;
  std::optional<AdapterContext> stats_;  // a copy: the transport may outlive its owner briefly
  std::shared_ptr<asio::ssl::context> ssl_context_;  // only once TLS is wanted
  asio::ip::tcp::resolver resolver_;
  // The socket and, once TLS is on, the TLS layer over it. Shared with every pending operation
  // on it: an old stream outlives a reconnect (or the transport) until its aborted operations
  // have completed, as asio's composed TLS operations touch the stream when they do.
  //
  // The socket's executor is the strand itself, not asio's type-erased any_io_executor: through
  // that, each completion was wrapped and handed to the strand in an operation from asio's
  // per-thread cache, which missed for most writes (an allocation per burst); with the strand's
  // own type the hand-off takes the handler's memory (read_memory_, write_memory_).
  using Socket = asio::basic_stream_socket<asio::ip::tcp, Strand>;
  struct Stream {
    explicit Stream(const Strand& strand) : socket(strand) {}
    Socket socket;
    std::unique_ptr<asio::ssl::stream<Socket&>> tls;
  };
  std::shared_ptr<Stream> stream_;
  asio::steady_timer connect_timer_;
  asio::steady_timer handshake_timer_;
  Watch write_watch_;
  asio::steady_timer idle_timer_;
  Watch frame_watch_;
  bool frame_pending_ = false;  // the parser holds part of a frame
  bool read_paused_ = false;
  std::string endpoint_;
  std::string host_;
  std::uint64_t generation_ = 0;  // bumps on every connect/close: stale completions are dropped
  std::string first_bytes_;       // the first bytes of this connection, for the mismatch hint
  bool connecting_ = false;
  bool connected_ = false;
  bool tls_active_ = false;
  bool writes_at_once_ = false;  // the socket is non-blocking: flush() may write without a wait
  bool reading_ = false;
  bool writing_ = false;
  bool upgrading_ = false;  // in-band TLS handshake under way: no plain read may run
  bool close_when_flushed_ = false;
  bool room_wanted_ = false;   // write_room() said no: on_write_room is owed
  bool flush_posted_ = false;  // flush_soon()'s post has not run yet
  std::function<void(std::error_code)> pending_tls_;
  // A queued piece: owned bytes, or bytes shared with the caller.
  struct Piece {
    std::string owned;
    std::shared_ptr<const std::string> shared;
    const std::string& bytes() const { return shared ? *shared : owned; }
  };
  // Waiting to be written (a Fifo, not a deque: no node allocated and freed as it slides).
  Fifo<Piece> queue_;
  std::vector<Piece> in_flight_;
  std::vector<asio::const_buffer> buffers_;  // in_flight_'s bytes, for the write under way
  std::vector<std::string> spare_strings_;   // owned pieces written, emptied, capacity kept
  std::size_t spare_bytes_ = 0;              // their capacity
  std::size_t queued_bytes_ = 0;
  std::size_t deepest_queue_ = 0;  // the most queued_bytes_ has been: what spare bytes may reach
  std::uint64_t total_queued_ = 0;
  std::uint64_t total_written_ = 0;
  // The read and the write under way live here (each holds the transport).
  HandlerMemory read_memory_;
  HandlerMemory write_memory_;
  HandlerMemory flush_memory_;  // flush_soon()'s post
  // Chunks (their shared state, and their bytes) that came back when their last view went:
  // a connection that streams reads a chunk every 64 KiB, and took two allocations for each.
  std::shared_ptr<ReadChunk> fresh_chunk();
  std::shared_ptr<detail::BlockPool> chunk_states_;
  std::shared_ptr<detail::BlockPool> chunk_bytes_;
  std::shared_ptr<ReadChunk> chunk_;
  std::size_t chunk_used_ = 0;  // bytes of chunk_ that reads filled (views may point into them)
  std::chrono::milliseconds idle_{0};
  std::function<void()> on_idle_;
  IdleCounts idle_counts_ = IdleCounts::bytes;
  Clock::time_point last_read_;
  Clock::time_point idle_since_;  // what the idle clock counts from: the last read, or whole frame
};

}  // namespace polybus
