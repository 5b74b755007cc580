// SPDX-License-Identifier: Apache-2.0
// OMB workload files: OMB's own read with every field, and a file that is not one refused before
// anything connects, naming the file, the field and the value.
#include <catch2/catch.hpp>

#include <unistd.h>
#include <cstdio>
#include <fstream>

#include "bench/workload.hpp"

using namespace polybus::bench;

namespace {

// OMB's workloads/100-topics-1-partitions-1kb.yaml, with its licence header, as it is.
const char* kHundredTopics = R"(#
# Licensed under the Apache License, Version 2.0 (the "License");
#

name: 1 producer / 3 consumers on 100 topics

topics: 100
partitionsPerTopic: 1
messageSize: 1024
payloadFile: "payload/payload-1Kb.data"
subscriptionsPerTopic: 3
consumerPerSubscription: 1
producersPerTopic: 1
producerRate: 150000
consumerBacklogSizeGB: 0
testDurationMinutes: 240
)";

std::string with_payload_file(const std::string& yaml, const std::string& path) {
  std::string out = yaml;
  const std::string from = "payload/payload-1Kb.data";
  out.replace(out.find(from), from.size(), path);
  return out;
}

struct TempFile {
  std::string path;
  explicit TempFile(std::size_t size) {
    char name[] = "/tmp/polybus-workload-XXXXXX";
    const int fd = mkstemp(name);
    path = name;
    std::string bytes(size, 'x');
    if (fd >= 0) {
      (void)!write(fd, bytes.data(), bytes.size());
      close(fd);
    }
  }
  ~TempFile() { std::remove(path.c_str()); }
};

std::string refusal(const std::string& yaml, const WorkloadLimits& limits = {}) {
  try {
    parse_workload(yaml, "w.yaml", limits);
  } catch (const WorkloadError& e) {
    return e.what();
  }
  return "accepted";
}

const char* kMinimal =
    "name: n\ntopics: 1\nmessageSize: 100\nsubscriptionsPerTopic: 1\nproducersPerTopic: 1\n"
    "consumerPerSubscription: 1\nproducerRate: 100\ntestDurationMinutes: 1\n";

}  // namespace

TEST_CASE("workload: OMB's 100-topic file reads with every field, defaults as OMB's") {
  TempFile payload(1024);
  const Workload w = parse_workload(with_payload_file(kHundredTopics, payload.path), "100.yaml");
  CHECK(w.name == "1 producer / 3 consumers on 100 topics");
  CHECK(w.topics == 100);
  CHECK(w.partitions_per_topic == 1);
  CHECK(w.message_size == 1024);
  CHECK(w.payload_file == payload.path);
  CHECK(w.subscriptions_per_topic == 3);
  CHECK(w.consumer_per_subscription == 1);
  CHECK(w.producers_per_topic == 1);
  CHECK(w.producer_rate == 150000);
  CHECK(w.consumer_backlog_size_gb == 0);
  CHECK(w.test_duration_minutes == 240);
  // Not in the file: OMB's defaults.
  CHECK(w.key_distributor == KeyDistributor::no_key);
  CHECK(w.warmup_duration_minutes == 1);
  CHECK(w.backlog_drain_ratio == 1.0);
  CHECK(w.test_duration() == std::chrono::minutes(240));
  Workload shorter = w;
  shorter.test_duration_override = std::chrono::seconds(10);
  shorter.warmup_duration_override = std::chrono::seconds(0);
  CHECK(shorter.test_duration() == std::chrono::seconds(10));
  CHECK(shorter.warmup_duration() == std::chrono::seconds(0));
}

TEST_CASE("workload: every other field of OMB's Workload is read") {
  const Workload w = parse_workload(
      std::string(kMinimal) +
          "partitionsPerTopic: 16\nkeyDistributor: KEY_ROUND_ROBIN\nuseRandomizedPayloads: true\n"
          "randomBytesRatio: 0.5\nrandomizedPayloadPoolSize: 1000\nconsumerBacklogSizeGB: 2\n"
          "backlogDrainRatio: 0.5\nwarmupDurationMinutes: 0\n",
      "w.yaml");
  CHECK(w.partitions_per_topic == 16);
  CHECK(w.key_distributor == KeyDistributor::key_round_robin);
  CHECK(w.use_randomized_payloads);
  CHECK(w.random_bytes_ratio == 0.5);
  CHECK(w.randomized_payload_pool_size == 1000);
  CHECK(w.consumer_backlog_size_gb == 2);
  CHECK(w.consumer_backlog_bytes() == 2ull << 30);
  CHECK(w.backlog_drain_ratio == 0.5);
  CHECK(w.warmup_duration_minutes == 0);
  Workload smaller = w;
  smaller.consumer_backlog_bytes_override = 8 << 20;  // bench --backlog 8MiB
  CHECK(smaller.consumer_backlog_bytes() == 8u << 20);
}

