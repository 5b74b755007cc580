#!/usr/bin/env bash
# Heap allocations per message in steady state, counted by `polybus bench` (a counting operator
# new in the bench binary), never timed: publish and consume+ack through each scheme's
# in-process broker, run in a process of its own so that only the client is counted. The bench
# makes one allocation per message itself (its payload); the bounds leave half a message's
# worth of slack for growth and bursts on top of what each client needs: nothing more.
# Before the pools and inline buffers of session 16 these were 3.4 (Figg), 5.2 (NSQ) and 9.2
# (QuickIO), and NSQ's message id cost one more until session 17: a change that brings back a
# per-message allocation fails here.
#
#   samples/cli/tests/bench_allocations.sh POLYBUS_BINARY
set -euo pipefail
polybus=$1
source "$(dirname "$0")/broker_process.sh"

check() {  # BROKER BOUND
  start_broker "$1"
  local line
  line=$("$polybus" bench "$url" --timeout 60 --messages 50000 --size 200 2> "$work/bench.err" |
         tail -n 1) || fail "bench $1: $(cat "$work/bench.err")"
  python3 - "$line" "$2" "$1" <<'PY' || fail "$1: $line"
import json, sys
run, bound, name = json.loads(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
assert run["failures"] == 0 and run["delivered"] == run["messages"], "not every message arrived"
per = run["allocs_per_msg"]
print(f"{name}: {per:.2f} allocations per message (bound {bound})")
assert per <= bound, f"{per} allocations per message, over {bound}"
PY
  stop_broker
}

check figg 1.5
check quickio 1.5
check nsq 1.5
