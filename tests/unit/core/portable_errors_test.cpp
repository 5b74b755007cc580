// SPDX-License-Identifier: Apache-2.0
// polybus::errc is the portable condition set: every protocol category and the system's socket
// errors compare equal to the condition that names their failure, so one check works on every
// broker. A Status carries the cause with the code.
#include <catch2/catch.hpp>

#include <asio/error.hpp>
#include <asio/ssl/error.hpp>
#include <sstream>

#include "polybus/figg/codec.hpp"
#include "polybus/memodb/codec.hpp"
#include "polybus/nsq/compression.hpp"
#include "polybus/nsq/error.hpp"
#include "polybus/polybus.hpp"
#include "polybus/quickio/client_errc.hpp"
#include "polybus/quickio/codec.hpp"
#include "polybus/status.hpp"

using namespace polybus;

TEST_CASE("every NSQ code maps onto one portable condition", "[errors]") {
  CHECK(make_error_code(nsq::errc::e_pub_failed) == errc::broker_error);
  CHECK(make_error_code(nsq::errc::e_bad_topic) == errc::broker_error);
  CHECK(make_error_code(nsq::errc::e_unauthorized) == errc::broker_error);
  CHECK(make_error_code(nsq::errc::unknown_server_error) == errc::broker_error);
  CHECK(make_error_code(nsq::errc::frame_too_large) == errc::frame_too_large);
  CHECK(make_error_code(nsq::errc::body_too_large) == errc::frame_too_large);
  CHECK(make_error_code(nsq::errc::bad_frame_size) == errc::protocol_error);
  CHECK(make_error_code(nsq::errc::invalid_json) == errc::protocol_error);
  CHECK(make_error_code(nsq::errc::invalid_name) == errc::invalid_argument);
  CHECK(make_error_code(nsq::compression_errc::checksum_mismatch) == errc::protocol_error);
  // One condition each: a broker refusal is not also a protocol error.
  CHECK_FALSE(make_error_code(nsq::errc::e_pub_failed) == errc::protocol_error);
  CHECK_FALSE(make_error_code(nsq::errc::e_pub_failed) == errc::timeout);
}

TEST_CASE("Figg, QuickIO and MemoDB (memo01 and SP) codes map onto portable conditions",
          "[errors]") {
  CHECK(make_error_code(figg::errc::frame_too_large) == errc::frame_too_large);
  CHECK(make_error_code(figg::errc::truncated_field) == errc::protocol_error);
  CHECK(make_error_code(figg::errc::invalid_topic) == errc::invalid_argument);
  CHECK(make_error_code(quickio::codec_errc::frame_too_large) == errc::frame_too_large);
  CHECK(make_error_code(quickio::codec_errc::malformed_event) == errc::protocol_error);
  CHECK(make_error_code(quickio::client_errc::http_status) == errc::broker_error);
  CHECK(make_error_code(quickio::client_errc::handshake_refused) == errc::connect_failed);
  CHECK(make_error_code(quickio::client_errc::queue_full) == errc::limit_exceeded);
  CHECK(make_error_code(memodb::errc::malformed_cbor) == errc::protocol_error);
  CHECK(make_error_code(memodb::errc::sp_bad_header) == errc::protocol_error);
  CHECK(make_error_code(memodb::errc::sp_message_too_large) == errc::frame_too_large);
}

TEST_CASE("socket errors from the OS and Asio map onto portable conditions", "[errors]") {
  CHECK(std::make_error_code(std::errc::connection_refused) == errc::connect_failed);
  CHECK(std::error_code(ECONNREFUSED, std::system_category()) == errc::connect_failed);
  CHECK(std::error_code(EHOSTUNREACH, std::system_category()) == errc::connect_failed);
  CHECK(std::make_error_code(std::errc::connection_reset) == errc::disconnected);
  CHECK(std::make_error_code(std::errc::broken_pipe) == errc::disconnected);
  CHECK(std::make_error_code(std::errc::timed_out) == errc::timeout);
  // Asio reports errno values in a category of its own ("asio.system").
  CHECK(make_error_code(asio::error::connection_refused) == errc::connect_failed);
  CHECK(make_error_code(asio::error::connection_reset) == errc::disconnected);
  CHECK(make_error_code(asio::error::timed_out) == errc::timeout);
  CHECK(make_error_code(asio::error::eof) == errc::disconnected);
  CHECK(make_error_code(asio::error::host_not_found) == errc::connect_failed);
  CHECK(make_error_code(asio::ssl::error::stream_truncated) == errc::disconnected);
  CHECK_FALSE(std::make_error_code(std::errc::no_such_file_or_directory) == errc::connect_failed);
  CHECK(portable_condition(std::error_code{}) == errc::success);
}

TEST_CASE("the core's own codes are their own conditions", "[errors]") {
  for (int value = 1; value <= static_cast<int>(errc::limit_exceeded); ++value) {
    const auto e = static_cast<errc>(value);
    CAPTURE(value);
    CHECK(make_error_code(e) == e);
    CHECK(portable_condition(make_error_code(e)) == e);
    CHECK_FALSE(make_error_code(e) == (e == errc::timeout ? errc::closed : errc::timeout));
    CHECK(make_error_code(e).message() == make_error_condition(e).message());
  }
}

TEST_CASE("a Status is its code, compares portably and says its cause", "[errors]") {
  const Status refused(make_error_code(nsq::errc::e_bad_topic), "127.0.0.1:4150: E_BAD_TOPIC bad");
  CHECK(refused);
  CHECK(refused == errc::broker_error);
  CHECK(refused == make_error_code(nsq::errc::e_bad_topic));
  CHECK(refused != std::error_code{});
  CHECK(refused.message() == refused.code().message() + ": 127.0.0.1:4150: E_BAD_TOPIC bad");
  std::ostringstream out;
  out << refused;
  CHECK(out.str() == refused.message());
  const std::error_code plain = refused;  // old-style completions still take it
  CHECK(plain == make_error_code(nsq::errc::e_bad_topic));

  const Status ok;
  CHECK_FALSE(ok);
  CHECK(ok == std::error_code{});
  CHECK(ok.message() == std::error_code{}.message());
  CHECK(Status(errc::closed).message() == make_error_code(errc::closed).message());

  // A completion written for std::error_code still fits.
  Completion old_style = [](std::error_code ec) { CHECK(ec == errc::closed); };
  old_style(Status(errc::closed, "client closed"));
}
