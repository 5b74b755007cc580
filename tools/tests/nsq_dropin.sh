#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The drop-in shims: `nsqd` and `nsqlookupd` as two-line scripts that run `polybus broker nsqd`
# and `polybus broker nsqlookupd`, first on PATH, under nsq_servers_script.sh (written for the
# real servers); then what the real command lines refuse and report.
#
#   tools/tests/nsq_dropin.sh POLYBUS_BINARY
set -euo pipefail
polybus=$(realpath "$1")
here=$(cd "$(dirname "$0")" && pwd)
shims=$(mktemp -d)
# A server left running on a failure would hold the test's output open.
trap 'kill $(jobs -p) 2> /dev/null || true; rm -rf "$shims"' EXIT
for server in nsqd nsqlookupd; do
  printf '#!/bin/sh\nexec "%s" broker %s "$@"\n' "$polybus" "$server" > "$shims/$server"
  chmod +x "$shims/$server"
done
PATH="$shims:$PATH" "$here/nsq_servers_script.sh" "$polybus"

# A flag the in-process server does not implement: exit 2, naming it and why.
set +e
"$polybus" broker nsqd --statsd-address=127.0.0.1:8125 > /dev/null 2> "$shims/err"
status=$?
set -e
[ "$status" = 2 ] || { echo "FAILED: --statsd-address exited $status"; exit 1; }
grep -q -- "-statsd-address is not supported" "$shims/err" ||
  { echo "FAILED: $(cat "$shims/err")"; exit 1; }
set +e
"$polybus" broker nsqlookupd --no-such-flag > /dev/null 2> "$shims/err"
status=$?
set -e
[ "$status" = 2 ] && grep -q "flag provided but not defined: -no-such-flag" "$shims/err" ||
  { echo "FAILED: an unknown flag: exit $status, $(cat "$shims/err")"; exit 1; }
"$polybus" broker nsqd --version | grep -q "^nsqd v1.3.0" || { echo "FAILED: --version"; exit 1; }
# nsqd's --config TOML file, the command line over it (nsqd's go-options order).
port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
tcp_port=$(port)
http_port=$(port)
cat > "$shims/nsqd.cfg" << CONFIG
# as an nsqd.cfg is written
tcp_address = "127.0.0.1:$tcp_port"
http_address = "127.0.0.1:$http_port"
msg_timeout = "10s"
max_req_timeout = 120000
nsqlookupd_tcp_addresses = [
  "127.0.0.1:1",
]
CONFIG
"$polybus" broker nsqd --config "$shims/nsqd.cfg" --lookupd-tcp-address=127.0.0.1:2 \
  2> "$shims/config.log" &
config_pid=$!
for _ in $(seq 300); do
  curl -sf "http://127.0.0.1:$http_port/ping" > /dev/null && break
  sleep 0.1
done
config() { curl -sf "http://127.0.0.1:$http_port/config/$1"; }
[ "$(config msg_timeout)" = 10000000000 ] || { echo "FAILED: msg_timeout $(config msg_timeout)"; exit 1; }
[ "$(config max_req_timeout)" = 120000000000 ] || { echo "FAILED: an integer duration is ms"; exit 1; }
[ "$(config nsqlookupd_tcp_addresses)" = '["127.0.0.1:2"]' ] ||
  { echo "FAILED: the command line over the file: $(config nsqlookupd_tcp_addresses)"; exit 1; }
kill "$config_pid"
wait "$config_pid" || true

# Past --mem-queue-size messages wait in disk queue files under --data-path (backend_depth),
# gone on exit; --journal (not nsqd's) writes each command and frame as a JSON line.
tcp_port=$(port)
http_port=$(port)
mkdir "$shims/data"
"$polybus" broker nsqd --tcp-address="127.0.0.1:$tcp_port" --http-address="127.0.0.1:$http_port" \
  --mem-queue-size=2 --data-path="$shims/data" --journal="$shims/journal.jsonl" \
  2> "$shims/disk.log" &
disk_pid=$!
for _ in $(seq 300); do
  curl -sf "http://127.0.0.1:$http_port/ping" > /dev/null && break
  sleep 0.1
done
"$polybus" pub "nsq://127.0.0.1:$tcp_port" journaled one two three four five > /dev/null
stats=$(curl -sf "http://127.0.0.1:$http_port/stats?format=json&topic=journaled")
echo "$stats" | grep -q '"depth":5,"backend_depth":3' ||
  { echo "FAILED: disk queue: $stats"; exit 1; }
ls "$shims"/data/polybus-nsqd-*/journaled.diskqueue.000000.dat > /dev/null ||
  { echo "FAILED: no disk queue file under --data-path"; exit 1; }
# PUB, or MPUB when the client gathers them: five messages either way.
published=$(python3 -c '
import json, sys
entries = [json.loads(line) for line in open(sys.argv[1])]
print(sum(e.get("count", 0) for e in entries
          if e["direction"] == "in" and e["kind"] in ("PUB", "MPUB") and e.get("topic") == "journaled"))
' "$shims/journal.jsonl")
[ "$published" = 5 ] || { echo "FAILED: journal: $(cat "$shims/journal.jsonl")"; exit 1; }
grep -q '"direction":"out","kind":"response","text":"OK"' "$shims/journal.jsonl" ||
  { echo "FAILED: journal: no OK sent"; exit 1; }
kill "$disk_pid"
wait "$disk_pid" || true
[ -z "$(ls -A "$shims/data")" ] || { echo "FAILED: disk queues left behind: $(ls -R "$shims/data")"; exit 1; }

# Not nsqd's: --fault rules (polybus/fault_rules.hpp); a rule that does not parse is a usage error.
set +e
"$polybus" broker nsqd --fault='unit=FIN,nth=0,close' > /dev/null 2> "$shims/err"
status=$?
set -e
[ "$status" = 2 ] && grep -q "fault rule: nth and first count from 1" "$shims/err" ||
  { echo "FAILED: a bad --fault: exit $status, $(cat "$shims/err")"; exit 1; }
tcp_port=$(port)
http_port=$(port)
"$polybus" broker nsqd --tcp-address="127.0.0.1:$tcp_port" --http-address="127.0.0.1:$http_port" \
  --fault='unit=PUB,once,error=E_PUB_FAILED PUB failed' \
  --fault='unit=MPUB,once,error=E_MPUB_FAILED MPUB failed' 2> "$shims/faults.log" &
faults_pid=$!
for _ in $(seq 300); do
  curl -sf "http://127.0.0.1:$http_port/ping" > /dev/null && break
  sleep 0.1
done
set +e
"$polybus" pub "nsq://127.0.0.1:$tcp_port" faulted one > /dev/null 2> "$shims/err"
status=$?
set -e
[ "$status" = 1 ] && grep -q "E_PUB_FAILED PUB failed" "$shims/err" ||
  { echo "FAILED: --fault: exit $status, $(cat "$shims/err")"; exit 1; }
"$polybus" pub "nsq://127.0.0.1:$tcp_port" faulted two > /dev/null  # once: the next goes through
kill "$faults_pid"
wait "$faults_pid" || true
echo "ok: shims, refused flags, config file, disk queues, journal, faults"
