#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds tests/install/subproject twice, taking this checkout once with FetchContent and once
# with add_subdirectory, and runs what each built: a message through mem:// and a round trip
# through every in-process broker. The project refuses to configure if polybus, as a
# subproject, brings its tests, samples or -Werror along.
#
#   tests/install/check_subproject.sh SOURCE_DIR BUILD_DIR
#
# As a subproject polybus leaves the compiler launcher to its user, so this one sets ccache
# itself, the way cmake/PolybusCompilerCache.cmake does for a top-level build: the two builds
# lie under BUILD_DIR with the same layout (polybus's build in polybus/), so that the second
# compiles nothing the first did, and a later run nothing either.
set -euo pipefail
source_dir=$(cd "$1" && pwd)
work="$2/subproject-consumers"
rm -rf "$work"
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
launcher=()
if command -v ccache > /dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$(dirname "$source_dir")}" CCACHE_NOHASHDIR=true
fi
for how in FetchContent add_subdirectory; do
  cmake -S "$source_dir/tests/install/subproject" -B "$work/$how" -G Ninja "${launcher[@]}" \
        -DCMAKE_BUILD_TYPE=Release -DPOLYBUS_AS="$how" -DPOLYBUS_CHECKOUT="$source_dir" \
        > "$work/$how.configure.log" 2>&1 || { cat "$work/$how.configure.log"; exit 1; }
  cmake --build "$work/$how" -j 2 > "$work/$how.build.log" 2>&1 ||
    { tail -50 "$work/$how.build.log"; exit 1; }
  "$work/$how/consumer" | grep -q "from an installed polybus" || { echo "$how: no message"; exit 1; }
  "$work/$how/in_process_brokers" > "$work/$how.brokers.log" ||
    { cat "$work/$how.brokers.log"; exit 1; }
  grep -qx "nsq ok" "$work/$how.brokers.log" || { cat "$work/$how.brokers.log"; exit 1; }
  echo "$how: ok ($(wc -l < "$work/$how.brokers.log") in-process brokers)"
done
