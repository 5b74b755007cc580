// SPDX-License-Identifier: Apache-2.0
// The byte stream every TCP-based adapter runs on: resolve and connect with a deadline, optional
// TLS (certificate verification on by default, CA file, client certificate, SNI), an in-band TLS
// upgrade for protocols that negotiate it (NSQ's IDENTIFY), ordered gather writes with a write
// deadline, and an idle hook for heartbeat rules. Everything runs on the adapter's strand.
//
// Reads land in reference-counted chunks: a protocol parser can hand out views into a chunk and
// keep it alive (Message::payload without a copy). Reads go on into the rest of a chunk, so that
// small reads share one instead of pinning one each; a fresh chunk when the rest is under a
// quarter. A chunk goes when the last view into it does; no byte of one is read into twice.
#pragma once

#include "polybus/export.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>

#include "polybus/adapter/adapter.hpp"
#include "polybus/url.hpp"

namespace polybus {

struct POLYBUS_API TlsSettings {
  bool enabled = false;
  bool verify = true;
  std::string ca_file;    // empty: the system's default CA paths
  std::string cert_file;  // client certificate (PEM), optional
  std::string key_file;
  std::string server_name;  // SNI and the name verified; empty: the host connected to
};

struct POLYBUS_API TransportSettings {
  std::chrono::milliseconds connect_timeout{5000};  // resolve + connect + TLS handshake
  // Once connected, the protocol's own handshake must end (established()) within this, or the
  // connection fails with errc::timeout: a server that accepts and then says nothing cannot hold
  // an attempt forever. 0: the owner bounds its handshake itself.
  std::chrono::milliseconds handshake_timeout{0};
  std::chrono::milliseconds write_timeout{10000};  // 0: none
  std::size_t read_chunk_size = 64 * 1024;
  // Budget (budget.hpp): bytes queued for writing, and how long a begun frame may take.
  std::size_t max_write_buffer = 64 * 1024 * 1024;
  std::chrono::milliseconds frame_timeout{30000};
  TlsSettings tls;
  // What the peer should speak, as guess_protocol() names it (protocol_guess.hpp): an error on a
  // connection whose first bytes look like another protocol says so. Empty: no such hint.
  std::string protocol;
  // From the core options connect_timeout, write_timeout, tls* and the budget.
  static TransportSettings from_options(const ResolvedOptions& options);
};

namespace detail {
class BlockPool;
}

// A read chunk; views into it stay valid while a shared_ptr to it is held. Its bytes are not
// zeroed: only what reads filled is ever looked at.
struct POLYBUS_API ReadChunk {
  // Bytes from the heap.
  explicit ReadChunk(std::size_t n);
  // Bytes from spare (blocks of n bytes), given back there when the chunk goes.
  ReadChunk(std::size_t n, std::shared_ptr<detail::BlockPool> spare);

  struct GiveBack {
    std::shared_ptr<detail::BlockPool> spare;  // null: the heap's
    void operator()(char* bytes) const noexcept;
  };
  std::unique_ptr<char[], GiveBack> data;
  std::size_t size;
};

class POLYBUS_API Transport : public std::enable_shared_from_this<Transport> {
 public:
  struct Callbacks {
    std::function<void()> on_connected;  // TCP (and TLS, if enabled) is up
    // Bytes received. chunk owns [data, data + size).
    std::function<void(const std::shared_ptr<ReadChunk>& chunk, const char* data, std::size_t size)>
        on_data;
    // Once per connect(): why the connection ended (or never came up). Not called after close().
    std::function<void(std::error_code ec, const std::string& detail)> on_closed;
    // Optional: bytes reached the socket; the argument is total_written(). A caller that noted
    // total_queued() after its write() knows that write is out once the total reaches it (until
    // the connection ends: marks from before that are void).
    std::function<void(std::uint64_t total_written)> on_written;
    // Optional: after write_room() said no, the queue drained to a quarter of max_write_buffer.
    std::function<void()> on_write_room;
  };

  // Throws polybus::Error(errc::tls_error) when the TLS settings cannot be loaded.
  static std::shared_ptr<Transport> create(Strand strand, TransportSettings settings,
                                           Callbacks callbacks,
                                           const AdapterContext* stats = nullptr);

