// SPDX-License-Identifier: Apache-2.0
// detail::MessageId: ids of every length come back as given, numbers in decimal, and the string
// Message::id() hands out is made once however many threads ask.
#include <catch2/catch.hpp>

#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "polybus/adapter/message_id.hpp"

using polybus::detail::MessageId;

TEST_CASE("MessageId keeps NSQ's 16 bytes, including zero bytes, in place", "[unit][core]") {
  MessageId id;
  CHECK(id.view().empty());
  CHECK(id.text().empty());
  MessageId empty;
  empty.assign(std::string_view{});  // no bytes to copy from (UBSan: no memcpy from null)
  CHECK(empty.view().empty());
  MessageId nsq;
  const std::string bytes(
      "0123\0"
      "56789abcdef",
      16);
  nsq.assign(bytes);
  CHECK(nsq.view() == bytes);
  CHECK(nsq.text() == bytes);
  CHECK(nsq.view().data() != bytes.data());  // a copy, not a view of the caller's buffer
}

TEST_CASE("MessageId writes numbers in decimal, up to the largest 64-bit one", "[unit][core]") {
  MessageId zero;
  zero.assign_number(0);
  CHECK(zero.view() == "0");
  MessageId largest;
  largest.assign_number(std::numeric_limits<std::uint64_t>::max());
  CHECK(largest.view() == "18446744073709551615");
  CHECK(largest.text() == "18446744073709551615");
}

TEST_CASE("MessageId keeps an id longer than its inline room whole", "[unit][core]") {
  const std::string exact(MessageId::kInline, 'e');
  const std::string longer(MessageId::kInline + 1, 'l');
  MessageId a;
  a.assign(exact);
  CHECK(a.view() == exact);
  MessageId b;
  b.assign(longer);
  CHECK(b.view() == longer);
  CHECK(b.text() == longer);
  b.assign("short");  // reassigned before delivery: the inline room again
  CHECK(b.view() == "short");
}

// Under TSan (part of CI), a text made without the once-guard is reported as a data race.
TEST_CASE("MessageId makes its text once when several threads ask at the same time",
          "[unit][core]") {
  MessageId id;
  id.assign(std::string(16, 'q'));
  std::vector<const std::string*> seen(4, nullptr);
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < seen.size(); ++i)
    threads.emplace_back([&, i] { seen[i] = &id.text(); });
  for (auto& t : threads) t.join();
  for (const std::string* text : seen) {
    CHECK(text == seen[0]);
    CHECK(*text == std::string(16, 'q'));
  }
}

// A number's digits are written by its first reader: under TSan, digits written without the
// once-guard while another handler thread reads them are reported as a data race.
TEST_CASE("MessageId writes a number's digits once when several threads read it at the same time",
          "[unit][core]") {
  MessageId id;
  id.assign_number(1234567890123ULL);
  std::vector<std::string> seen(4);
  std::vector<const std::string*> texts(4, nullptr);
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < seen.size(); ++i)
    threads.emplace_back([&, i] {
      seen[i] = std::string(id.view());
      texts[i] = &id.text();
    });
  for (auto& t : threads) t.join();
  for (std::size_t i = 0; i < seen.size(); ++i) {
    CHECK(seen[i] == "1234567890123");
    CHECK(texts[i] == texts[0]);
    CHECK(*texts[i] == "1234567890123");
  }
}

TEST_CASE("MessageId assigned text after a number, or a number after text, keeps the last",
          "[unit][core]") {
  MessageId a;
  a.assign_number(42);
  a.assign("abc");
  CHECK(a.view() == "abc");
  CHECK(a.text() == "abc");
  MessageId b;
  b.assign("abc");
  b.assign_number(7);
  CHECK(b.view() == "7");
  CHECK(b.text() == "7");
}
