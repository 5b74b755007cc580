// SPDX-License-Identifier: Apache-2.0
// core's HTTP/1.1 response reader (polybus/text/http.hpp), which the NSQ adapter uses for
// nsqlookupd and the QuickIO adapter for long polling: framing, splits, limits and refusals.
#include <catch2/catch.hpp>
#include <optional>
#include <string>
#include <vector>

#include "polybus/error.hpp"
#include "polybus/text/http.hpp"

using polybus::errc;
using polybus::http::ResponseReader;
using polybus::http::status_of;

namespace {

// Feeds the response in pieces of `piece` bytes; the first error, or none.
std::error_code feed_in_pieces(ResponseReader& reader, const std::string& response,
                               std::size_t piece) {
  for (std::size_t at = 0; at < response.size(); at += piece)
    if (auto ec = reader.feed(std::string_view(response).substr(at, piece))) return ec;
  return {};
}

}  // namespace

TEST_CASE("status_of reads exactly three digits of an HTTP/1.x status line, 100 to 599", "[http]") {
  CHECK(status_of("HTTP/1.1 200 OK") == 200);
  CHECK(status_of("HTTP/1.0 404 Not Found\r\n") == 404);
  CHECK(status_of("HTTP/1.1 204") == 204);
  CHECK(status_of("HTTP/1.1 599 X") == 599);
  CHECK(status_of("HTTP/1.1 600 X") == -1);
  CHECK(status_of("HTTP/1.1 99 X") == -1);
  CHECK(status_of("HTTP/1.1 2x0 X") == -1);
  CHECK(status_of("HTTP/1.1 2000 X") == -1);
  CHECK(status_of("HTTP/2 200 OK") == -1);
  CHECK(status_of("NOTHTTP 200") == -1);
  CHECK(status_of("") == -1);
}

TEST_CASE("a Content-Length body, whole or a byte at a time, gives the same status and body",
          "[http]") {
  const std::string response =
      "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 12\r\n\r\n/a:0=1\n/b:0=2";
  for (std::size_t piece : {response.size(), std::size_t(1), std::size_t(7)}) {
    ResponseReader reader(1024);
    REQUIRE_FALSE(feed_in_pieces(reader, response, piece));
    REQUIRE(reader.complete());
    CHECK(reader.status() == 200);
    CHECK(reader.body() == "/a:0=1\n/b:0=");  // 12 bytes; what follows is not this response's
    REQUIRE(reader.header("content-type") != nullptr);
    CHECK(*reader.header("content-type") == "text/plain");
    CHECK(reader.header("Content-Type") == nullptr);  // names are asked for in lower case
  }
}

TEST_CASE("chunked bodies with extensions and trailers, split anywhere", "[http]") {
  const std::string response =
      "HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n"
      "3;ext=1\r\nabc\r\n2\r\nde\r\n0\r\nX-Trailer: t\r\n\r\n";
  for (std::size_t piece = 1; piece <= response.size(); ++piece) {
    ResponseReader reader(1024);
    REQUIRE_FALSE(feed_in_pieces(reader, response, piece));
    REQUIRE(reader.complete());
    CHECK(reader.status() == 404);
    CHECK(reader.body() == "abcde");
  }
}

TEST_CASE("a body without a length runs to the close, 204 has none, 1xx answers are skipped",
          "[http]") {
  ResponseReader to_close(1024);
  REQUIRE_FALSE(to_close.feed("HTTP/1.0 200 OK\r\n\r\nuntil close"));
  CHECK_FALSE(to_close.complete());
  REQUIRE_FALSE(to_close.finish());
  CHECK(to_close.complete());
  CHECK(to_close.body() == "until close");

  ResponseReader no_content(1024);
  REQUIRE_FALSE(no_content.feed("HTTP/1.1 204 No Content\r\n\r\n"));
  CHECK(no_content.complete());
  CHECK(no_content.status() == 204);

  ResponseReader empty(1024);
  REQUIRE_FALSE(empty.feed("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"));
  CHECK(empty.complete());
  CHECK(empty.body().empty());

  ResponseReader interim(1024);
  REQUIRE_FALSE(
      interim.feed("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\n"
                   "Content-Length: 2\r\n\r\nok"));
  REQUIRE(interim.complete());
  CHECK(interim.status() == 201);
  CHECK(interim.body() == "ok");
}

