// SPDX-License-Identifier: Apache-2.0
// The test brokers' journal: bounded, waited on from another thread, written as JSON lines.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "polybus/journal.hpp"

using polybus::testing::Journal;
using polybus::testing::JournalEntry;
using namespace std::chrono_literals;

namespace {

JournalEntry entry(std::string kind, std::int64_t count = -1) {
  JournalEntry e;
  e.kind = std::move(kind);
  e.count = count;
  return e;
}

}  // namespace

TEST_CASE("journal: keeps the newest entries up to its capacity, numbered in order", "[journal]") {
  Journal journal(3);
  REQUIRE(journal.enabled());
  for (int i = 0; i < 5; ++i) journal.record(entry("RDY", i));
  const auto kept = journal.entries();
  REQUIRE(kept.size() == 3);
  CHECK(kept.front().seq == 3);
  CHECK(kept.front().count == 2);
  CHECK(kept.back().seq == 5);
  CHECK(kept.back().time_ns > 0);
  CHECK(journal.recorded() == 5);
  CHECK(journal.dropped() == 2);
  CHECK(journal.entries([](const JournalEntry& e) { return e.count % 2 == 0; }).size() == 2);
  journal.clear();
  CHECK(journal.entries().empty());
  journal.record(entry("FIN"));
  CHECK(journal.entries().front().seq == 6);
}

TEST_CASE("journal: of capacity 0 records nothing", "[journal]") {
  Journal journal;
  CHECK_FALSE(journal.enabled());
  journal.record(entry("SUB"));
  CHECK(journal.entries().empty());
  CHECK(journal.recorded() == 0);
}

TEST_CASE("journal: wait_for finds a kept entry at once, and one recorded later by another thread",
          "[journal]") {
  Journal journal(100);
  journal.record(entry("SUB"));
  CHECK(journal.wait_for([](const JournalEntry& e) { return e.kind == "SUB"; }, 0ms));
  CHECK_FALSE(journal.wait_for([](const JournalEntry& e) { return e.kind == "CLS"; }, 20ms));
  std::thread broker([&] {
    for (int i = 0; i < 50; ++i) journal.record(entry("FIN", i));
    journal.record(entry("CLS"));
  });
  const auto found = journal.wait_for([](const JournalEntry& e) { return e.kind == "CLS"; }, 10s);
  broker.join();
  REQUIRE(found);
  CHECK(found->seq == 52);
}

TEST_CASE("journal: a predicate may read the journal it is asked for", "[journal]") {
  Journal journal(100);
  journal.record(entry("SUB"));
  journal.record(entry("FIN", 1));
  // Both ask the predicate without holding the journal's lock, so it may call back in.
  CHECK(journal
            .entries([&journal](const JournalEntry& e) {
              return e.kind == "FIN" && journal.entries().size() == 2;
            })
            .size() == 1);
  std::thread broker([&] { journal.record(entry("FIN", 2)); });
  const auto found = journal.wait_for(
      [&journal](const JournalEntry& e) {
        return e.kind == "FIN" &&
               journal.entries([](const JournalEntry& f) { return f.kind == "FIN"; }).size() == 2;
      },
      10s);
  broker.join();
  REQUIRE(found);
  CHECK(found->count >= 1);
}

TEST_CASE("journal: each entry is written to a file as a JSON line as it is recorded",
          "[journal]") {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("polybus-journal-test-" + std::to_string(::getpid()) + ".jsonl"))
                               .string();
  {
    Journal journal(10);
    journal.write_to(path);
    JournalEntry e = entry("error");
    e.connection = 4;
    e.received = false;
    e.text = "E_FIN_FAILED FIN \"x\" failed\n";
    e.time_ns = 1234;
    journal.record(e);
    JournalEntry m = entry("message", 1);
    m.topic = "t";
    m.channel = "c";
    m.id = "0000000000000001";
    m.bytes = 5;
    m.time_ns = 5678;
    journal.record(m);
    std::ifstream in(path);
    std::string first, second;
    REQUIRE(std::getline(in, first));
    REQUIRE(std::getline(in, second));
    CHECK(first == R"({"seq":1,"time_ns":1234,"connection":4,"direction":"out","kind":"error",)"
                   R"("text":"E_FIN_FAILED FIN \"x\" failed\n"})");
    CHECK(second ==
          R"({"seq":2,"time_ns":5678,"connection":0,"direction":"in","kind":"message","topic":"t",)"
          R"("channel":"c","id":"0000000000000001","count":1,"bytes":5})");
  }
  std::filesystem::remove(path);
  Journal journal(1);
  CHECK_THROWS_AS(journal.write_to("/nonexistent-folder/journal.jsonl"), std::system_error);
}
