// SPDX-License-Identifier: Apache-2.0
// MemoDB's memo01 codec: decode() on the whole input (a CBOR header and the payload after it).
// Checks: the payload is exactly the input's tail; every field is within its documented bound;
// the decoded header encodes again (append_ready/job/result/heartbeat/disconnect) to a header
// that decodes to the same fields, and to the same bytes when the input used shortest forms.
// The requester and worker machines (memodb/src/machine.*) get the input as the broker's answer:
// what they say next fits their state, and a payload is a view of the input's tail.
#include "fuzz_util.hpp"
#include "machine.hpp"
#include "polybus/memodb/codec.hpp"

using namespace polybus::memodb;

namespace {

bool tail_of(std::string_view part, std::string_view whole) {
  return part.empty() ||
         (part.data() >= whole.data() && part.data() + part.size() == whole.data() + whole.size());
}

void check_machines(std::string_view message) {
  auto answer = Requester::answer(message, "svc");
  if (answer.ec)
    FUZZ_CHECK(answer.payload.empty() && !answer.why.empty());
  else
    FUZZ_CHECK(tail_of(answer.payload, message));
  for (bool staying : {true, false}) {
    Worker worker("svc");
    std::string out;
    FUZZ_CHECK(!worker.ready(out));
    FUZZ_CHECK(worker.sent(false));
    auto step = worker.received(message, staying);
    switch (step.next) {
      case Worker::Next::handle:
        FUZZ_CHECK(worker.state() == Worker::State::handling);
        FUZZ_CHECK(tail_of(step.payload, message));
        out.clear();
        FUZZ_CHECK(!worker.result(out, !staying));
        FUZZ_CHECK(worker.state() == Worker::State::sending && worker.leaving() == !staying);
        break;
      case Worker::Next::send:
        FUZZ_CHECK(staying && worker.state() == Worker::State::sending && !step.out.empty());
        break;
      case Worker::Next::register_again:
        FUZZ_CHECK(staying && step.ec && !step.why.empty());
        FUZZ_CHECK(worker.state() == Worker::State::stopped);
        break;
      case Worker::Next::register_again_later:
        FUZZ_CHECK(staying && worker.state() == Worker::State::stopped);
        break;
      case Worker::Next::stop:
        FUZZ_CHECK(worker.state() == Worker::State::stopped);
        break;
    }
  }
}

bool same(const Header& a, const Header& b) {
  return a.type == b.type && a.id == b.id && a.services == b.services && a.service == b.service &&
         a.timeout_ms == b.timeout_ms && a.disconnecting == b.disconnecting;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::unique_ptr<char[]> copy(new char[size ? size : 1]);
  if (size) std::memcpy(copy.get(), data, size);
  const std::string_view message(copy.get(), size);
  check_machines(message);

  Header header;
  std::string_view payload;
  if (decode(message, header, payload)) return 0;

  FUZZ_CHECK(payload.data() + payload.size() == message.data() + message.size());
  FUZZ_CHECK(payload.size() < message.size());
  FUZZ_CHECK(header.id.size() <= kMaxIdLength);
  FUZZ_CHECK(header.services.size() <= kMaxServices);
  for (std::size_t i = 0; i < header.services.size(); ++i) {
    FUZZ_CHECK(!validate_service(header.services[i]));
    if (i > 0) FUZZ_CHECK(service_order(header.services[i - 1], header.services[i]));
  }

  std::string out;
  std::error_code ec;
  switch (header.type) {
    case MessageType::ready: {
      // READY's ID is always written empty.
      std::vector<std::string> names(header.services.begin(), header.services.end());
      ec = append_ready(out, names);
      if (header.services.empty()) {
        FUZZ_CHECK(ec);  // the encoder refuses an empty list the decoder accepted
        return 0;
      }
      break;
    }
    case MessageType::job:
      FUZZ_CHECK(!validate_service(header.service));
      ec = append_job(out, header.id, header.service, header.timeout_ms);
      break;
    case MessageType::result:
      ec = append_result(out, header.id, header.disconnecting);
      break;
    case MessageType::heartbeat:
      ec = append_heartbeat(out, header.id);
      break;
    case MessageType::disconnect:
      ec = append_disconnect(out, header.id);
      break;
  }
  FUZZ_CHECK(!ec);
  Header again;
  std::string_view rest;
  FUZZ_CHECK(!decode(out, again, rest));
  FUZZ_CHECK(rest.empty());
  if (header.type == MessageType::ready) header.id = {};
  FUZZ_CHECK(same(header, again));
  // Shortest forms in, the same bytes out (READY: when the ID was empty too).
  const std::string_view head = message.substr(0, message.size() - payload.size());
  if (head.size() == out.size() && header.type != MessageType::ready) FUZZ_CHECK(head == out);
  return 0;
}
