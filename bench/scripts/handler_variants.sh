#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# What a subscription's handler shape costs per message: `polybus bench URL` one message at a
# time, in batches of 100 (--batch-consume), and with each ready middleware (--middleware), the
# variants rotating from round to round; the median CPU per message (this process: client side)
# and msgs/s of each, and each one's CPU against one at a time within its round.
#
#   bench/scripts/handler_variants.sh POLYBUS_BINARY URL [MESSAGES] [ROUNDS]
#   e.g. URL broker:mem, broker:nsq, or nsq://ADDRESS of a real nsqd
set -euo pipefail
polybus=$1
url=$2
messages=${3:-300000}
rounds=${4:-3}
variants=(
  "one at a time|"
  "batches of 100|--batch-consume 100 --batch-wait 20"
  "middleware: pass|--middleware pass"
  "middleware: timeout|--middleware timeout"
  "middleware: throttle|--middleware throttle"
  "middleware: circuit_breaker|--middleware circuit_breaker"
  "middleware: deduplicate|--middleware deduplicate"
  "middleware: all five|--middleware pass,timeout,throttle,circuit_breaker,deduplicate"
)
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for ((round = 0; round < rounds; ++round)); do
  for ((k = 0; k < ${#variants[@]}; ++k)); do
    i=$(((k + round) % ${#variants[@]}))
    IFS='|' read -r name flags <<< "${variants[$i]}"
    # shellcheck disable=SC2086
    line=$("$polybus" bench "$url" --messages "$messages" $flags 2> /dev/null | tail -n 1)
    echo "$round|$name|$line" >> "$out"
  done
done
python3 - "$out" << 'PY'
import json, statistics, sys
runs = {}
for row in open(sys.argv[1]):
    round_, name, line = row.rstrip("\n").split("|", 2)
    runs.setdefault(name, {})[round_] = json.loads(line)
base = runs["one at a time"]
print(f"{'variant':32} {'msgs/s':>10} {'CPU us/msg':>11} {'vs one at a time':>17}")
for name, by_round in runs.items():
    cpu = statistics.median(r["cpu_us_per_msg"] for r in by_round.values())
    rate = statistics.median(r["msgs_per_sec"] for r in by_round.values())
    ratio = statistics.median(r["cpu_us_per_msg"] / base[k]["cpu_us_per_msg"]
                              for k, r in by_round.items())
    print(f"{name:32} {rate:>10.0f} {cpu:>11.3f} {ratio:>16.2f}x")
PY
