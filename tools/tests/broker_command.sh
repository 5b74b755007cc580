#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `polybus broker NAME [--port P] [--tuned-for-tests]` as a user runs it: the URL it prints is plain
# by default, carries the port asked for, and takes a message from `polybus pub` to `polybus sub`;
# --port on a broker with no TCP port, or on a taken port, is refused with a message that says so.
#
#   tools/tests/broker_command.sh POLYBUS_BINARY
set -euo pipefail
polybus=$1
source "$(dirname "$0")/../../tests/support/broker_process.sh"

# Each broker's port is checked by the integration tests; here the command's wiring, on the two
# brokers that keep a message published before the subscription (an nsqd channel, a Figg log).
for name in nsq figg; do
  port=$(free_port)
  start_broker "$name" --port "$port"
  [ "$url" = "$name://127.0.0.1:$port" ] || fail "$name --port $port printed '$url'"
  "$polybus" pub "$url" greetings hello > /dev/null || fail "pub on $url"
  from=()
  [ "$name" = figg ] && from=(--from 0)
  timeout 60 "$polybus" sub "$url" greetings --count 1 "${from[@]}" > "$work/sub.log" \
    2> "$work/sub.err" || fail "sub on $url: $(cat "$work/sub.log" "$work/sub.err")"
  [ "$(cat "$work/sub.log")" = hello ] || fail "sub on $url received: $(cat "$work/sub.log")"
  stop_broker
  echo "$name on port $port: ok"
done

start_broker nsq
[[ "$url" =~ ^nsq://127\.0\.0\.1:[0-9]+$ ]] || fail "nsq without --port printed '$url' (not plain?)"
stop_broker
start_broker nsq --tuned-for-tests
[[ "$url" == *"?"*msg_timeout=* ]] || fail "--tuned-for-tests printed '$url'"
stop_broker
echo "plain and tuned URLs: ok"

status=0
"$polybus" broker mem --port 4000 > /dev/null 2> "$work/err" || status=$?
[ "$status" = 2 ] && grep -q "listens on no TCP port" "$work/err" ||
  fail "mem --port: exit $status, '$(cat "$work/err")'"
mkfifo "$work/taken"
python3 -c 'import socket, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(); print(s.getsockname()[1], flush=True)
time.sleep(120)' > "$work/taken" &
holder=$!
read -r -t 30 taken < "$work/taken" || fail "no port holder"
status=0
"$polybus" broker nsq --port "$taken" > /dev/null 2> "$work/err" || status=$?
kill "$holder" 2> /dev/null || true
[ "$status" = 1 ] && grep -q "cannot start nsq on 127.0.0.1:$taken" "$work/err" ||
  fail "nsq on a taken port: exit $status, '$(cat "$work/err")'"
echo "refusals: ok ($(cat "$work/err"))"
