#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `polybus request` and `polybus serve` on NSQ and Figg, whose protocols have no request/reply of
# their own: with envelope=cloudevents the client carries it over topics (a correlation id and a
# reply topic in the headers); without it, request is refused naming the option.
#
#   tools/tests/request_over_topics.sh POLYBUS_BINARY
set -euo pipefail
polybus=$1
source "$(dirname "$0")/../../tests/support/broker_process.sh"

serve_pid=
stop_serve() {
  [ -n "$serve_pid" ] || return 0
  kill -TERM "$serve_pid"
  wait "$serve_pid" || fail "serve did not exit cleanly on SIGTERM"
  serve_pid=
}

for scheme in nsq figg; do
  start_broker "$scheme"
  ce="$url?envelope=cloudevents"
  # serve says on standard error that it answers, once its subscription is confirmed.
  mkfifo "$work/serve.err"
  "$polybus" serve "$ce" jobs --concurrency 2 > /dev/null 2> "$work/serve.err" &
  serve_pid=$!
  exec 4< "$work/serve.err"
  rm "$work/serve.err"
  said=
  while read -r -t 30 line <&4; do
    said+="$line; "
    [[ "$line" == *"answering 'jobs'"* ]] && break
  done
  [[ "$said" == *"answering 'jobs'"* ]] || fail "$scheme: serve never registered: $said"
  for i in 1 2 3; do
    reply=$("$polybus" request "$ce" jobs "job $i" --timeout 10000) ||
      fail "$scheme: request $i failed"
    [ "$reply" = "job $i" ] || fail "$scheme: request $i got '$reply'"
  done
  echo "$scheme: request/serve with envelope=cloudevents: ok (3 replies)"

  status=0
  "$polybus" request "$url" jobs plain > /dev/null 2> "$work/err" || status=$?
  [ "$status" = 1 ] && grep -q "envelope=cloudevents" "$work/err" ||
    fail "$scheme: request without the envelope: exit $status, '$(cat "$work/err")'"
  echo "$scheme: request without the envelope: refused ($(cat "$work/err"))"
  stop_serve
  exec 4<&-
  stop_broker
done
