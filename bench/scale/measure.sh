#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# How a client's cost grows with the work: for each scheme, one client subscribed to 1, 10, 100,
# 1,000 and 10,000 topics (one subscription each), and for NSQ one topic over 1, 10, 100 and
# 1,000 nsqd found through nsqlookupd. Each point runs `polybus bench scale` against a broker of
# its own, in another process (`polybus broker NAME`), so that only the client is measured.
# Prints each point's JSON line as it comes, then the table docs/performance.md shows.
#
#   bench/scale/measure.sh POLYBUS_BINARY [IDLE_SECONDS (default 20)] [MESSAGES (default 20000)]
#                          [PICTURE.svg (docs/scale.svg draws the table's curves)]
#
# About 15 minutes with the defaults on 2 cores (the 1,000 nsqd take a minute to start). The
# in-process QuickIO server refuses more than 1,024 subscriptions on one connection (420), so its
# 10,000-topic point is reported as refused.
set -euo pipefail
polybus=$1
idle=${2:-20}
messages=${3:-20000}
svg=${4:-}
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
  # The client keeps to max_nsqd_connections (100 by default) of the nsqd a lookupd names.
  "$polybus" bench scale "$url?max_nsqd_connections=$nsqd" --fan-out fan-out \
    --connections "$nsqd" --idle-seconds "$idle" |
    tail -1 | python3 -c 'import json, sys; d = json.loads(sys.stdin.read()); d["nsqd"] = '"$nsqd"'; print(json.dumps(d))' |
    tee -a "$points"
  stop_broker
done

python3 - "$points" "$svg" << 'PY'
import json, math, sys
points = [json.loads(line) for line in open(sys.argv[1])]
print()
print("| scheme | subscriptions | sockets opened | client KiB grown | KiB each | KiB each added | subscribe s | idle CPU % of a core | msgs/s over the topics |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
previous, curves = {}, {}
for p in points:
    fan_out = "nsqd" in p
    label = "nsq+lookupd, %d nsqd" % p["nsqd"] if fan_out else p["scheme"]
    if "refused" in p:
        print("| %s | %d | | refused: %s | | | | | |" % (label, p["topics"], p["refused"].split(": ")[-1]))
        continue
    key = "nsq+lookupd" if fan_out else p["scheme"]
    count = p["nsqd"] if fan_out else p["topics"]  # what grows: connections, or subscriptions
    grown = p["ready_kib"] - p["base_kib"]
    added = ""
    if key in previous:
        prev_count, prev_grown = previous[key]
        added = "%.1f" % ((grown - prev_grown) / (count - prev_count))
    previous[key] = (count, grown)
    curves.setdefault(key, []).append((count, grown, p["subscribe_seconds"]))
    rate = "%d" % p["msgs_per_sec"] if p["delivered"] else ""
    print("| %s | %d | %d | %.0f | %.1f | %s | %.3f | %.3f | %s |" % (
        label, p["topics"], p["connections"], grown, grown / count, added,
        p["subscribe_seconds"], p["idle_cpu_percent"], rate))
print("\nKiB each: per subscription; on nsq+lookupd (one subscription over N nsqd), per connection.")

# The picture: client memory grown and time to subscribe against the count, log-log.
colours = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd"]
width, height, top, plot, gap = 960, 470, 60, 300, 120
svg = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="13">' % (width, height),
       '<rect width="100%" height="100%" fill="white"/>',
       '<text x="480" y="24" text-anchor="middle" font-size="17" font-weight="bold">One client\'s cost against subscriptions (nsq+lookupd: connections)</text>']
panels = [("client memory grown (KiB)", 1, 80), ("time to subscribe to all (s)", 2, 560)]
for title, index, left in panels:
    values = [c[index] for curve in curves.values() for c in curve if c[index] > 0]
    low, high = math.floor(math.log10(min(values))), math.ceil(math.log10(max(values)))
    high = max(high, low + 1)
    x = lambda n: left + 320 * math.log10(n) / 4
    y = lambda v: top + plot - plot * (math.log10(max(v, 10 ** low)) - low) / (high - low)
    svg.append('<g class="panel"><text x="%d" y="%d" text-anchor="middle" font-weight="bold">%s</text>' % (left + 160, top - 12, title))
    for e in range(low, high + 1):
        svg.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/><text x="%d" y="%.1f" text-anchor="end">1e%d</text>' % (left, y(10 ** e), left + 320, y(10 ** e), left - 6, y(10 ** e) + 4, e))
    for e in range(0, 5):
        svg.append('<text x="%.1f" y="%d" text-anchor="middle">%d</text>' % (x(10 ** e), top + plot + 18, 10 ** e))
    svg.append('<text x="%d" y="%d" text-anchor="middle">subscriptions (log scale)</text>' % (left + 160, top + plot + 38))
    for k, (name, curve) in enumerate(curves.items()):
        pts = " ".join("%.1f,%.1f" % (x(c[0]), y(c[index])) for c in curve if c[index] > 0)
        svg.append('<polyline class="curve" fill="none" stroke="%s" stroke-width="2.5" points="%s"><title>%s</title></polyline>' % (colours[k % 5], pts, name))
    svg.append('</g>')
for k, name in enumerate(curves):
    svg.append('<rect x="%d" y="%d" width="14" height="14" fill="%s"/><text x="%d" y="%d">%s</text>' % (80 + 170 * k, height - 40, colours[k % 5], 100 + 170 * k, height - 28, name))
svg.append('</svg>')
if sys.argv[2]:
    open(sys.argv[2], "w").write("\n".join(svg) + "\n")
    print("picture: " + sys.argv[2])
PY