TEST_CASE("malformed responses are protocol errors that say what was wrong", "[http]") {
  struct Case {
    const char* response;
    const char* why;
  };
  for (const Case& c : {
           Case{"NOTHTTP 200\r\n\r\n", "not an HTTP response: NOTHT"},
           Case{"HTTP/1.1 abc OK\r\n\r\n",
                "status line without a status from 100 to 599: HTTP/1.1 abc OK"},
           Case{"HTTP/1.1 600 X\r\n\r\n", "HTTP/1.1 600 X"},
           Case{"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", "Content-Length not a number: x"},
           Case{"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n", "given twice"},
           Case{"HTTP/1.1 200 OK\r\nno colon\r\n\r\n", "not 'name: value': no colon"},
           Case{"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", "'gzip' is not supported"},
           Case{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
                "both Content-Length and chunked"},
           Case{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
                "chunk size not a hex number"},
           Case{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nabc\r\n",
                "not followed by CRLF"},
           Case{"HTTP/1.1 101 Switching Protocols\r\n\r\n", "101 Switching Protocols"},
       }) {
    ResponseReader reader(1024);
    INFO(c.response);
    CHECK(reader.feed(c.response) == errc::protocol_error);
    CHECK_THAT(reader.why(), Catch::Contains(c.why));
    // An error is final.
    CHECK(reader.feed("HTTP/1.1 200 OK\r\n\r\n") == errc::protocol_error);
    CHECK_FALSE(reader.complete());
  }
  ResponseReader junk(1024);
  CHECK(junk.feed("\x16\x03\x01") == errc::protocol_error);  // a TLS hello: refused at once
  CHECK_THAT(junk.why(), Catch::Contains("\\x16\\x03\\x01"));
}

TEST_CASE("every length is bounded, and the refusal names the limit and the value", "[http]") {
  ResponseReader length(100, "max_frame_size");
  CHECK(length.feed("HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n") == errc::frame_too_large);
  CHECK(length.why() == "HTTP Content-Length 1000000: exceeds max_frame_size=100");

  ResponseReader chunks(100, "max_frame_size");
  CHECK_FALSE(chunks.feed("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n40\r\n" +
                          std::string(64, 'a') + "\r\n"));
  CHECK(chunks.feed("40\r\n") == errc::frame_too_large);
  CHECK_THAT(chunks.why(),
             Catch::Contains("max_frame_size=100") && Catch::Contains("a chunk of 64 after 64"));

  ResponseReader to_close(100, "max_frame_size");
  CHECK_FALSE(to_close.feed("HTTP/1.1 200 OK\r\n\r\n" + std::string(100, 'a')));
  CHECK(to_close.feed("a") == errc::frame_too_large);
  CHECK_THAT(to_close.why(), Catch::Contains("max_frame_size=100"));

  ResponseReader head(100, "max_frame_size", 256);
  CHECK(head.feed("HTTP/1.1 200 OK\r\nX: " + std::string(300, 'h')) == errc::frame_too_large);
  CHECK(head.why() == "HTTP response head over 256 bytes");

  ResponseReader trailers(100, "max_frame_size", 256);
  CHECK(trailers.feed("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n" +
                      std::string(300, 't')) == errc::frame_too_large);
  CHECK_THAT(trailers.why(), Catch::Contains("trailers over"));

  ResponseReader size_line(100);
  CHECK(size_line.feed("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" +
                       std::string(2000, '0')) == errc::protocol_error);
  CHECK_THAT(size_line.why(), Catch::Contains("framing line over 1024 bytes"));

  ResponseReader interim(100);
  std::string many;
  for (int i = 0; i < 9; ++i) many += "HTTP/1.1 100 Continue\r\n\r\n";
  CHECK(interim.feed(many) == errc::protocol_error);
  CHECK_THAT(interim.why(), Catch::Contains("more than 8 interim"));
}

TEST_CASE("a response cut short is an error at the close, naming where it stopped", "[http]") {
  ResponseReader nothing(1024);
  CHECK(nothing.finish() == errc::protocol_error);
  CHECK(nothing.why() == "the connection closed before an HTTP response");

  ResponseReader in_head(1024);
  REQUIRE_FALSE(in_head.feed("HTTP/1.1 200 OK\r\nContent-"));
  CHECK(in_head.finish() == errc::protocol_error);
  CHECK_THAT(in_head.why(), Catch::Contains("in its head"));

  ResponseReader in_body(1024);
  REQUIRE_FALSE(in_body.feed("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc"));
  CHECK(in_body.finish() == errc::protocol_error);
  CHECK(in_body.why() == "the HTTP response was cut short: 3 of 10 body bytes");

  ResponseReader in_chunks(1024);
  REQUIRE_FALSE(in_chunks.feed("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nab"));
  CHECK(in_chunks.finish() == errc::protocol_error);
  CHECK_THAT(in_chunks.why(), Catch::Contains("chunked body, after 2 bytes"));
}

