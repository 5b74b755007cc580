#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds and installs the third-party NSQ peers of polybus's interoperability tests into DEST_DIR
# (tests/integration/nsq_interop_test.cpp finds them through POLYBUS_NSQ_PEERS_DIR=DEST_DIR):
#
#   DEST_DIR/gonsq          go-nsq v1.1.0 peer (tests/harness/gonsq, a Go binary)
#   DEST_DIR/pynsq          pynsq peer: runs tests/harness/pynsq/peer.py in DEST_DIR/pynsq-venv
#   DEST_DIR/nsqjs          nsqjs peer: runs tests/harness/nsqjs/peer.js with the node_modules
#                           that `npm ci` installs beside it (gitignored)
#   DEST_DIR/hdrh-read      HdrHistogram's Python library reading interval logs
#                           (tests/harness/hdrhistogram/read_log.py, in the pynsq venv)
#
# Each is an executable with the same command line (tests/integration/README.md, or the top of
# any peer's source): `pub ADDR TOPIC COUNT PREFIX`, `sub ADDR TOPIC CHANNEL COUNT TIMEOUT_S`,
# `sub-lookupd LOOKUPD_HTTP TOPIC CHANNEL COUNT TIMEOUT_S`.
#
# Idempotent: the Go build is incremental; pip and npm run only when requirements.txt or
# package-lock.json changed since the last install. Packages come from their registries by name
# (Go module proxy, PyPI, npm). Needs go (>= 1.19), python3 with venv, node (>= 18) and npm; on
# Debian 12: apt-get install golang-go python3-venv nodejs npm. A peer whose toolchain is missing
# is reported and left out (its tests then skip); with --strict that is an error.
# Prints one line per peer; exits non-zero when an install failed.
set -euo pipefail

usage() { echo "usage: $0 [--strict] DEST_DIR" >&2; exit 2; }
strict=0
if [ "${1:-}" = "--strict" ]; then strict=1; shift; fi
[ $# -eq 1 ] || usage

src=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p "$1"
dest=$(cd "$1" && pwd)
export PATH="$PATH:/usr/local/go/bin"  # where the Go tarball installs; Debian's go is in /usr/bin

missing=0
status=0
skip() {  # peer, reason
  echo "$1: not installed ($2)"
  rm -f "$dest/$1"
  missing=1
}
sha() { sha256sum "$1" | cut -d' ' -f1; }
# A small launcher with the common command line.
launcher() {  # name, command...
  local name=$1; shift
  {
    echo '#!/bin/sh'
    echo "# polybus NSQ interop peer '$name', written by tests/harness/setup-peers.sh"
    printf 'exec'; printf ' %q' "$@"; echo ' "$@"'
  } > "$dest/$name.tmp"
  chmod +x "$dest/$name.tmp"
  mv "$dest/$name.tmp" "$dest/$name"
}

# --- go-nsq
if command -v go > /dev/null; then
  if (cd "$src/gonsq" && GOFLAGS="-mod=mod ${GOFLAGS:-}" go build -buildvcs=false \
        -o "$dest/gonsq" .) >&2; then
    echo "gonsq: $dest/gonsq (go-nsq v1.1.0, $(go version | cut -d' ' -f3))"
  else
    echo "gonsq: FAILED to build (see above)"; status=1
  fi
else
  skip gonsq "no go; Debian: apt-get install golang-go"
fi

# --- pynsq
venv="$dest/pynsq-venv"
req="$src/pynsq/requirements.txt"
if command -v python3 > /dev/null && python3 -c 'import venv, ensurepip' 2> /dev/null; then
  ok=1
  if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c '' 2> /dev/null; then
    rm -rf "$venv"
    python3 -m venv "$venv" >&2 || ok=0
  fi
  if [ $ok = 1 ] && [ "$(cat "$venv/.polybus-stamp" 2> /dev/null)" != "$(sha "$req")" ]; then
    if "$venv/bin/pip" install -q --disable-pip-version-check -r "$req" >&2; then
      sha "$req" > "$venv/.polybus-stamp"
    else
      ok=0
    fi
  fi
  if [ $ok = 1 ] && "$venv/bin/python" -W ignore -c 'import nsq, cloudevents.core' 2> /dev/null; then
    launcher pynsq "$venv/bin/python" "$src/pynsq/peer.py"
    echo "pynsq: $dest/pynsq (pynsq $("$venv/bin/python" -c 'import nsq; print(nsq.__version__)' \
      2> /dev/null), $("$venv/bin/python" --version))"
  else
    echo "pynsq: FAILED to install (see above)"; status=1
  fi
  if [ $ok = 1 ] && "$venv/bin/python" -W ignore -c 'import hdrh.log' 2> /dev/null; then
    launcher hdrh-read "$venv/bin/python" "$src/hdrhistogram/read_log.py"
    echo "hdrh-read: $dest/hdrh-read (hdrhistogram $("$venv/bin/python" -c \
      'import importlib.metadata as m; print(m.version("hdrhistogram"))' 2> /dev/null))"
  else
    echo "hdrh-read: FAILED to install (see above)"; status=1
  fi
else
  skip pynsq "no python3 with venv; Debian: apt-get install python3-venv"
  skip hdrh-read "no python3 with venv; Debian: apt-get install python3-venv"
fi

# --- nsqjs
lock="$src/nsqjs/package-lock.json"
stamp="$src/nsqjs/node_modules/.polybus-stamp"
if command -v node > /dev/null && command -v npm > /dev/null; then
  ok=1
  if [ "$(cat "$stamp" 2> /dev/null)" != "$(sha "$lock")" ]; then
    if (cd "$src/nsqjs" && npm ci --no-audit --no-fund --loglevel=error) >&2; then
      sha "$lock" > "$stamp"
    else
      ok=0
    fi
  fi
  if [ $ok = 1 ]; then
    launcher nsqjs "$(command -v node)" "$src/nsqjs/peer.js"
    echo "nsqjs: $dest/nsqjs (nsqjs $(node -p 'require(process.argv[1]).version' \
      "$src/nsqjs/node_modules/nsqjs/package.json"), node $(node --version))"
  else
    echo "nsqjs: FAILED to install (see above)"; status=1
  fi
else
  skip nsqjs "no node/npm; Debian: apt-get install nodejs npm"
fi

if [ $strict = 1 ] && [ $missing = 1 ]; then status=1; fi
exit $status
