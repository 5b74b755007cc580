#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `polybus proxy LISTEN UPSTREAM` as a test in another language uses it: in front of an in-process
# nsqd, messages go through; commands on stdin change the faults while it runs and answer on
# stdout; `polybus bench` through it shows the latency asked for (a lower bound: publish to
# delivery crosses the proxy once each way); bad arguments are refused with exit status 2.
#
#   tools/tests/proxy_command.sh POLYBUS_BINARY
set -euo pipefail
polybus=$1
source "$(dirname "$0")/../../tests/support/broker_process.sh"
proxy_pid=
stop_proxy() {
  [ -n "$proxy_pid" ] && kill "$proxy_pid" 2> /dev/null && wait "$proxy_pid" 2> /dev/null
  proxy_pid=
}
trap 'stop_proxy; cleanup' EXIT

field() {
  python3 -c 'import json, sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"
}

start_broker nsq
upstream=${url#nsq://}

# The proxy reads commands from a pipe this script writes (fd 4) and answers on another (fd 5).
mkfifo "$work/in" "$work/out"
"$polybus" proxy 0 "$upstream" < "$work/in" > "$work/out" 2> "$work/proxy.err" &
proxy_pid=$!
exec 4> "$work/in" 5< "$work/out"
read -r -t 30 address <&5 || fail "the proxy printed no address: $(cat "$work/proxy.err")"
[[ "$address" =~ ^127\.0\.0\.1:[0-9]+$ ]] || fail "the proxy printed '$address'"
command() {  # sends a line, prints the answer
  echo "$1" >&4
  local answer
  read -r -t 30 answer <&5 || fail "no answer to '$1'"
  echo "$answer"
}
proxied="nsq://$address"

"$polybus" pub "$proxied" through hello > /dev/null || fail "pub through the proxy"
got=$(timeout 60 "$polybus" sub "$proxied" through --group g --count 1 2> "$work/sub.err") ||
  fail "sub through the proxy: $(cat "$work/sub.err")"
[ "$got" = hello ] || fail "sub through the proxy received '$got'"
counters=$(command counters)
python3 -c 'import json, sys; c = json.loads(sys.argv[1]); assert c["accepted"] >= 2 and c["up"]["forwarded"] > 0 and c["down"]["forwarded"] > 0, c' "$counters" ||
  fail "counters after traffic: $counters"
echo "traffic through the proxy: ok"

[ "$(command 'set both latency 100 jitter 0')" = ok ] || fail "set refused"
# Paced, so that no message waits behind another (for NSQ's RDY credit, say): the latency is
# the proxy's and the broker's alone.
line=$("$polybus" bench "$proxied" --topic slow --messages 40 --rate 20 --timeout 60 2> "$work/bench.err" |
  tail -n 1) || fail "bench through the proxy: $(cat "$work/bench.err")"
p50=$(field "$line" p50_us)
python3 -c 'import sys; assert 200000 <= float(sys.argv[1]) < 1000000, sys.argv[1]' "$p50" ||
  fail "p50 through 100 ms each way is ${p50} us: $line"
echo "bench p50 through 100 ms each way: ${p50} us"
[ "$(command 'clear')" = ok ] || fail "clear refused"

answer=$(command 'set sideways latency 5')
[[ "$answer" == error:* ]] || fail "a bad direction was answered '$answer'"
answer=$(command 'set latency')
[[ "$answer" == error:* ]] || fail "a key without a value was answered '$answer'"
answer=$(command 'fly')
[[ "$answer" == error:* ]] || fail "an unknown command was answered '$answer'"
[ "$(command 'reset')" = ok ] || fail "reset refused"
[ "$(command 'refuse 0')" = ok ] || fail "refuse refused"
[ "$(command 'quit')" = ok ] || fail "quit refused"
wait "$proxy_pid" || fail "the proxy did not exit cleanly on quit"
proxy_pid=
exec 4>&- 5<&-
echo "commands: ok"

set +e
"$polybus" proxy 0 nowhere > /dev/null 2> "$work/usage.err"
status=$?
set -e
[ "$status" = 2 ] || fail "UPSTREAM without a port exited $status"
grep -q "HOST:PORT" "$work/usage.err" || fail "the usage error says: $(cat "$work/usage.err")"
set +e
"$polybus" proxy 0.0.0.0:0 "$upstream" > /dev/null 2> "$work/usage.err"
status=$?
set -e
[ "$status" = 2 ] || fail "a non-loopback LISTEN without --allow-remote exited $status"
echo "usage errors: ok"
