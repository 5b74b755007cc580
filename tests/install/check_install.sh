#!/usr/bin/env bash
# Installs this build into a temporary prefix, then builds and runs a consumer project against
# it twice: with find_package(polybus) and with pkg-config.
set -euo pipefail
build_dir=$1
source_dir=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build_dir" --prefix "$work/prefix" > "$work/install.log"
cmake -S "$source_dir/tests/install/consumer" -B "$work/consumer" -G Ninja \
      -DCMAKE_PREFIX_PATH="$work/prefix" > "$work/configure.log"
cmake --build "$work/consumer" > "$work/build.log"
"$work/consumer/consumer" | grep -q "from an installed polybus"
echo "find_package(polybus): ok"
"$work/consumer/coroutine_consumer" | grep -qx "coroutine: ok"
echo "C++20 coroutine with asio::use_awaitable: ok"
# Every in-process broker, from the installed testing libraries (polybus::testing).
"$work/consumer/in_process_brokers" > "$work/brokers.log" || { cat "$work/brokers.log"; exit 1; }
for broker in mem nsq nsq+lookupd figg figg-quirks quickio quickio+ws quickio+http memodb+tcp; do
  grep -qx "$broker ok" "$work/brokers.log" ||
    { echo "no round trip on $broker"; cat "$work/brokers.log"; exit 1; }
done
echo "in-process brokers from the install: ok ($(wc -l < "$work/brokers.log") brokers)"
export PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig:$work/prefix/lib/x86_64-linux-gnu/pkgconfig"
g++ -std=c++17 "$source_dir/tests/install/consumer/main.cpp" -o "$work/pc-consumer" \
    $(pkg-config --cflags --libs polybus)
"$work/pc-consumer" | grep -q "from an installed polybus"
echo "pkg-config polybus: ok"
