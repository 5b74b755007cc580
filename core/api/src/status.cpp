// SPDX-License-Identifier: Apache-2.0
#include "polybus/status.hpp"

#include <ostream>

namespace polybus {

std::ostream& operator<<(std::ostream& out, const Status& status) {
  return out << status.message();
}

}  // namespace polybus