TEST_CASE("a head dripped a byte at a time is read in linear time and kept to the head", "[http]") {
  // About 43,000 header bytes one at a time: a reader that searched its whole buffer on each
  // byte would do some 9e8 comparisons here; this one looks at each byte once.
  ResponseReader reader(1024, "max_frame_size", 64 * 1024);
  std::string response = "HTTP/1.1 200 OK\r\n";
  for (int i = 0; i < 2000; ++i) response += "X-Header-" + std::to_string(i) + ": value\r\n";
  response += "Content-Length: 2\r\n\r\nok";
  REQUIRE(response.size() > 40000);
  REQUIRE_FALSE(feed_in_pieces(reader, response, 1));
  REQUIRE(reader.complete());
  CHECK(reader.body() == "ok");
  REQUIRE(reader.header("x-header-1999") != nullptr);
}

// ---- requests (the in-process brokers' side) ----

using polybus::http::RequestReader;

namespace {

struct Read {
  std::vector<std::string> requests;  // "METHOD path ? query body-bytes"
  int error_status = 0;
};

// Drives the reader as the brokers do: until it wants more bytes.
Read read_requests(RequestReader& reader, const std::string& bytes, std::size_t piece) {
  Read out;
  for (std::size_t at = 0; at < bytes.size(); at += piece) {
    std::string_view in = std::string_view(bytes).substr(at, piece);
    for (;;) {
      const auto r = reader.feed(in);
      in.remove_prefix(r.consumed);
      if (r.status == RequestReader::Status::need_more) break;
      if (r.status == RequestReader::Status::error) {
        out.error_status = r.error_status;
        return out;
      }
      if (r.status == RequestReader::Status::head_ready) continue;
      const auto& q = reader.request();
      out.requests.push_back(q.method + " " + q.path + " ? " + q.query + " " + q.body);
      reader.next();
    }
  }
  return out;
}

}  // namespace

TEST_CASE("requests: pipelined, with and without bodies, split anywhere, read alike", "[http]") {
  const std::string bytes =
      "GET /lookup?topic=a%20b HTTP/1.1\r\nHost: x\r\n\r\n"
      "POST /qio?sid=1 HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello"
      "GET http://host:4161/nodes HTTP/1.0\nConnection: keep-alive\n\n";
  for (std::size_t piece = 1; piece <= bytes.size(); ++piece) {
    RequestReader reader(1024, 1024);
    const Read read = read_requests(reader, bytes, piece);
    INFO("pieces of " << piece);
    CHECK(read.error_status == 0);
    CHECK(read.requests == std::vector<std::string>{"GET /lookup ? topic=a%20b ",
                                                    "POST /qio ? sid=1 hello", "GET /nodes ?  "});
  }
}

TEST_CASE("requests: head fields, keep-alive and query parameters", "[http]") {
  RequestReader reader(1024, 1024);
  auto r = reader.feed(
      "GET /x?sid=ab&connect=true&flag HTTP/1.0\r\nUpgrade: WebSocket\r\n"
      "Connection: keep-alive, Upgrade\r\n\r\n");
  REQUIRE(r.status == RequestReader::Status::head_ready);
  const auto& q = reader.request();
  CHECK(q.target == "/x?sid=ab&connect=true&flag");
  CHECK_FALSE(q.http_1_1);
  CHECK(q.keep_alive());
  REQUIRE(q.header("upgrade") != nullptr);
  CHECK(*q.header("upgrade") == "WebSocket");
  CHECK(q.query_parameter("sid") == std::optional<std::string>("ab"));
  CHECK(q.query_parameter("connect") == std::optional<std::string>("true"));
  CHECK(q.query_parameter("flag") == std::optional<std::string>(""));
  CHECK_FALSE(q.query_parameter("missing"));
  CHECK_THAT(reader.raw_head(), Catch::StartsWith("GET /x?") && Catch::EndsWith("Upgrade\r\n\r\n"));
  CHECK(reader.feed("").status == RequestReader::Status::request_ready);

  RequestReader closing(1024, 1024);
  REQUIRE(closing.feed("GET / HTTP/1.1\r\nConnection: close\r\n\r\n").status ==
          RequestReader::Status::head_ready);
  CHECK_FALSE(closing.request().keep_alive());
  // Connection is a token list: matched token by token, not as a substring.
  const auto keeps = [](const std::string& head) {
    RequestReader one(1024, 1024);
    REQUIRE(one.feed(head).status == RequestReader::Status::head_ready);
    return one.request().keep_alive();
  };
  CHECK_FALSE(keeps("GET / HTTP/1.1\r\nConnection: Upgrade , CLOSE\r\n\r\n"));
  CHECK(keeps("GET / HTTP/1.1\r\nConnection: x-not-close\r\n\r\n"));
  CHECK_FALSE(keeps("GET / HTTP/1.0\r\nConnection: not-keep-alive\r\n\r\n"));
  CHECK(keeps("GET / HTTP/1.0\r\nConnection: upgrade,Keep-Alive\r\n\r\n"));
}

