// SPDX-License-Identifier: Apache-2.0
// The brokers whose protocol has no request/reply of its own (NSQ, Figg), again with
// envelope=cloudevents, so that the request/reply cases run on them too: request/reply then runs
// over topics (the correlation id and reply topic in the headers). They run only the cases that
// CONTRACT_REQUEST_CASE registers; the others ran on the plain broker already.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace polybus::contract {

// (plain broker, its +cloudevents variant)
const std::vector<std::pair<std::string, std::string>>& envelope_variants();

// Registers the variant of each plain broker that is registered now: call after them.
void register_envelope_test_brokers();

}  // namespace polybus::contract
