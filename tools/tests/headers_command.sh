#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Headers and dead letters from the command line, against `polybus broker nsq`:
# `pub --header` sends headers in the CloudEvents envelope and `sub --headers` prints them as one
# JSON object before each payload; --header without envelope=cloudevents is refused; a message
# redelivered past `sub --dead-letter ... --max-attempts` lands on the dead-letter topic.
#
#   tools/tests/headers_command.sh POLYBUS_BINARY
set -euo pipefail
polybus=$1
source "$(dirname "$0")/../../tests/support/broker_process.sh"

start_broker nsq
ce="$url?envelope=cloudevents"
traceparent=00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01

# A channel first (nsqd hands a topic's queued messages to its first channel), then the publish.
"$polybus" pub "$ce" greetings hello --header correlationid=c-1 --header "traceparent=$traceparent" \
  > /dev/null || fail "pub --header"
timeout 60 "$polybus" sub "$ce" greetings --count 1 --headers > "$work/sub.log" 2> "$work/sub.err" ||
  fail "sub --headers: $(cat "$work/sub.log" "$work/sub.err")"
[ "$(wc -l < "$work/sub.log")" = 2 ] || fail "sub --headers printed: $(cat "$work/sub.log")"
headers=$(head -1 "$work/sub.log")
python3 - "$headers" "$traceparent" << 'PY' || fail "headers line: $headers"
import json, sys
h = json.loads(sys.argv[1])
assert h["correlationid"] == "c-1", h
assert h["traceparent"] == sys.argv[2], h
assert h["specversion"] == "1.0" and h["source"] == "/polybus" and h["id"], h
PY
[ "$(sed -n 2p "$work/sub.log")" = hello ] || fail "payload line: $(sed -n 2p "$work/sub.log")"
echo "pub --header, sub --headers: ok ($headers)"

status=0
"$polybus" pub "$url" greetings hello --header correlationid=c-2 > /dev/null 2> "$work/err" ||
  status=$?
[ "$status" = 2 ] && grep -q "needs envelope=cloudevents" "$work/err" ||
  fail "--header without the envelope: exit $status, '$(cat "$work/err")'"
echo "--header without the envelope: refused ($(cat "$work/err"))"

# Two messages; a first reader of channel "workers" takes one and gives the other back (nack),
# so nsqd hands it over again with attempts 2: over --max-attempts 1 for the next reader.
"$polybus" pub "$ce" orders first second > /dev/null || fail "pub orders"
timeout 60 "$polybus" sub "$ce" orders --group workers --count 1 > "$work/first.log" 2>&1 ||
  fail "the first reader (exit $?): $(cat "$work/first.log")"
timeout 60 "$polybus" sub "$ce" orders-dead --count 1 --headers > "$work/dead.log" \
  2> "$work/dead.err" &
dead_reader=$!
timeout 60 "$polybus" sub "$ce" orders --group workers --dead-letter orders-dead \
  --max-attempts 1 > "$work/dl.log" 2> "$work/dl.err" &
dead_letterer=$!
wait "$dead_reader" ||
  fail "no dead letter arrived (exit $?): $(cat "$work/dead.err" "$work/dl.err")"
kill "$dead_letterer" 2> /dev/null || true
wait "$dead_letterer" 2> /dev/null || true
python3 - "$(head -1 "$work/dead.log")" << 'PY' || fail "dead letter: $(cat "$work/dead.log")"
import json, sys
h = json.loads(sys.argv[1])
assert h["deadlettertopic"] == "orders", h
# 2, or more where the first reader's close let nsqd hand it over again (seen under TSan: 3).
assert int(h["deadletterattempts"]) >= 2, h
assert "times, more than max_attempts=1" in h["deadletterreason"], h
PY
payload=$(sed -n 2p "$work/dead.log")
[ "$payload" = first ] || [ "$payload" = second ] || fail "dead letter payload: $payload"
[ -s "$work/dl.log" ] && fail "the dead-lettering reader handled a message: $(cat "$work/dl.log")"
echo "sub --dead-letter: ok ($(head -1 "$work/dead.log"))"
stop_broker
