#!/usr/bin/env bash
# The drop-in shims: `nsqd` and `nsqlookupd` as two-line scripts that run `polybus broker nsqd`
# and `polybus broker nsqlookupd`, first on PATH, under nsq_servers_script.sh (written for the
# real servers); then what the real command lines refuse and report.
#
#   samples/cli/tests/nsq_dropin.sh POLYBUS_BINARY
set -euo pipefail
polybus=$(realpath "$1")
here=$(cd "$(dirname "$0")" && pwd)
shims=$(mktemp -d)
trap 'rm -rf "$shims"' EXIT
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
echo "ok: shims, refused flags"
