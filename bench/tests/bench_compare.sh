#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `polybus bench --compare` as a user runs it: one table of medians over alternating rounds, a
# JSON line per run and per URL, published and delivered reported apart the same way on every
# scheme, an SVG (or HTML) report that a real renderer (librsvg's rsvg-convert) draws with the
# expected elements, in-process brokers by broker:NAME, and --rate pacing the publishers.
#
#   bench/tests/bench_compare.sh POLYBUS_BINARY
set -euo pipefail
polybus=$1
source "$(dirname "$0")/../../tests/support/broker_process.sh"
command -v rsvg-convert > /dev/null ||
  fail "rsvg-convert is missing: Debian's librsvg2-bin has it (.ci/install-deps installs it)"

"$polybus" bench --compare mem://cmp broker:nsq --messages 2000 --rounds 2 \
  --report "$work/report.svg" > "$work/out" 2> "$work/err" || fail "compare: $(cat "$work/err")"
head -1 "$work/out" | grep -q '^pubsub, 2000 x 200 B, 1 publisher(s), 1 subscriber(s), 2 rounds$' ||
  fail "workload line: $(head -1 "$work/out")"
sed -n 2p "$work/out" | grep -q '^url .*msgs/s .*MB/s .*p50 us .*p99 us .*p99.9 us .*cpu us/msg .*allocs/msg .*published .*delivered .*failures .*publish means .*broker' ||
  fail "table head: $(sed -n 2p "$work/out")"
grep -q '^mem://cmp .* 4000  *4000  *0  *broker-confirmed  *in-process test broker$' "$work/out" ||
  fail "mem row: $(cat "$work/out")"
grep -q '^broker:nsq .* 4000  *4000  *0  *broker-confirmed  *in-process test broker$' "$work/out" ||
  fail "nsq row: $(cat "$work/out")"
[ "$(grep -c '^{"url":' "$work/out")" = 4 ] || fail "not 4 run lines"
# Alternating order: round 1 runs mem first, round 2 runs nsq first (their lines keep URL order).
grep -q '^{"url":"broker:nsq","round":2,"scheme":"nsq","mode":"pubsub","messages":2000,"published":2000,"delivered":2000' "$work/out" ||
  fail "nsq round 2 line"
grep -q '^{"summary":true,"url":"mem://cmp","rounds":2,"msgs_per_sec":{"median":' "$work/out" ||
  fail "mem summary"
grep -q '"published":4000,"delivered":4000,"failures":0,"publish_completion":"broker-confirmed","in_process":true}$' "$work/out" ||
  fail "summary totals"
grep -q "round 1/" "$work/err" && fail "progress lines although stdout is not a terminal"
grep -q "^report: $work/report.svg$" "$work/err" || fail "no report line: $(cat "$work/err")"
echo "table and JSON lines: ok"

svg="$work/report.svg"
[ "$(grep -c 'class="bar"' "$svg")" = 2 ] || fail "not 2 bars"
[ "$(grep -c 'class="whisker"' "$svg")" = 2 ] || fail "not 2 whiskers"
[ "$(grep -c 'class="curve"' "$svg")" = 2 ] || fail "not 2 latency curves"
for text in 'messages per second (msgs/s)' 'latency (µs, log scale)' '>percentile<' '>p99.9<' \
            'mem://cmp (publish broker-confirmed; in-process test broker)' 'broker:nsq (publish'; do
  grep -qF "$text" "$svg" || fail "the report lacks '$text'"
done
rsvg-convert -o "$work/report.png" "$svg" || fail "rsvg-convert refused the report"
python3 - "$work/report.png" << 'PY' || fail "the rendered report is not a 960-wide picture with ink"
import struct, sys, zlib
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n"
width, height, depth, colour = struct.unpack(">IIBB", data[16:26])
assert width == 960 and height >= 500 and depth == 8 and colour in (2, 6), (width, height, depth, colour)
chunks, i = b"", 8
while i < len(data):
    n, kind = struct.unpack(">I4s", data[i:i + 8])
    if kind == b"IDAT": chunks += data[i + 8:i + 8 + n]
    i += 12 + n
raw, bpp = zlib.decompress(chunks), 4 if colour == 6 else 3
stride, prev, dark, colours = width * bpp, bytearray(width * bpp), 0, set()
for y in range(height):
    kind, row = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
    for x in range(stride):  # PNG's row filters undone
        a = row[x - bpp] if x >= bpp else 0
        b, c = prev[x], prev[x - bpp] if x >= bpp else 0
        if kind == 1: row[x] = (row[x] + a) & 255
        elif kind == 2: row[x] = (row[x] + b) & 255
        elif kind == 3: row[x] = (row[x] + (a + b) // 2) & 255
        elif kind == 4:
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            row[x] = (row[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    for x in range(0, stride, bpp):
        pixel = tuple(row[x:x + 3])
        if max(pixel) < 200: dark += 1
        colours.add(pixel)
    prev = row
# Ink: text and axes (dark pixels), and the bars' and curves' colours (#1f77b4, #d62728).
assert dark > 2000, dark
assert (0x1f, 0x77, 0xb4) in colours and (0xd6, 0x27, 0x28) in colours, len(colours)
print("rendered", width, "x", height, "with", dark, "dark pixels and", len(colours), "colours")
PY
echo "SVG report rendered: ok"

# Comparable by construction: 2 subscribers are one group on NSQ (each message delivered once)
# and two readers on Figg (each message delivered twice); both rows say so.
"$polybus" bench --compare broker:nsq broker:figg --messages 1000 --subscribers 2 --rounds 1 \
  --report "$work/report.html" > "$work/out" 2> "$work/err" || fail "compare 2: $(cat "$work/err")"
grep -q '^broker:nsq .* 1000  *1000  *0 ' "$work/out" || fail "nsq: $(cat "$work/out")"
grep -q '^broker:figg .* 1000  *2000  *0 ' "$work/out" || fail "figg: $(cat "$work/out")"
grep -q '<svg' "$work/report.html" && grep -q '<pre>' "$work/report.html" || fail "html report"
echo "published and delivered apart, HTML report: ok"

# --rate: 500 messages at 1000/s cannot finish before the last one is due (0.499 s).
"$polybus" bench broker:nsq --messages 500 --rate 1000 > "$work/out" 2> "$work/err" ||
  fail "rate: $(cat "$work/err")"
tail -1 "$work/out" | python3 -c '
import json, sys
r = json.loads(sys.stdin.read())
assert r["rate"] == 1000 and r["delivered"] == 500 and r["seconds"] >= 0.499, r
assert r["publish_completion"] == "confirmed", r'
grep -q "at 1000 msgs/s offered" "$work/out" || fail "rate line: $(cat "$work/out")"
grep -q "an in-process test broker" "$work/out" || fail "in-process line"
echo "--rate: ok"

for bad in "--compare mem://one" "mem://x --rounds 2" "--compare mem://a mem://b --report out.txt" \
           "mem://x --rate 10 --publishers 0" "--compare broker:nope mem://b"; do
  status=0
  # shellcheck disable=SC2086
  "$polybus" bench $bad > /dev/null 2> "$work/err" || status=$?
  [ "$status" = 2 ] || fail "'bench $bad' exited $status: $(cat "$work/err")"
done
echo "usage errors: ok"
