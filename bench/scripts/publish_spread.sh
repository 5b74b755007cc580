#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# How `publish_strategy` spreads one publisher's messages over three nsqd: three `polybus broker
# nsqd` processes, `polybus bench` publishing N messages (publish only) to all three, then each
# nsqd's message count for the topic from its /stats. One line per strategy: the counts and the
# largest deviation from an even third. (That a stopped nsqd loses nothing is checked by the
# integration test "nsq: round_robin spreads publishes evenly over three nsqd ...".)
#
#   bench/scripts/publish_spread.sh POLYBUS_BINARY [N]    (default N: 300000)
set -euo pipefail
polybus=$1
messages=${2:-300000}
work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2> /dev/null || true; done
  wait 2> /dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
tcp=() http=()
for i in 0 1 2; do
  tcp+=("$(free_port)")
  http+=("$(free_port)")
  "$polybus" broker nsqd --tcp-address "127.0.0.1:${tcp[$i]}" \
    --http-address "127.0.0.1:${http[$i]}" > "$work/nsqd$i.log" 2>&1 &
  pids+=($!)
done
for i in 0 1 2; do
  for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:${http[$i]}/ping" > /dev/null && break
    sleep 0.1
  done
done
hosts="127.0.0.1:${tcp[0]},127.0.0.1:${tcp[1]},127.0.0.1:${tcp[2]}"
for strategy in round_robin least_pending failover; do
  topic="spread-$strategy"
  "$polybus" bench "nsq://$hosts?publish_strategy=$strategy" --topic "$topic" \
    --messages "$messages" --subscribers 0 > "$work/bench.out" 2>&1 ||
    { cat "$work/bench.out"; exit 1; }
  counts=()
  for i in 0 1 2; do
    counts+=("$(curl -sf "http://127.0.0.1:${http[$i]}/stats?format=json&topic=$topic" |
      python3 -c 'import json, sys
t = [t for t in json.load(sys.stdin)["topics"] or [] if t["topic_name"] == sys.argv[1]]
print(t[0]["message_count"] if t else 0)' "$topic")")
  done
  python3 - "$strategy" "$messages" "${counts[@]}" << 'PY'
import sys
strategy, total, counts = sys.argv[1], int(sys.argv[2]), [int(c) for c in sys.argv[3:]]
third = total / 3
worst = max(abs(c - third) / third for c in counts)
print(f"{strategy:14} {' '.join(f'{c:>8}' for c in counts)}   sum {sum(counts)}   "
      f"largest deviation from a third: {100 * worst:.1f}%")
PY
done
