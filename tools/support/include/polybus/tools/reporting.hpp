// SPDX-License-Identifier: Apache-2.0
// What the polybus command's subcommands and the bench say on standard error, and the payloads
// they generate.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "polybus/client.hpp"

namespace polybus::cli {

// Connects with the client's warnings and errors (why a connection failed or closed, a limit
// that was hit) written to standard error, so a failure names its cause.
Client connect_reporting(const std::string& url);

// Payload i of a generated run: its sequence number, then printable filler up to size bytes.
std::string generated_payload(std::uint64_t i, std::size_t size);

}  // namespace polybus::cli
