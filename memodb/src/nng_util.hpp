// Internal: small RAII helpers over libnng, shared by the adapter and the in-process broker.
#pragma once

#include <nng/nng.h>

#include "polybus/error.hpp"

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>

namespace polybus::memodb::detail {

struct MsgFree {
  void operator()(nng_msg* m) const noexcept {
    if (m) nng_msg_free(m);
  }
};
using MsgPtr = std::unique_ptr<nng_msg, MsgFree>;

inline std::string_view body(nng_msg* m) {
  return {static_cast<const char*>(nng_msg_body(m)), nng_msg_len(m)};
}

// A message holding header + payload; null when NNG is out of memory.
inline MsgPtr make_msg(std::string_view header, std::string_view payload = {}) {
  nng_msg* m = nullptr;
  if (nng_msg_alloc(&m, header.size() + payload.size()) != 0) return nullptr;
  auto* out = static_cast<char*>(nng_msg_body(m));
  if (!header.empty()) std::memcpy(out, header.data(), header.size());
  if (!payload.empty()) std::memcpy(out + header.size(), payload.data(), payload.size());
  return MsgPtr(m);
}

// NNG's error numbers, with nng_strerror() as their text.
class NngCategory final : public std::error_category {
 public:
  std::error_condition default_error_condition(int value) const noexcept override {
    switch (value) {
      case NNG_ECONNREFUSED:
      case NNG_EUNREACHABLE:
      case NNG_EADDRINVAL: return make_error_condition(polybus::errc::connect_failed);
      case NNG_ETIMEDOUT: return make_error_condition(polybus::errc::timeout);
      case NNG_ECLOSED: return make_error_condition(polybus::errc::closed);
      case NNG_ECONNRESET:
      case NNG_ECONNABORTED:
      case NNG_ECONNSHUT: return make_error_condition(polybus::errc::disconnected);
      case NNG_ECANCELED: return make_error_condition(polybus::errc::canceled);
      case NNG_EPROTO: return make_error_condition(polybus::errc::protocol_error);
      case NNG_EMSGSIZE: return make_error_condition(polybus::errc::frame_too_large);
      case NNG_ECRYPTO:
      case NNG_EPEERAUTH: return make_error_condition(polybus::errc::tls_error);
      case NNG_ENOTSUP: return make_error_condition(polybus::errc::not_supported);
      default: return std::error_condition(value, *this);
    }
  }
  const char* name() const noexcept override { return "nng"; }
  std::string message(int value) const override { return nng_strerror(value); }
};
inline const std::error_category& nng_category() noexcept {
  static const NngCategory category;
  return category;
}
inline std::error_code nng_error(int rv) { return {rv, nng_category()}; }

// A dialer's failed attempts so far, from NNG's statistics: its dialer retries by itself and
// reports nothing else, so this is how the client learns why it is not connected.
struct DialFailures {
  std::uint64_t refused = 0, timeout = 0, proto = 0, auth = 0, other = 0;
  std::uint64_t total() const { return refused + timeout + proto + auth + other; }
};
inline DialFailures dial_failures(nng_dialer dialer) {
  DialFailures out;
  nng_stat* all = nullptr;
  if (nng_stats_get(&all) != 0) return out;
  if (nng_stat* mine = nng_stat_find_dialer(all, dialer)) {
    auto count = [mine](const char* name) -> std::uint64_t {
      nng_stat* s = nng_stat_find(mine, name);
      return s ? nng_stat_value(s) : 0;
    };
    out.refused = count("refused");
    out.timeout = count("timeout");
    out.proto = count("proto");
    out.auth = count("auth");
    out.other = count("other") + count("reject");
  }
  nng_stats_free(all);
  return out;
}

// Milliseconds as an nng_duration (a signed 32-bit count), clamped to [0, INT32_MAX].
inline nng_duration to_duration(std::int64_t ms) {
  if (ms < 0) return 0;
  if (ms > 0x7fffffff) return 0x7fffffff;
  return static_cast<nng_duration>(ms);
}

// Runs work (closing an NNG socket and freeing its aios) on a thread of its own and waits for it
// up to `bound`. libnng 1.5.2 (Debian 12's) can block in nng_close for good when a TCP pipe is
// closed while a message on it is half received (NNG issue #1636, fixed in 1.6.0); past the bound
// the work is left to finish, or not, by itself, and false is returned. Whatever the work
// captures lives as long as it runs.
template <typename Work>
bool run_bounded(Work work, std::chrono::milliseconds bound) {
  struct State {
    std::mutex mutex;
    std::condition_variable cv;
    bool done = false;
  };
  auto state = std::make_shared<State>();
  std::thread thread([state, work = std::move(work)]() mutable {
    work();
    std::lock_guard<std::mutex> lock(state->mutex);
    state->done = true;
    state->cv.notify_all();
  });
  bool done = false;
  {
    std::unique_lock<std::mutex> lock(state->mutex);
    done = state->cv.wait_for(lock, bound, [&] { return state->done; });
  }
  if (done) thread.join();
  else thread.detach();
  return done;
}

inline constexpr std::chrono::milliseconds kCloseBound{3000};

}  // namespace polybus::memodb::detail
