#include "polybus/error.hpp"

namespace polybus {
namespace {

class CoreCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "polybus"; }
  std::string message(int value) const override {
    switch (static_cast<errc>(value)) {
      case errc::success: return "success";
      case errc::timeout: return "operation timed out";
      case errc::closed: return "client is closed";
      case errc::not_supported: return "operation not supported by this adapter";
      case errc::invalid_argument: return "invalid argument";
      case errc::invalid_url: return "invalid URL";
      case errc::unknown_scheme: return "unknown URL scheme";
      case errc::invalid_option: return "invalid option";
      case errc::disconnected: return "disconnected";
      case errc::connect_failed: return "could not connect";
      case errc::protocol_error: return "protocol error";
      case errc::frame_too_large: return "frame larger than the configured maximum";
      case errc::already_responded: return "message already responded to";
      case errc::already_subscribed: return "already subscribed";
      case errc::handler_failed: return "handler failed";
      case errc::no_responder: return "no responder for the topic";
      case errc::would_block_io_thread: return "blocking call from the client's io thread";
      case errc::broker_error: return "broker refused the operation";
      case errc::canceled: return "canceled";
      case errc::tls_error: return "TLS error";
      case errc::limit_exceeded: return "a configured limit was exceeded";
    }
    return "unknown polybus error " + std::to_string(value);
  }
};

}  // namespace

const std::error_category& core_category() noexcept {
  static const CoreCategory category;
  return category;
}

}  // namespace polybus
