# SPDX-License-Identifier: Apache-2.0
# Sourced by the polybus command's and the bench's tests: a scratch directory, and `polybus broker` run as a background process
# the way a user's script would. Needs $polybus set to the command's path.
work=$(mktemp -d)
broker_pid=
cleanup() {
  [ -n "$broker_pid" ] && kill "$broker_pid" 2> /dev/null && wait "$broker_pid" 2> /dev/null
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "FAILED: $*"
  exit 1
}
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Starts `polybus broker ARGS...` in the background; sets url to its first line.
start_broker() {
  mkfifo "$work/out"
  "$polybus" broker "$@" > "$work/out" 2> "$work/err" &
  broker_pid=$!
  exec 3< "$work/out"
  read -r -t 30 url <&3 || fail "broker $* printed no URL: $(cat "$work/err")"
  rm "$work/out"
}
stop_broker() {
  kill -TERM "$broker_pid"
  wait "$broker_pid" || fail "broker did not exit cleanly on SIGTERM"
  broker_pid=
  exec 3<&-
}

