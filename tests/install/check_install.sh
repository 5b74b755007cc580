#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs this build into a temporary prefix, moves it to another folder, then builds and runs a
# consumer project against it twice: with find_package(polybus) and with pkg-config. For a
# shared build it also checks that the programs load the installed libpolybus_*.so.0, that each
# library's SONAME carries the ABI version, and that a library exports its public API and none
# of its internals.
set -euo pipefail
build_dir=$1
source_dir=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Installed in one folder, used from another: the package names its dependencies by imported
# target (found again on the consumer's machine), never by a path of the machine that built it.
cmake --install "$build_dir" --prefix "$work/installed-here" > "$work/install.log"
if grep -rn "/usr/lib" "$work/installed-here/lib/cmake"; then
  echo "the installed CMake package names absolute library paths (above)"
  exit 1
fi
mv "$work/installed-here" "$work/prefix"
cmake -S "$source_dir/tests/install/consumer" -B "$work/consumer" -G Ninja \
      -DCMAKE_PREFIX_PATH="$work/prefix" > "$work/configure.log"
cmake --build "$work/consumer" > "$work/build.log"
# A shared install outside the dynamic linker's paths is found as a user would find it: the
# programs' RUNPATH names the folder of the libraries they link, not of what those link in turn.
libdir=$(dirname "$(find "$work/prefix" -name 'libpolybus_core.*' | head -1)")
export LD_LIBRARY_PATH="$libdir"
"$work/consumer/consumer" | grep -q "from an installed polybus"
echo "find_package(polybus): ok"
shared=false
[ -e "$libdir/libpolybus_core.so" ] && shared=true
if $shared; then
  abi=$(sed -n 's/^#define POLYBUS_ABI_VERSION \([0-9]*\)$/\1/p' "$work/prefix/include/polybus/version.hpp")
  for lib in "$libdir"/libpolybus_*.so; do
    soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
    [ "$soname" = "$(basename "$lib").$abi" ] || { echo "$lib: SONAME '$soname', not .so.$abi"; exit 1; }
  done
  for program in consumer in_process_brokers coroutine_consumer; do
    readelf -d "$work/consumer/$program" | grep -q "NEEDED.*\[libpolybus_core.so.$abi\]" ||
      { echo "$program does not load libpolybus_core.so.$abi"; exit 1; }
  done
  # Hidden visibility: the client's public face is exported, its internals (ClientCore, the
  # adapters' connections) are not.
  exported=$(nm -D --defined-only -C "$libdir/libpolybus_core.so")
  grep -q "polybus::connect(" <<< "$exported" || { echo "polybus::connect is not exported"; exit 1; }
  if grep -q "polybus::ClientCore::" <<< "$exported"; then
    echo "libpolybus_core.so exports internals (polybus::ClientCore)"; exit 1
  fi
  echo "shared libraries: SONAME .so.$abi, loaded by the consumers, internals hidden: ok"
fi
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
# An application's tests link the in-process brokers through pkg-config alone.
g++ -std=c++17 "$source_dir/tests/install/consumer/in_process_brokers.cpp" -o "$work/pc-brokers" \
    $(pkg-config --cflags --libs polybus-testing)
"$work/pc-brokers" > "$work/pc-brokers.log" || { cat "$work/pc-brokers.log"; exit 1; }
grep -qx "nsq ok" "$work/pc-brokers.log" || { cat "$work/pc-brokers.log"; exit 1; }
echo "pkg-config polybus-testing: ok ($(wc -l < "$work/pc-brokers.log") brokers)"
