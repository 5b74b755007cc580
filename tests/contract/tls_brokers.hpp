// SPDX-License-Identifier: Apache-2.0
// TLS variants of the in-process brokers for the contract suite: "quickio+tls", "quickio+ws+tls",
// "quickio+http+tls" and "figg+tls".
#pragma once

namespace polybus::contract {
void register_tls_test_brokers();
}
