#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `polybus broker figg-server` and `polybus broker memodb-broker` under the real servers' command
# lines: started by a script through shims named like the servers, they carry a round trip; what
# they do not implement is refused with exit 2.
#
#   tools/tests/server_shims.sh POLYBUS_BINARY
set -euo pipefail
polybus=$(realpath "$1")
source "$(dirname "$0")/../../tests/support/broker_process.sh"
for server in figg-server memodb-broker; do
  printf '#!/bin/sh\nexec "%s" broker %s "$@"\n' "$polybus" "$server" > "$work/$server"
  chmod +x "$work/$server"
done
pids=()
trap 'for pid in "${pids[@]}"; do kill "$pid" 2> /dev/null || true; done; rm -rf "$work"' EXIT

figg_port=$(free_port)
PATH="$work:$PATH" figg-server -a "127.0.0.1:$figg_port" --commitlog.inmemory -v 2> "$work/figg.log" &
pids+=($!)
memodb_port=$(free_port)
PATH="$work:$PATH" memodb-broker "tcp://127.0.0.1:$memodb_port" 2> "$work/memodb.log" &
pids+=($!)
for _ in $(seq 300); do
  grep -q listening "$work/figg.log" && grep -q listening "$work/memodb.log" && break
  sleep 0.1
done
grep -q listening "$work/figg.log" || fail "figg-server: $(cat "$work/figg.log")"
grep -q listening "$work/memodb.log" || fail "memodb-broker: $(cat "$work/memodb.log")"

# Figg: what is published before a subscriber attaches from the start is still delivered.
timeout 30 "$polybus" pub "figg://127.0.0.1:$figg_port" shim-topic "through the shim" ||
  fail "figg publish"
got=$(timeout 30 "$polybus" sub "figg://127.0.0.1:$figg_port" shim-topic --from 0 --count 1 2> /dev/null) ||
  fail "figg subscribe"
[ "$got" = "through the shim" ] || fail "figg got '$got'"

# MemoDB: a request answered by a worker on the shim broker.
timeout 30 "$polybus" serve "memodb+tcp://127.0.0.1:$memodb_port" shim-service > /dev/null 2>&1 &
pids+=($!)
reply=$(timeout 30 "$polybus" request "memodb+tcp://127.0.0.1:$memodb_port" shim-service ping) ||
  fail "memodb request"
[ "$reply" = ping ] || fail "memodb reply '$reply'"

set +e
"$polybus" broker figg-server --admin-addr=127.0.0.1:1 > /dev/null 2> "$work/err"
status=$?
set -e
[ "$status" = 2 ] && grep -q "admin-addr is not supported" "$work/err" ||
  fail "figg-server --admin-addr: exit $status, $(cat "$work/err")"
set +e
"$polybus" broker memodb-broker --stats tcp://127.0.0.1:1 > /dev/null 2> "$work/err"
status=$?
set -e
[ "$status" = 2 ] || fail "memodb-broker --stats: exit $status"
echo "ok: figg-server and memodb-broker shims"
