// SPDX-License-Identifier: Apache-2.0
#include "polybus/version.hpp"

namespace polybus {

const char* version() {
  return POLYBUS_VERSION_STRING;
}
int abi_version() {
  return POLYBUS_ABI_VERSION;
}

}  // namespace polybus
