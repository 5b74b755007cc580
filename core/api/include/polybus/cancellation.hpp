// SPDX-License-Identifier: Apache-2.0
// A caller's way to give up operations it started, from any thread: what a Go client's context
// cancellation is, and what polybus/asio/async.hpp's cancellation slots use underneath.
#pragma once

#include "polybus/export.hpp"

#include <memory>

namespace polybus {

namespace detail {
struct CancellationState;
struct CancellationAccess;
}  // namespace detail

/// Given to operations (RequestOptions::cancellation); cancel() completes each of them still
/// pending at once with errc::canceled, its cause saying whether it had been sent (a request
/// sent may still reach a responder; its reply is then dropped). An operation given one already
/// cancelled completes so as soon as the client takes it, unsent. What it cancels is let go at
/// once: a close does not wait for it. Copies share one state; cheap to copy, any thread.
class POLYBUS_API Cancellation {
 public:
  /// Not cancelled yet.
  Cancellation();
  /// Cancels every operation given this one, now and later. Idempotent.
  void cancel() const;
  /// cancel() was called.
  bool cancelled() const;

 private:
  friend struct detail::CancellationAccess;  // the client registers what it may cancel
  std::shared_ptr<detail::CancellationState> state_;
};

}  // namespace polybus