TEST_CASE("requests: what the reader refuses, with the status to answer", "[http]") {
  struct Case {
    std::string bytes;
    int status;
  };
  for (const Case& c : {
           Case{"GET /\r\n\r\n", 400},
           Case{"GET  / HTTP/1.1\r\n\r\n", 400},
           Case{"GET / b HTTP/1.1\r\n\r\n", 400},
           Case{"GET / HTTP/2.0\r\n\r\n", 400},
           Case{"GET / HTTP/1.1\r\nno colon\r\n\r\n", 400},
           Case{"GET / HTTP/1.1\r\n folded: x\r\n\r\n", 400},
           Case{"POST / HTTP/1.1\r\nContent-Length: x\r\n\r\n", 400},
           Case{"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400},
           Case{"POST / HTTP/1.1\r\nContent-Length: 2000\r\n\r\n", 413},
           Case{"GET / HTTP/1.1\r\nX: " + std::string(2000, 'x'), 431},
       }) {
    INFO(c.bytes.substr(0, 60));
    RequestReader reader(1024, 1024);
    CHECK(read_requests(reader, c.bytes, c.bytes.size()).error_status == c.status);
    CHECK(reader.feed("GET / HTTP/1.1\r\n\r\n").status == RequestReader::Status::error);  // final
  }
  // A chunked body is not read: head_ready lets the server answer (QuickIO 411, nsqlookupd 501);
  // feeding on is a 501.
  RequestReader chunked(1024, 1024);
  REQUIRE(chunked.feed("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n").status ==
          RequestReader::Status::head_ready);
  CHECK(chunked.request().chunked);
  CHECK_FALSE(chunked.request().content_length);
  const auto r = chunked.feed("5\r\nhello\r\n0\r\n\r\n");
  CHECK(r.status == RequestReader::Status::error);
  CHECK(r.error_status == 501);
}

TEST_CASE("a response leaves its connection reusable only when its end is its own", "[http]") {
  const auto reusable = [](const std::string& response, bool close_stream = false) {
    ResponseReader reader(1024);
    REQUIRE_FALSE(reader.feed(response));
    if (close_stream) REQUIRE_FALSE(reader.finish());
    REQUIRE(reader.complete());
    return reader.reusable();
  };
  CHECK(reusable("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi"));
  CHECK(reusable("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n"));
  CHECK(reusable("HTTP/1.1 204 No Content\r\n\r\n"));
  // QuickIO's server: HTTP/1.0 to an HTTP/1.1 request, and the connection kept.
  CHECK(reusable("HTTP/1.0 200 OK\r\nContent-Length: 0\r\nContent-Type: text/plain\r\n\r\n"));
  CHECK_FALSE(reusable("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi"));
  CHECK_FALSE(reusable("HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: Close\r\n\r\n"));
  CHECK_FALSE(reusable("HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: x, close\r\n\r\n"));
  CHECK(reusable("HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: closer\r\n\r\n"));
  CHECK_FALSE(reusable("HTTP/1.1 200 OK\r\n\r\nto the end", true));  // no length: read to close
  // Bytes after the response: nobody asked for them, so the connection is not trusted again.
  CHECK_FALSE(reusable("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhiHTTP/1.1 200 OK\r\n"));

  ResponseReader incomplete(1024);
  REQUIRE_FALSE(incomplete.feed("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nh"));
  CHECK_FALSE(incomplete.reusable());
  ResponseReader later(1024);
  REQUIRE_FALSE(later.feed("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"));
  CHECK(later.reusable());
  REQUIRE_FALSE(later.feed("x"));  // after the response, in a later read
  CHECK_FALSE(later.reusable());
}
