#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Instructions per message, counted by callgrind: the "Instructions per message" table of
# docs/performance.md.
#
#   bench/compare/instructions.sh [POLYBUS_BINARY] [BROKER...]
#
# For each in-process broker (default: figg nsq quickio), `polybus broker BROKER` runs in a
# process of its own and `polybus bench URL --messages N --size 128` runs under
# `valgrind --tool=callgrind` twice, with 50,000 and 150,000 messages; instructions per message
# = (the long run's total - the short run's) / 100,000, which cancels start-up and shutdown. The
# whole client process is counted, the bench's own work (its payload and stamps) included.
# Callgrind counts instructions, not seconds, so a count repeats to about 0.2% for the same
# binary and input whatever else the machine does: it is how a change of a few percent is seen
# on a VM whose speed moves with the hour. BENCH_ARGS adds flags to every bench (for example
# "--subscribers 0 --window 1024" for publish only). Needs valgrind (Debian's valgrind).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
polybus=${1:-$here/../../build/release/tools/polybus}
shift || true
brokers=("$@")
((${#brokers[@]})) || brokers=(figg nsq quickio)
command -v valgrind > /dev/null || { echo "instructions.sh: needs valgrind" >&2; exit 2; }
[ -x "$polybus" ] || { echo "instructions.sh: not an executable: $polybus" >&2; exit 2; }
source "$here/../../tests/support/broker_process.sh"

instructions() {  # MESSAGES: the bench's total instructions under callgrind
  local out="$work/callgrind.$1"
  # shellcheck disable=SC2086
  valgrind --tool=callgrind --callgrind-out-file="$out" "$polybus" bench "$url" --timeout 600 \
    --messages "$1" --size 128 ${BENCH_ARGS:-} > "$work/bench.$1" 2> "$work/valgrind.$1" ||
    fail "bench $1 under callgrind: $(tail -n 5 "$work/valgrind.$1")"
  sed -n 's/^summary: //p' "$out"
}

printf '| broker | instructions per message | 50,000 | 150,000 |\n|---|---|---|---|\n'
for broker in "${brokers[@]}"; do
  start_broker "$broker"
  short=$(instructions 50000)
  long=$(instructions 150000)
  stop_broker
  printf '| %s%s | %d | %d | %d |\n' "$broker" "${BENCH_ARGS:+ ($BENCH_ARGS)}" \
    $(((long - short) / 100000)) "$short" "$long"
done
