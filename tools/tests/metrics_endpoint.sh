#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `--metrics HOST:PORT` on `polybus sub`, `serve`, `bench` and `broker`: the endpoint answers
# GET /metrics in the text format that Prometheus's own `promtool check metrics` accepts, with
# values that match the traffic sent to the command; other paths and methods are refused; a flood
# of connections is capped.
#
#   tools/tests/metrics_endpoint.sh POLYBUS_BINARY
set -euo pipefail
polybus=$1
source "$(dirname "$0")/../../tests/support/broker_process.sh"
command -v promtool > /dev/null ||
  fail "promtool is missing: Debian's prometheus package has it (.ci/install-deps installs it)"

# GET (or another METHOD) http://ADDRESS/PATH: the status on the first line, then the body.
http() {
  python3 - "$@" << 'PY'
import sys, http.client
address, path = sys.argv[1], sys.argv[2]
method = sys.argv[3] if len(sys.argv) > 3 else "GET"
host, port = address.rsplit(":", 1)
c = http.client.HTTPConnection(host, int(port), timeout=10)
c.request(method, path)
r = c.getresponse()
print(r.status)
if path == "/metrics" and r.status == 200:
    assert r.getheader("Content-Type").startswith("text/plain; version=0.0.4"), r.getheader("Content-Type")
sys.stdout.write(r.read().decode())
PY
}
# The value of the one sample whose name and labels start with PREFIX, in a scrape FILE.
value() {
  local found
  found=$(grep -F -- "$2" "$1" | grep -v '^#' || true)
  [ "$(printf '%s\n' "$found" | grep -c .)" = 1 ] || fail "not one sample '$2' in: $(cat "$1")"
  printf '%s\n' "${found##* }"
}
# Scrapes ADDRESS into FILE until the sample PREFIX has VALUE (bounded: 30 s).
scrape_until() {
  local address=$1 file=$2 prefix=$3 want=$4
  for _ in $(seq 600); do
    http "$address" /metrics | tail -n +2 > "$file"
    [ "$(grep -F -- "$prefix" "$file" | grep -v '^#' | awk '{print $NF}')" = "$want" ] && return 0
    sleep 0.05
  done
  fail "$prefix never reached $want: $(grep -F -- "$prefix" "$file")"
}
# Starts `polybus COMMAND ARGS...` in the background with --metrics 127.0.0.1:0; sets
# command_pid, and address from the line it prints; the command's later stderr lines stay on fd 4.
start_with_metrics() {
  mkfifo "$work/err4"
  "$polybus" "$@" --metrics 127.0.0.1:0 > "$work/stdout" 2> "$work/err4" &
  command_pid=$!
  exec 4< "$work/err4"
  rm "$work/err4"
  local line
  read -r -t 30 line <&4 || fail "$1 printed no metrics address"
  [[ "$line" =~ ^metrics:\ http://(127\.0\.0\.1:[0-9]+)/metrics$ ]] || fail "$1 printed '$line'"
  address=${BASH_REMATCH[1]}
}
stop_command() {
  kill -TERM "$command_pid"
  wait "$command_pid" || fail "the command did not exit cleanly on SIGTERM"
  exec 4<&-
}

# sub: 25 messages of 64 bytes through an in-process nsqd.
start_broker nsq
start_with_metrics sub "$url" orders --group billing
read -r -t 30 line <&4 || fail "sub never subscribed"
[[ "$line" == *"subscribed to 'orders'"* ]] || fail "sub said '$line'"
"$polybus" pub "$url" orders --count 25 --size 64 > /dev/null
labels='{client="1",scheme="nsq",topic="orders",group="billing",kind="subscribe"}'
scrape_until "$address" "$work/sub.prom" "polybus_acked_messages_total$labels" 25
promtool check metrics < "$work/sub.prom" || fail "promtool refused the scrape: $(cat "$work/sub.prom")"
[ "$(value "$work/sub.prom" "polybus_received_messages_total$labels")" = 25 ] || fail "received"
[ "$(value "$work/sub.prom" "polybus_nacked_messages_total$labels")" = 0 ] || fail "nacked"
[ "$(value "$work/sub.prom" "polybus_in_flight_messages$labels")" = 0 ] || fail "in flight"
[ "$(value "$work/sub.prom" "polybus_handler_seconds_count$labels")" = 25 ] || fail "handler count"
[ "$(value "$work/sub.prom" "polybus_handler_seconds_bucket${labels%\}},le=\"+Inf\"}")" = 25 ] ||
  fail "handler +Inf bucket"
[ "$(value "$work/sub.prom" 'polybus_connected_endpoints{client="1",scheme="nsq"}')" = 1 ] ||
  fail "connected endpoints"
bytes_in=$(value "$work/sub.prom" 'polybus_received_bytes_total{client="1",scheme="nsq"}')
[ "$bytes_in" -gt $((25 * 64)) ] || fail "bytes in: $bytes_in"
[ "$(wc -l < "$work/stdout")" = 25 ] || fail "sub printed $(wc -l < "$work/stdout") lines"
[ "$(http "$address" /other | head -1)" = 404 ] || fail "/other was not 404"
[ "$(http "$address" /metrics POST | head -1)" = 405 ] || fail "POST was not 405"
# A flood of connections: 32 are served at once (each waiting for its request), the rest closed
# on arrival; the 32 then get their scrape, and the endpoint serves the next one as before.
python3 - "$address" << 'PY' || fail "the endpoint's connection cap"
import select, socket, sys, time
host, port = sys.argv[1].rsplit(":", 1)
conns = [socket.create_connection((host, int(port)), timeout=10) for _ in range(40)]
closed, deadline = set(), time.monotonic() + 20  # a bound only a failure reaches
while len(closed) < 8 and time.monotonic() < deadline:
    readable, _, _ = select.select([c for c in conns if c not in closed], [], [], 0.5)
    for c in readable:
        if c.recv(1) == b"":
            closed.add(c)
assert len(closed) == 8, "%d of 40 connections closed on arrival, not 8" % len(closed)
for c in conns:
    if c not in closed:
        c.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
for c in conns:
    if c not in closed:
        head = c.recv(12)
        assert head == b"HTTP/1.1 200", head
        c.close()
PY
[ "$(http "$address" /metrics | sed -n 1p)" = 200 ] || fail "no scrape after the flood"
stop_command
stop_broker
echo "sub --metrics: ok (promtool: valid; 25 received, acked and timed; $bytes_in bytes in; 32 of 40 at once)"

# serve: 3 requests through an in-process MemoDB broker.
start_broker memodb+tcp
start_with_metrics serve "$url" jobs
read -r -t 30 line <&4 || fail "serve never registered"
for i in 1 2 3; do
  [ "$("$polybus" request "$url" jobs "job $i")" = "job $i" ] || fail "request $i"
done
labels='{client="1",scheme="memodb+tcp",topic="jobs",group="",kind="serve"}'
scrape_until "$address" "$work/serve.prom" "polybus_replied_messages_total$labels" 3
promtool check metrics < "$work/serve.prom" || fail "promtool refused: $(cat "$work/serve.prom")"
[ "$(value "$work/serve.prom" "polybus_received_messages_total$labels")" = 3 ] || fail "received"
[ "$(value "$work/serve.prom" "polybus_in_flight_messages$labels")" = 0 ] || fail "in flight"
stop_command
stop_broker
echo "serve --metrics: ok (3 requests received and replied)"

# bench: the endpoint is up for the run, and the run is unchanged by it.
start_broker nsq
"$polybus" bench "$url" --messages 2000 --metrics 127.0.0.1:0 > "$work/bench.out" 2> "$work/bench.err" ||
  fail "bench --metrics: $(cat "$work/bench.err")"
grep -q '^metrics: http://127.0.0.1:[0-9]*/metrics$' "$work/bench.err" || fail "bench: $(cat "$work/bench.err")"
grep -q '"delivered":2000' "$work/bench.out" || fail "bench: $(tail -1 "$work/bench.out")"
stop_broker
# broker: an in-process nsqd counts what it carried: 25 published before any channel (held by
# the topic), then taken and acked by a consumer group that reads 25 and leaves.
start_broker nsq --metrics 127.0.0.1:0
address=$(sed -n 's|^metrics: http://\(127\.0\.0\.1:[0-9]*\)/metrics$|\1|p' "$work/err")
[ -n "$address" ] || fail "broker --metrics printed no address: $(cat "$work/err")"
"$polybus" pub "$url" orders --count 25 --size 64 > /dev/null
topic='{broker="nsq",scheme="nsq",topic="orders"}'
scrape_until "$address" "$work/broker.prom" "polybus_broker_stored_messages$topic" 25
"$polybus" sub "$url" orders --group billing --count 25 > /dev/null 2>&1 || fail "sub --count 25"
group='{broker="nsq",scheme="nsq",topic="orders",group="billing"}'
scrape_until "$address" "$work/broker.prom" "polybus_broker_acked_messages_total$group" 25
scrape_until "$address" "$work/broker.prom" "polybus_broker_consumers$group" 0
promtool check metrics < "$work/broker.prom" || fail "promtool refused: $(cat "$work/broker.prom")"
[ "$(value "$work/broker.prom" 'polybus_broker_up{broker="nsq",scheme="nsq"}')" = 1 ] || fail "up"
[ "$(value "$work/broker.prom" "polybus_broker_published_messages_total$topic")" = 25 ] ||
  fail "published"
[ "$(value "$work/broker.prom" "polybus_broker_stored_messages$topic")" = 0 ] || fail "stored"
[ "$(value "$work/broker.prom" "polybus_broker_delivered_messages_total$group")" = 25 ] ||
  fail "delivered"
[ "$(value "$work/broker.prom" "polybus_broker_queued_messages$group")" = 0 ] || fail "queued"
[ "$(value "$work/broker.prom" "polybus_broker_in_flight_messages$group")" = 0 ] || fail "in flight"
accepted=$(value "$work/broker.prom" 'polybus_broker_connections_accepted_total{broker="nsq",scheme="nsq"}')
[ "$accepted" -ge 2 ] || fail "connections accepted: $accepted"
bytes_in=$(value "$work/broker.prom" 'polybus_broker_received_bytes_total{broker="nsq",scheme="nsq"}')
[ "$bytes_in" -gt $((25 * 64)) ] || fail "broker bytes in: $bytes_in"
stop_broker
echo "broker --metrics: ok (promtool: valid; 25 published, held, delivered and acked; $bytes_in bytes in)"

status=0
"$polybus" sub mem://x t --metrics nowhere > /dev/null 2> "$work/err" || status=$?
[ "$status" = 2 ] && grep -q "HOST:PORT" "$work/err" || fail "--metrics nowhere: $status $(cat "$work/err")"
echo "bench --metrics and a bad address: ok"
