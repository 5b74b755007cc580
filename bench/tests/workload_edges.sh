#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `polybus bench --workload` at its edges: a workload file that is not one is refused before
# anything connects, naming the file, the field and the value; Ctrl-C ends a run with what it
# measured written and marked incomplete; --report draws each URL's windows; producerRate 0
# finds a rate; a consumer backlog is built and drained.
#
#   bench/tests/workload_edges.sh POLYBUS_BINARY
set -euo pipefail
polybus=$1
work=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2> /dev/null; rm -rf "$work"' EXIT
fail() {
  echo "FAILED: $*"
  exit 1
}
cd "$work"
command -v rsvg-convert > /dev/null ||
  fail "rsvg-convert is missing: Debian's librsvg2-bin has it (.ci/install-deps installs it)"

base='name: edge
topics: 1
messageSize: 100
subscriptionsPerTopic: 1
producersPerTopic: 1
consumerPerSubscription: 1
testDurationMinutes: 1
'
# Nothing listens on port 1: a refusal that named the connection instead of the file would
# show that something connected first.
refused() {  # expected-stderr-text, yaml, extra flags...
  local want=$1 yaml=$2
  shift 2
  printf '%s' "$yaml" > bad.yaml
  local status=0
  "$polybus" bench --workload bad.yaml nsq://127.0.0.1:1 "$@" > out 2> err || status=$?
  [ $status = 2 ] || fail "exit $status (not 2) for: $want; stderr: $(cat err)"
  grep -qF -- "$want" err || fail "stderr lacks '$want': $(cat err)"
  [ -s out ] && fail "printed before refusing: $(cat out)"
  echo "refused: $(head -1 err)"
}
refused "bad.yaml: not YAML" 'topics: [1, 2
'
refused "bad.yaml: partitions (line 9): not a field of an OMB workload" "${base}producerRate: 10
partitions: 3
"
refused "bad.yaml: producerRate (line 8): must not be negative, got '-1'" "${base}producerRate: -1
"
refused "producerRate (line 8): 1000000000000 is out of range" "${base}producerRate: 1000000000000
"
refused "topics (line 2): 1000000000 is out of range" "$(echo "$base" | sed 's/^topics: 1$/topics: 1000000000/')
producerRate: 10
"
refused "bad.yaml: payloadFile: 'payload/missing.data' does not exist" "${base}producerRate: 10
payloadFile: payload/missing.data
"
head -c 5000 /dev/zero > big.data
refused "bad.yaml: payloadFile: 'big.data' is 5000 bytes, larger than --max-payload 4096" \
  "${base}producerRate: 10
payloadFile: big.data
" --max-payload 4096
refused "--duration wants a duration such as 10s" "${base}producerRate: 10
" --duration ten
refused "bad.yaml: consumerBacklogSizeGB: 1 with producerRate 0" "${base}producerRate: 0
consumerBacklogSizeGB: 1
"
refused "bad.yaml: --backlog with producerRate 0" "${base}producerRate: 0
" --backlog 100000

# Ctrl-C: the run stops within a window and writes what it measured, marked incomplete.
printf '%sproducerRate: 2000\n' "$base" > run.yaml
mkfifo progress
"$polybus" bench --workload run.yaml broker:nsq --duration 600s --warmup 0s --window-seconds 1 \
  --result interrupted.json --histogram-log interrupted.hlog > progress 2> err &
pid=$!
exec 3< progress
while read -r -t 60 line <&3; do
  echo "$line" >> out
  case $line in *" test: "*) break ;; esac
done
grep -q " test: " out || fail "no test window within 60 s: $(cat out err)"
kill -INT "$pid"
cat <&3 >> out
status=0
wait "$pid" || status=$?
pid=
[ $status = 1 ] || fail "interrupted run exited $status, not 1: $(cat err)"
grep -q "INCOMPLETE (interrupted after" out || fail "summary not marked: $(cat out)"
python3 - << 'PY' || fail "interrupted result: $(cat interrupted.json)"
import json
r = json.load(open("interrupted.json"))
p = r["polybus"]
assert p["complete"] is False, p
assert p["incompleteBecause"].startswith("interrupted after"), p
assert len(r["publishRate"]) >= 1 and p["published"] > 0, r["publishRate"]
PY
grep -q '^Tag=end-to-end,' interrupted.hlog || fail "no interval in the log"
"$polybus" bench merge interrupted.hlog > /dev/null || fail "the interrupted log does not merge"
echo "Ctrl-C: incomplete result and log written"