TEST_CASE("workload: a file that is not an OMB workload is refused, naming field and value") {
  CHECK_THAT(refusal("topics: [1, 2\n"), Catch::Contains("w.yaml: not YAML"));
  CHECK_THAT(refusal("- a\n- b\n"), Catch::Contains("not a YAML mapping"));
  CHECK_THAT(
      refusal(std::string(kMinimal) + "partitions: 3\n"),
      Catch::Contains("partitions (line 9)") && Catch::Contains("not a field of an OMB workload"));
  CHECK_THAT(refusal(std::string(kMinimal) + "producerRate: -5\n"),
             Catch::Contains("producerRate") && Catch::Contains("'-5'"));
  CHECK_THAT(refusal("name: n\ntopics: 1\nmessageSize: 100\nsubscriptionsPerTopic: 1\n"
                     "producersPerTopic: 1\nconsumerPerSubscription: 1\n"
                     "producerRate: 1000000000000\ntestDurationMinutes: 1\n"),
             Catch::Contains("producerRate") && Catch::Contains("1000000000000 is out of range"));
  CHECK_THAT(refusal("name: n\ntopics: 1000000000\nmessageSize: 100\nsubscriptionsPerTopic: 1\n"
                     "producersPerTopic: 1\nconsumerPerSubscription: 1\nproducerRate: 1\n"
                     "testDurationMinutes: 1\n"),
             Catch::Contains("topics") && Catch::Contains("1000000000 is out of range"));
  CHECK_THAT(refusal("name: n\ntopics: 1\nmessageSize: 100\nsubscriptionsPerTopic: 1\n"
                     "producersPerTopic: 1\nconsumerPerSubscription: 1\nproducerRate: 0\n"
                     "testDurationMinutes: 1\nconsumerBacklogSizeGB: 1\n"),
             Catch::Contains("consumerBacklogSizeGB") && Catch::Contains("with producerRate 0"));
  CHECK_THAT(refusal("name: n\ntopics: abc\n"),
             Catch::Contains("topics (line 2): wants an integer, got 'abc'"));
  CHECK_THAT(refusal("name: n\ntopics: [1]\n"),
             Catch::Contains("wants an integer, got a YAML collection"));
  CHECK_THAT(refusal(std::string(kMinimal) + "keyDistributor: SOMETIMES\n"),
             Catch::Contains("'SOMETIMES' is none of NO_KEY"));
  CHECK_THAT(refusal(std::string(kMinimal) + "randomBytesRatio: 2\n"),
             Catch::Contains("randomBytesRatio") && Catch::Contains("out of range"));
  CHECK_THAT(refusal("name: n\ntopics: 1\n"), Catch::Contains("no subscriptionsPerTopic"));
  CHECK_THAT(refusal(std::string(kMinimal) + "payloadFile: /nonexistent/payload.data\n"),
             Catch::Contains("payloadFile") && Catch::Contains("does not exist"));
  TempFile big(2000);
  WorkloadLimits small;
  small.max_payload = 1000;
  CHECK_THAT(refusal("name: n\ntopics: 1\nsubscriptionsPerTopic: 1\nproducersPerTopic: 1\n"
                     "consumerPerSubscription: 1\nproducerRate: 1\ntestDurationMinutes: 1\n"
                     "payloadFile: " +
                         big.path + "\n",
                     small),
             Catch::Contains("2000 bytes, larger than --max-payload 1000"));
  // 100,000 topics of 1 producer and 1 consumer: 200,000 clients, over the bound.
  CHECK_THAT(refusal("name: n\ntopics: 100000\nmessageSize: 10\nsubscriptionsPerTopic: 1\n"
                     "producersPerTopic: 1\nconsumerPerSubscription: 1\nproducerRate: 1\n"
                     "testDurationMinutes: 1\n"),
             Catch::Contains("200000 producers and consumers"));
}

TEST_CASE("workload: read_workload names a file that cannot be read") {
  CHECK_THROWS_WITH(read_workload("/nonexistent/w.yaml"),
                    Catch::Contains("/nonexistent/w.yaml: cannot be read"));
}
