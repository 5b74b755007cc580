#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs every fuzzer of a fuzz build for a while; builds nothing.
#
#   tests/fuzz/run.sh BUILD_DIR SECONDS [JOBS]
#
# BUILD_DIR is the fuzz preset's build directory (build/fuzz); each fuzzer runs for SECONDS on a
# copy of its seed corpus (tests/fuzz/corpus/<fuzzer>, with tests/fuzz/dict/<protocol>.dict) in
# a temporary directory, so the repository is not modified. JOBS fuzzers run at once (default
# 1). Prints the executions of each fuzzer; exits non-zero if any fuzzer found a crash, a leak,
# a timeout or an out-of-memory, naming the reproducer (kept under the temporary directory) and
# the log. Reproduce with: BUILD_DIR/tests/fuzz/<fuzzer> <reproducer>
set -uo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 BUILD_DIR SECONDS [JOBS]" >&2
  exit 2
fi
build=$1
seconds=$2
jobs=${3:-1}
here="$(cd "$(dirname "$0")" && pwd)"
bin="$build/tests/fuzz"
fuzzers=()
for dir in "$here"/corpus/*/; do
  name=$(basename "$dir")
  if [ ! -x "$bin/$name" ]; then
    echo "run.sh: $bin/$name is missing: build the fuzz preset first" >&2
    exit 2
  fi
  fuzzers+=("$name")
done
# Symbolized sanitizer stacks (Debian's llvm-15).
if [ -z "${ASAN_SYMBOLIZER_PATH:-}" ] && [ -x /usr/lib/llvm-15/bin/llvm-symbolizer ]; then
  export ASAN_SYMBOLIZER_PATH=/usr/lib/llvm-15/bin/llvm-symbolizer
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/polybus-fuzz.XXXXXX")
echo "=== fuzzing ${#fuzzers[@]} fuzzers for ${seconds} s each, $jobs at a time, in $work"

run_one() {
  local name=$1
  local dir="$work/$name"
  mkdir -p "$dir/corpus" "$dir/artifacts"
  cp "$here/corpus/$name/"* "$dir/corpus/"
  local dict=()
  local protocol=${name%%_*}
  [ -f "$here/dict/$protocol.dict" ] && dict=(-dict="$here/dict/$protocol.dict")
  # A crash, leak or timeout ends the run with a non-zero status and an artifact.
  ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}" UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}" \
    "$bin/$name" -max_total_time="$seconds" -rss_limit_mb=2048 -max_len=65536 -timeout=30 \
    -print_final_stats=1 -artifact_prefix="$dir/artifacts/" "${dict[@]}" "$dir/corpus" \
    > "$dir/log" 2>&1
  echo $? > "$dir/status"
}

running=0
for name in "${fuzzers[@]}"; do
  run_one "$name" &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then
    wait -n
    running=$((running - 1))
  fi
done
wait

failed=0
printf '%-28s %14s %10s  %s\n' fuzzer executions exec/s result
for name in "${fuzzers[@]}"; do
  dir="$work/$name"
  status=$(cat "$dir/status" 2> /dev/null || echo 1)
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/log" | tail -1)
  speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$dir/log" | tail -1)
  artifact=$(ls "$dir/artifacts" 2> /dev/null | head -1)
  if [ "$status" = 0 ] && [ -z "$artifact" ]; then
    printf '%-28s %14s %10s  %s\n' "$name" "${runs:-?}" "${speed:-?}" ok
  else
    failed=1
    printf '%-28s %14s %10s  %s\n' "$name" "${runs:-?}" "${speed:-?}" "FAILED (exit $status)"
    [ -n "$artifact" ] && echo "    reproducer: $dir/artifacts/$artifact"
    echo "    log: $dir/log"
    grep -m1 -E 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error|fuzz invariant' \
      "$dir/log" | sed 's/^/    /'
  fi
done
if [ "$failed" = 0 ]; then
  rm -rf "$work"
  echo "=== fuzzing: no findings"
else
  echo "=== fuzzing: findings above (kept in $work)"
fi
exit "$failed"