# producerRate 0: OMB's rate controller starts at 10,000 msg/s and moves from there, up while
# nothing backs up, down when it does (how far depends on the machine: a sanitizer's build
# cannot keep 10,000).
printf '%sproducerRate: 0\n' "$base" > find.yaml
"$polybus" bench --workload find.yaml mem://find broker:figg --duration 7s --warmup 0s \
  --window-seconds 1 --result found.json --report report.svg > out 2> err ||
  fail "producerRate 0: $(cat err)"
python3 - << 'PY' || fail "the rate controller did not move the rate: $(grep ' test: ' out)"
import json
for path in ("found-1.json", "found-2.json"):
    rates = json.load(open(path))["publishRate"]
    assert any(abs(r - 10000) > 2000 for r in rates), (path, rates)
    print(path, "publish rates per window:", [round(r) for r in rates])
PY
echo "producerRate 0: the rate controller moved the rate from 10,000 msg/s"

# The report: four panels (publish and consume rates, publish and end-to-end p99) per window,
# a line per URL in each, which a real renderer draws.
grep -q "^report: report.svg$" err || fail "no report line: $(cat err)"
[ "$(grep -c 'class="panel"' report.svg)" = 4 ] || fail "not 4 panels"
[ "$(grep -c 'class="series"' report.svg)" = 8 ] || fail "not 8 series (4 panels x 2 URLs)"
for text in 'Publish rate per window' 'Consume rate per window' 'Publish latency p99 per window' \
            'End-to-end latency p99 per window' '>mem://find<' '>broker:figg<'; do
  grep -qF -- "$text" report.svg || fail "report lacks $text"
done
rsvg-convert -o report.png report.svg || fail "rsvg-convert could not render the report"
[ -s report.png ] || fail "empty rendering"
echo "report: rendered"

# A backlog (consumerBacklogSizeGB, here --backlog in bytes): built with the consumers paused,
# then drained once they resume, before the test's seconds; windows of each phase in the result.
printf '%sproducerRate: 5000\n' "$base" > backlog.yaml
"$polybus" bench --workload backlog.yaml mem://backlog broker:nsq --backlog 500000 --duration 2s \
  --warmup 0s --window-seconds 1 --result backlog.json > out 2> err || fail "backlog: $(cat err)"
grep -q "backlog of 5000 messages (500000 bytes) built in .* s, drained in .* s" out ||
  fail "no backlog line: $(cat out)"
python3 - << 'PY' || fail "backlog result: $(cat backlog-1.json backlog-2.json)"
import json
for path in ("backlog-1.json", "backlog-2.json"):
    r = json.load(open(path))
    p = r["polybus"]
    b = p["consumerBacklog"]
    assert b["bytes"] == 500000 and b["messages"] == 5000, b
    assert b["builtSeconds"] >= 0 and b["drainedSeconds"] >= 0, b
    phases = p["windowPhases"]
    assert len(phases) == len(r["backlog"]) == len(r["publishRate"]), (phases, r["backlog"])
    # In order; a drain quicker than a tenth of a window has no window of its own.
    order = {"backlog": 0, "drain": 1, "test": 2}
    assert phases[0] == "backlog" and phases[-1] == "test", phases
    assert [order[x] for x in phases] == sorted(order[x] for x in phases), phases
    # The backlog windows end at 5,000 messages or more; the test's at OMB's drained level
    # (1,000) or less, as the rate is well within what the broker takes.
    built = [v for v, phase in zip(r["backlog"], phases) if phase == "backlog"]
    assert max(built) >= 5000, built
    tested = [v for v, phase in zip(r["backlog"], phases) if phase == "test"]
    assert tested[-1] <= 1000, tested
    assert p["received"] >= p["published"] - 1000, p
    print(path, "backlog per window:", list(zip(phases, r["backlog"])))
PY
echo "backlog: built, drained, then the test"