  void connect(const HostPort& target);
  // Queued and written in order; the string is moved in, so payloads are not copied (but for
  // small ones, gathered into one buffer with their neighbours). What a handler queues leaves in
  // one write once that handler is done (close() and fail() write it first). Queueing more than
  // max_write_buffer unwritten bytes fails the connection (errc::limit_exceeded).
  void write(std::string bytes);
  // For bytes the caller keeps too (a payload it may have to send again after a reconnect).
  void write(std::shared_ptr<const std::string> bytes);
  // Bytes up to this size given to write() are copied into the queue's own pieces rather than
  // queued as pieces of their own. A write gathers at most 16 buffers (asio's max_iov_len
  // without IOV_MAX): a buffer per small payload capped a write at 8 frames of Figg or NSQ, and
  // the kernel's per-write cost, paid again by the server's reads, outweighed the copy many
  // times over. Larger payloads still go out from the caller's bytes.
  static constexpr std::size_t kCopiedAtMost = 1024;
  // write_copy() gathers bytes into pieces of about this size (a piece is written whole).
  static constexpr std::size_t kPieceSize = 8192;
  // Small bytes (a frame header), copied: appended to the last queued piece of owned bytes, or
  // to a string kept from an earlier write, so a steady stream of them allocates nothing.
  void write_copy(std::string_view bytes);
  // A written piece's string, emptied, to build the next large write() in: a caller that hands
  // over its buffer whole takes this one in its place, so that large writes allocate nothing
  // once the strings have grown. One with room for `size` bytes when there is one, else the one
  // with the most room (or a new empty one).
  std::string spare_string(std::size_t size);
  // Upgrades the open connection to TLS in band. Call it from on_data (no read is then pending);
  // reading resumes over TLS after the handshake. done runs on the strand. Bytes queued in the
  // same handler, before it, go out after the handshake, over TLS.
  void start_tls(std::function<void(std::error_code)> done);
  // What the idle clock waits for. Bytes: any read restarts it. Frames: only a read after which
  // the parser holds no partial frame, or completed one (frame_state()), so that a frame that
  // drips in a byte at a time does not keep a dead connection alive; for an owner that calls
  // frame_state() after every on_data and has a clock of its own (NSQ's heartbeats).
  enum class IdleCounts { bytes, frames };
  // Calls on_idle after `idle` without received bytes (or whole frames), then every `idle` while
  // it lasts.
  void set_idle_timeout(std::chrono::milliseconds idle, std::function<void()> on_idle,
                        IdleCounts counts = IdleCounts::bytes);
  // Back-pressure: no read is started while paused (the peer's writes then wait in TCP), and the
  // idle clock stops. Resuming reads again and restarts the idle clock.
  void pause_reading();
  void resume_reading();
  bool reading_paused() const;
  // The parser held part of a frame after the last read (as frame_state() last said).
  bool partial_frame() const;
  // The owner's parser says, after each on_data, whether it holds part of a frame and whether it
  // completed any. A frame begun must complete within frame_timeout, however slowly its bytes
  // drip in: the idle clock counts bytes, this one counts frames. Past it the connection fails
  // with errc::limit_exceeded.
  void frame_state(bool partial_frame, bool completed_frame);
  // The protocol's handshake is done: handshake_timeout no longer applies.
  void established();
  // Ends the connection; on_closed is not called. Safe to call at any time, more than once.
  // Queued bytes are dropped: use close_after_flush() to send them first.
  void close();
  // Sends what is queued (within the write deadline), then closes as close() does.
  void close_after_flush();
  // Ends the connection and reports it through on_closed (a protocol error, say).
  void fail(std::error_code ec, const std::string& detail);

  bool connected() const;
  bool tls_active() const;
  const std::string& endpoint() const;
  std::size_t queued_bytes() const;
  // Room for more of the caller's own traffic (publishes): under half of max_write_buffer is
  // queued. A publisher that finds none keeps its publishes, which wait with their deadlines,
  // and sends them at on_write_room. So max_write_buffer ends a connection whose peer stopped
  // reading, never one whose application publishes faster than the socket drains. A "no" asks
  // for one on_write_room call.
  bool write_room();
  // Bytes ever given to write() / written to the socket, over every connection of this object.
  std::uint64_t total_queued() const;
  std::uint64_t total_written() const;

  // What a transport is lives in core/io/src (transport_impl.hpp), made by create(): this class
  // has no state of its own, so the installed header neither shows it nor fixes its layout.
 protected:
  Transport() = default;
  ~Transport() = default;
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;
};

}  // namespace polybus
