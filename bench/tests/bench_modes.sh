#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `polybus bench` in each mode against in-process brokers, checking what its JSON line reports
# (counts and fields, never speed): publish and subscribe; publish only (--subscribers 0); consume
# only (--publishers 0) of what the publish-only run left, and of payloads polybus did not write,
# which give no latency; --no-latency, which times nothing.
#
#   bench/tests/bench_modes.sh POLYBUS_BINARY
set -euo pipefail
polybus=$1
source "$(dirname "$0")/../../tests/support/broker_process.sh"

# The JSON line's value of KEY (numbers and strings).
field() {
  python3 -c 'import json, sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"
}
bench() {
  "$polybus" bench "$url" --timeout 60 "$@" 2> "$work/bench.err" | tail -n 1 ||
    fail "bench $*: $(cat "$work/bench.err")"
}
expect() {  # JSON KEY VALUE
  local got
  got=$(field "$1" "$2")
  [ "$got" = "$3" ] || fail "$2 is $got, not $3, in $1"
}

for name in nsq figg; do
  start_broker "$name"
  replay=(--group readers)
  [ "$name" = figg ] && replay=(--from 0)

  line=$(bench --topic both --messages 2000)
  expect "$line" mode pubsub
  expect "$line" published 2000
  expect "$line" delivered 2000
  expect "$line" latency_samples 2000
  python3 -c 'import json, sys; j = json.loads(sys.argv[1]); assert j["allocs_per_msg"] > 0' "$line" ||
    fail "no allocations counted: $line"

  line=$(bench --topic stored --messages 3000 --subscribers 0)
  expect "$line" mode publish
  expect "$line" published 3000
  expect "$line" delivered 0
  expect "$line" latency "publish to completion"
  expect "$line" latency_samples 3000

  line=$(bench --topic stored --messages 3000 --publishers 0 "${replay[@]}")
  expect "$line" mode consume
  expect "$line" published 0
  expect "$line" delivered 3000
  expect "$line" latency_samples 3000

  # --no-latency: every message still delivered, none timed, in each mode that times them.
  line=$(bench --topic untimed --messages 2000 --no-latency)
  expect "$line" delivered 2000
  expect "$line" latency_samples 0
  line=$(bench --topic untimed-stored --messages 1000 --subscribers 0 --no-latency)
  expect "$line" published 1000
  expect "$line" latency_samples 0

  # In batches: every message still delivered once, and timed.
  line=$(bench --topic batched --messages 2000 --batch-consume 100 --batch-wait 20)
  expect "$line" delivered 2000
  expect "$line" latency_samples 2000

  # Every ready middleware around the handler: still every message, once.
  line=$(bench --topic wrapped --messages 2000 --middleware pass,timeout,throttle,circuit_breaker,deduplicate)
  expect "$line" delivered 2000

  # sub --batch: batches of 4 print each payload, and a partial one comes at --batch-wait.
  "$polybus" pub "$url" sub-batched a b c d e f > /dev/null || fail "pub sub-batched on $url"
  timeout 60 "$polybus" sub "$url" sub-batched "${replay[@]}" --count 6 --batch 4 --batch-wait 50 \
    > "$work/batched.log" 2> "$work/batched.err" || fail "sub --batch: $(cat "$work/batched.err")"
  [ "$(sort "$work/batched.log" | tr -d '\n')" = abcdef ] ||
    fail "sub --batch printed: $(cat "$work/batched.log")"

  "$polybus" pub "$url" foreign one two three > /dev/null || fail "pub on $url"
  line=$(bench --topic foreign --messages 3 --publishers 0 "${replay[@]}")
  expect "$line" delivered 3
  expect "$line" latency_samples 0

  status=0
  "$polybus" bench "$url" --publishers 0 --subscribers 0 > /dev/null 2>&1 || status=$?
  [ "$status" = 2 ] || fail "--publishers 0 --subscribers 0 exited $status, not 2 (usage)"
  stop_broker
  echo "$name: pubsub, publish-only and consume-only: ok"
done

# Runs one after another against one broker leave nothing that grows: each publishing and
# consuming run has a topic of its own, so the NSQ channel an earlier run left behind collects
# none of a later run's messages. Three runs of 150 x 1 MB: with one shared topic the first two
# runs' channels would hold 300 MB that nobody reads.
start_broker nsq
for run in 1 2 3; do
  line=$(bench --messages 150 --size 1000000 --window 4)
  expect "$line" delivered 150
  expect "$line" failures 0
done
stop_broker
echo "nsq: consecutive runs leave nothing behind: ok"
