// SPDX-License-Identifier: Apache-2.0
#include "polybus/quickio/client_errc.hpp"

#include "polybus/quickio/client.hpp"

#include "polybus/error.hpp"

#include <string>

namespace polybus::quickio {
namespace {

class ClientCategory : public std::error_category {
 public:
  std::error_condition default_error_condition(int value) const noexcept override {
    switch (static_cast<client_errc>(value)) {
      case client_errc::queue_full:
        return make_error_condition(polybus::errc::limit_exceeded);
      case client_errc::handshake_refused:
        return make_error_condition(polybus::errc::connect_failed);
      case client_errc::http_status:
        return make_error_condition(polybus::errc::broker_error);
      case client_errc::heartbeat_timeout:
      case client_errc::moved:
        return make_error_condition(polybus::errc::disconnected);
    }
    return std::error_condition(value, *this);
  }
  const char* name() const noexcept override { return "quickio-client"; }
  std::string message(int value) const override {
    switch (static_cast<client_errc>(value)) {
      case client_errc::queue_full:
        return "the queue of events waiting to be written is full (max_queued_bytes)";
      case client_errc::handshake_refused:
        return "the server did not complete the QuickIO handshake";
      case client_errc::heartbeat_timeout:
        return "nothing received from the server for heartbeat_timeout";
      case client_errc::http_status:
        return "an HTTP long-polling request was answered with a status other than 200";
      case client_errc::moved:
        return "the server moved the client to another address";
    }
    return "unknown quickio client error";
  }
};

}  // namespace

const std::error_category& client_category() noexcept {
  static const ClientCategory category;
  return category;
}

std::error_code make_error_code(client_errc e) noexcept {
  return {static_cast<int>(e), client_category()};
}

namespace {

class AnswerCategory : public std::error_category {
 public:
  std::error_condition default_error_condition(int value) const noexcept override {
    if (value == 404) return make_error_condition(polybus::errc::no_responder);
    return make_error_condition(polybus::errc::broker_error);
  }
  const char* name() const noexcept override { return "quickio-answer"; }
  std::string message(int value) const override {
    return "the QuickIO server answered the callback with " + std::to_string(value);
  }
};

}  // namespace

const std::error_category& answer_category() noexcept {
  static const AnswerCategory category;
  return category;
}

Status answer_status(std::string_view what, int code, std::string_view err_msg) {
  if (code >= 200 && code < 300) return {};
  std::string cause(what);
  if (code == -1) {
    // The client gave up on it: err_msg says why ("disconnected", "closed").
    cause += ": " + std::string(err_msg.empty() ? "disconnected" : err_msg);
    return Status(err_msg == "closed" ? polybus::errc::closed : polybus::errc::disconnected,
                  std::move(cause));
  }
  cause += ": answered " + std::to_string(code);
  if (!err_msg.empty()) cause += ": " + std::string(err_msg);
  if (code == 500 && err_msg.rfind("handler failed", 0) == 0)
    return Status(polybus::errc::handler_failed, std::move(cause));
  return Status(std::error_code(code, answer_category()), std::move(cause));
}

}  // namespace polybus::quickio
