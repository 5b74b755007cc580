#!/usr/bin/env bash
# How a client's cost grows with the work: for each scheme, one client subscribed to 1, 10, 100,
# 1,000 and 10,000 topics (one subscription each), and for NSQ one topic over 1, 10, 100 and
# 1,000 nsqd found through nsqlookupd. Each point runs `polybus bench scale` against a broker of
# its own, in another process (`polybus broker NAME`), so that only the client is measured.
# Prints each point's JSON line as it comes, then the table docs/performance.md shows.
#
#   bench/scale/measure.sh POLYBUS_BINARY [IDLE_SECONDS (default 20)] [MESSAGES (default 20000)]
#
# About 15 minutes with the defaults on 2 cores. QuickIO's servers refuse more than 1,024
# subscriptions on one connection (420), so its 10,000-topic point is reported as refused.
set -euo pipefail
polybus=$1
idle=${2:-20}
messages=${3:-20000}
work=$(mktemp -d)
broker_pid=
cleanup() {
  [ -n "$broker_pid" ] && kill "$broker_pid" 2> /dev/null && wait "$broker_pid" 2> /dev/null
  rm -rf "$work"
}
trap cleanup EXIT
ulimit -n "$(ulimit -Hn)"  # 10,000 NSQ subscriptions are 10,000 sockets on each side

start_broker() {  # polybus broker ARGS...: sets url
  rm -f "$work/url"
  "$polybus" broker "$@" > "$work/url" 2> "$work/broker.err" &
  broker_pid=$!
  for _ in $(seq 600); do
    [ -s "$work/url" ] && break
    kill -0 "$broker_pid" 2> /dev/null || { cat "$work/broker.err" >&2; exit 1; }
    sleep 0.1  # polling the broker's first line, as a script of a user's would
  done
  url=$(head -1 "$work/url")
}
stop_broker() {
  kill "$broker_pid" && wait "$broker_pid" 2> /dev/null || true
  broker_pid=
}

points="$work/points"
: > "$points"
for scheme in nsq figg quickio memodb+tcp; do
  for topics in 1 10 100 1000 10000; do
    start_broker "$scheme"
    if line=$("$polybus" bench scale "$url" --topics "$topics" --idle-seconds "$idle" \
                --messages "$messages" 2> "$work/err" | tail -1) && [ -n "$line" ]; then
      echo "$line" | tee -a "$points"
    else
      why=$(tr '\n' ' ' < "$work/err")
      echo "{\"scheme\":\"$scheme\",\"topics\":$topics,\"refused\":$(printf '%s' "$why" |
        python3 -c 'import json, sys; print(json.dumps(sys.stdin.read().strip()))')}" | tee -a "$points"
    fi
    stop_broker
  done
done
for nsqd in 1 10 100 1000; do
  start_broker nsq+lookupd --nsqd "$nsqd" --topic fan-out
  "$polybus" bench scale "$url" --fan-out fan-out --connections "$nsqd" --idle-seconds "$idle" |
    tail -1 | python3 -c 'import json, sys; d = json.loads(sys.stdin.read()); d["nsqd"] = '"$nsqd"'; print(json.dumps(d))' |
    tee -a "$points"
  stop_broker
done

python3 - "$points" "$idle" << 'PY'
import json, sys
points = [json.loads(line) for line in open(sys.argv[1])]
print()
print("| scheme | topics | sockets | client KiB grown | KiB per subscription | KiB per added subscription | subscribe s | idle CPU % of a core | msgs/s over the topics |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
previous = {}
for p in points:
    key = p["scheme"] + ("-fan-out" if "nsqd" in p else "")
    if "refused" in p:
        print("| %s | %d | | refused: %s | | | | | |" % (p["scheme"], p["topics"], p["refused"][:90]))
        continue
    grown = p["ready_kib"] - p["base_kib"]
    count = p["nsqd"] if "nsqd" in p else p["topics"]
    marginal = ""
    if key in previous:
        prev_count, prev_grown = previous[key]
        marginal = "%.1f" % ((grown - prev_grown) / (count - prev_count))
    previous[key] = (count, grown)
    label = "nsq+lookupd (%d nsqd)" % p["nsqd"] if "nsqd" in p else p["scheme"]
    rate = "%d" % p["msgs_per_sec"] if p["delivered"] else ""
    print("| %s | %d | %d | %.0f | %.1f | %s | %.3f | %.3f | %s |" % (
        label, p["topics"], p["connections"], grown, p["kib_per_subscription"], marginal,
        p["subscribe_seconds"], p["idle_cpu_percent"], rate))
PY
