#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A script written for the real nsqd and nsqlookupd 1.3, as a project's own integration test
# would start them: by name from PATH, on their default ports, with TLS (a client certificate
# required and verified) and nsqlookupd registration, publishing with curl over nsqd's HTTP API,
# asserting depths in /stats?format=json, and consuming over TLS with a client certificate found
# through nsqlookupd. nsq_dropin.sh runs it against `polybus broker nsqd|nsqlookupd` shims; run it
# with the real binaries first on PATH and it passes the same way.
#
#   tools/tests/nsq_servers_script.sh POLYBUS_BINARY   (the TLS consumer: polybus sub)
set -euo pipefail
polybus=$(realpath "$1")
work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2> /dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2> /dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "FAILED: $*"
  for log in "$work"/*.log; do [ -f "$log" ] && { echo "--- $log"; cat "$log"; }; done
  exit 1
}

# A CA, a server certificate for 127.0.0.1 and a client certificate, as any TLS test makes them.
cd "$work"
openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj /CN=test-ca \
  2> /dev/null
openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj /CN=127.0.0.1 \
  2> /dev/null
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' > server.ext
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem \
  -days 2 -extfile server.ext 2> /dev/null
openssl req -newkey rsa:2048 -nodes -keyout client.key -out client.csr -subj /CN=client \
  2> /dev/null
openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out client.pem \
  -days 2 2> /dev/null

nsqlookupd > lookupd.log 2>&1 &
pids+=($!)
mkdir data
nsqd --data-path=data --broadcast-address=127.0.0.1 --lookupd-tcp-address=127.0.0.1:4160 \
  --tls-cert=server.pem --tls-key=server.key --tls-root-ca-file=ca.pem \
  --tls-client-auth-policy=require-verify --tls-required=tcp-https --log-level=warn \
  > nsqd.log 2>&1 &
pids+=($!)

# Both up (bounded: 30 s).
for _ in $(seq 300); do
  curl -sf http://127.0.0.1:4151/ping > /dev/null && curl -sf http://127.0.0.1:4161/ping > /dev/null &&
    break
  sleep 0.1
done
curl -sf http://127.0.0.1:4151/ping > /dev/null || fail "nsqd did not answer /ping"

printf 'first' > msg
curl -sf -d @msg 'http://127.0.0.1:4151/pub?topic=orders' | grep -qx OK || fail "/pub"
printf 'second\nthird\n' | curl -sf --data-binary @- 'http://127.0.0.1:4151/mpub?topic=orders' |
  grep -qx OK || fail "/mpub"
curl -sf -X POST 'http://127.0.0.1:4151/channel/create?topic=orders&channel=billing' > /dev/null ||
  fail "/channel/create"
depth=$(curl -sf 'http://127.0.0.1:4151/stats?format=json&topic=orders' | python3 -c '
import json, sys
stats = json.load(sys.stdin)
topic = stats["topics"][0]
print(topic["message_count"], sum(c["depth"] for c in topic["channels"]))')
[ "$depth" = "3 3" ] || fail "stats: message_count and channel depth '$depth', want '3 3'"
curl -s -o /dev/null -w '%{http_code}' -d '' 'http://127.0.0.1:4151/pub?topic=orders' |
  grep -qx 400 || fail "an empty /pub is not refused"

# nsqlookupd knows the topic from nsqd's registration (bounded: 30 s).
for _ in $(seq 300); do
  curl -sf 'http://127.0.0.1:4161/lookup?topic=orders' | grep -q '"tcp_port":4150' && break
  sleep 0.1
done
curl -sf 'http://127.0.0.1:4161/lookup?topic=orders' | grep -q '"tcp_port":4150' ||
  fail "nsqlookupd does not list nsqd for the topic"

# A TLS consumer with a client certificate, found through nsqlookupd.
tls="tls=true&tls_ca_file=$work/ca.pem&tls_cert_file=$work/client.pem&tls_key_file=$work/client.key"
timeout 60 "$polybus" sub "nsq+lookupd://127.0.0.1:4161?lookupd_poll_interval=100ms&$tls" orders \
  --group billing --count 3 > received 2> consumer.log || fail "the TLS consumer did not get 3"
[ "$(sort received | tr '\n' ' ')" = "first second third " ] ||
  fail "received: $(cat received)"

# Without a client certificate, nsqd refuses the TLS handshake: nothing is published.
if timeout 30 "$polybus" pub "nsq://127.0.0.1:4150?tls=true&tls_ca_file=$work/ca.pem&connect_timeout=2s&op_timeout=5s&reconnect_max=200ms" \
  orders refused > /dev/null 2> refused.log; then
  fail "a client without a certificate published"
fi
echo "ok: nsqd and nsqlookupd on their default ports, TLS with a client certificate, HTTP API"
