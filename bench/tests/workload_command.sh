#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `polybus bench --workload` as a user runs it with OMB's own workload files: each in-process
# broker runs the workload for --duration 5s --warmup 1s (POLYBUS_WORKLOAD_DURATION and
# POLYBUS_WORKLOAD_WARMUP set others, as docs/performance.md does), and the result JSON has every field of
# OMB's TestResult with its type; what does not map is said on the first line and in the result;
# the histogram log's percentiles are those `polybus bench merge` gives.
#
#   bench/tests/workload_command.sh POLYBUS_BINARY WORKLOAD BROKER...
#   WORKLOAD: 1-topic (OMB's workloads/1-topic-1-partition-1kb.yaml) or 100-topics
#   (workloads/100-topics-1-partitions-1kb.yaml), written here with OMB's fields and values.
set -euo pipefail
polybus=$1
workload=$2
duration=${POLYBUS_WORKLOAD_DURATION:-5s}
warmup=${POLYBUS_WORKLOAD_WARMUP:-1s}
shift 2
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() {
  echo "FAILED: $*"
  exit 1
}
cd "$work"
# OMB runs from its repository's root, where payload/ is: the payload file is found from the
# working directory. OMB's payload-1Kb.data is 1024 bytes; printable here, so QuickIO's text
# payloads carry it.
mkdir payload
python3 -c 'import sys; sys.stdout.write("".join(chr(97 + i % 26) for i in range(1024)))' \
  > payload/payload-1Kb.data
case $workload in
  1-topic)
    cat > workload.yaml << 'YAML'
name: 1 topic / 1 partition / 1Kb

topics: 1
partitionsPerTopic: 1
keyDistributor: "NO_KEY"
messageSize: 1024
payloadFile: "payload/payload-1Kb.data"
subscriptionsPerTopic: 1
consumerPerSubscription: 1
producersPerTopic: 1
producerRate: 50000
consumerBacklogSizeGB: 0
testDurationMinutes: 15
YAML
    ;;
  100-topics)
    cat > workload.yaml << 'YAML'
name: 1 producer / 3 consumers on 100 topics

topics: 100
partitionsPerTopic: 1
messageSize: 1024
payloadFile: "payload/payload-1Kb.data"
subscriptionsPerTopic: 3
consumerPerSubscription: 1
producersPerTopic: 1
producerRate: 150000
consumerBacklogSizeGB: 0
testDurationMinutes: 240
YAML
    ;;
  *) fail "unknown workload $workload" ;;
esac

urls=()
for broker in "$@"; do urls+=("broker:$broker"); done
status=0
"$polybus" bench --workload workload.yaml "${urls[@]}" --duration "$duration" --warmup "$warmup" \
  --result result.json --histogram-log latency.hlog > out 2> err || status=$?
# A run may count failed publishes (an overloaded in-process broker refuses some): exit 1, with
# results. Anything else is a failure of the command.
[ $status -le 1 ] || fail "exit $status: $(cat err)"
head -1 out | grep -q "^workload \"$(sed -n 's/^name: //p' workload.yaml)\" (workload.yaml) | " ||
  fail "first line: $(head -1 out)"
echo "first line: $(head -1 out)"
count=$#
python3 "$here/check_omb_result.py" "$count" "$@" || fail "result JSON (output: $(tail -20 out))"

# The histogram logs: what polybus bench merge reads of each, and (when HdrHistogram's Python
# library is installed, tests/harness/setup-peers.sh) what it reads: the same percentiles.
logs=()
for ((i = 1; i <= count; i++)); do
  log=latency.hlog
  [ "$count" -gt 1 ] && log=latency-$i.hlog
  [ -s "$log" ] || fail "no $log"
  logs+=("$log")
done
"$polybus" bench merge "${logs[@]}" > merged || fail "merge: $(cat merged)"
grep '^{"tag":' merged | python3 -c '
import json, sys
for line in sys.stdin:
    d = json.loads(line)
    d.pop("mean")
    print(json.dumps(d, separators=(",", ":"), sort_keys=True))' > polybus.percentiles
[ "$(wc -l < polybus.percentiles)" = 3 ] || fail "merge gave not 3 tags: $(cat merged)"
reader=${POLYBUS_NSQ_PEERS_DIR:-}/hdrh-read
if [ -x "$reader" ]; then
  "$reader" "${logs[@]}" | python3 -c '
import json, sys
for line in sys.stdin:
    print(json.dumps(json.loads(line), separators=(",", ":"), sort_keys=True))' > python.percentiles
  diff polybus.percentiles python.percentiles ||
    fail "HdrHistogram's Python library reads other percentiles than polybus bench merge"
  echo "histogram logs: HdrHistogram's Python library reads the same percentiles"
elif [ "${CI:-}" = true ]; then
  fail "no $reader in CI (tests/harness/setup-peers.sh installs it)"
else
  echo "histogram logs: merged; HdrHistogram's Python library not installed, not compared"
fi
cat polybus.percentiles
