#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The application API stands apart: polybus/polybus.hpp, and each public header on its own,
# compiles as C++17 and C++20 and reaches neither asio nor the adapter interface
# (polybus/adapter/...). polybus/all.hpp adds the adapters' register functions and nothing more;
# polybus/asio/async.hpp (Asio completion tokens) reaches asio, and no adapter interface.
#
#   check_api_headers.sh CXX SOURCE_DIR GENERATED_DIR...
set -euo pipefail
cxx=$1
src=$2
includes=()
for dir in "$src"/*/include "$src"/core/*/include; do includes+=(-I"$dir"); done
for generated in "${@:3}"; do includes+=(-I"$generated"); done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0
check() {  # header, standard[, asio: the Asio bridge may reach asio]
  local header=$1 std=$2 reaches_asio=${3:-}
  printf '#include "%s"\nint main() { return 0; }\n' "$header" > "$work/use.cpp"
  if ! "$cxx" -std="$std" -Wall -Wextra -Werror -fsyntax-only -H "${includes[@]}" "$work/use.cpp" \
      2> "$work/trace"; then
    echo "FAIL: $header does not compile as $std:"; cat "$work/trace"; status=1; return
  fi
  local leaks
  local pattern='(/asio/|/asio\.hpp|polybus/adapter/)'
  [ -n "$reaches_asio" ] && pattern='polybus/adapter/'
  leaks=$(grep -E "^\.+ .*$pattern" "$work/trace" | sed 's/^\.* //' | sort -u || true)
  if [ -n "$leaks" ]; then
    echo "FAIL: $header ($std) reaches what applications should not see:"; echo "$leaks" | head -5
    status=1
  fi
}
headers=(polybus/polybus.hpp polybus/all.hpp polybus/mem.hpp polybus/version.hpp)
# Every header the core installs at polybus/ (the api room's, and error.hpp, cloudevents.hpp,
# testing.hpp, fault_proxy.hpp from the rooms around it); those under polybus/adapter/ are the
# adapter side.
for path in "$src"/core/*/include/polybus/*.hpp; do headers+=("polybus/$(basename "$path")"); done
for header in "${headers[@]}"; do
  for std in c++17 c++20; do check "$header" "$std"; done
done
# The Asio bridge (completion tokens) includes asio by design, and nothing of the adapter side.
for std in c++17 c++20; do check polybus/asio/async.hpp "$std" asio; done
[ $status -eq 0 ] && echo "ok: ${#headers[@]} application headers, C++17 and C++20, no asio, no adapter interface"
exit $status
