#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""polybus against the real QuickIO 0.2.1 over its three carriers: the QuickIO table of
docs/performance.md.

    bench/compare/quickio.py --server QUICKIO --app QIO_PUBSUB_SO [--rounds 3]
                                   [--rows raw,ws,http,http-latency] [--polybus PATH]

QuickIO has no bench of its own, so the table compares the carriers with each other on one
server (every carrier once per round, each against a fresh server, the order rotating):
  raw           quickio://, 200,000 x 200 B, 1 publisher + 1 subscriber
  ws            quickio+ws:// (`http_fallback=false`: WebSocket or nothing), the same
  http          quickio+http:// long polling with `http_poll_delay_max=20ms`, the same
  http-latency  the same at 200 messages a second, 2,000 of them: the round trip's p50 and p99

The server is QuickIO 0.2.1 (commit 942b76b) with a pub/sub application for the paths under /pub
(QIO_PUBSUB_SO; the bench's topic is pub/bench), both
built by hand from their sources (the server needs a stand-in for its missing event library);
the paths come from the flags or QUICKIO, QIO_PUBSUB and POLYBUS (default
build/release/tools/polybus). Raw TCP, WebSocket and HTTP share the server's one port. Prints
a Markdown table of medians and ranges and, per round, the WebSocket's CPU per message over raw
TCP's; every command and its output goes to --log.
"""

import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

URLS = {
    "raw": "quickio://{}",
    "ws": "quickio+ws://{}?http_fallback=false",
    "http": "quickio+http://{}?http_poll_delay_max=20ms",
    "http-latency": "quickio+http://{}?http_poll_delay_max=20ms",
}


def main():
    p = benchlib.arguments(__doc__, "raw,ws,http,http-latency")
    p.add_argument("--server", default=os.environ.get("QUICKIO"))
    p.add_argument("--app", default=os.environ.get("QIO_PUBSUB"))
    args = benchlib.parse(p, "quickio")
    log = args.log
    benchlib.need(args.server, "--server (quickio)")
    if not args.app or not os.path.isfile(args.app):
        sys.exit("--app: not a file: %r" % args.app)
    rows = args.rows.split(",")
    for row in rows:
        if row not in URLS:
            sys.exit("unknown row %r (%s)" % (row, ", ".join(URLS)))
    work = tempfile.TemporaryDirectory(prefix="polybus-quickio-")

    def run(client, _row):
        port = benchlib.free_port()
        config = os.path.join(work.name, "quickio.ini")
        with open(config, "w") as f:
            f.write("[quick-event]\nlisten = 127.0.0.1:%d\ntimeout = 10000\n"
                    "[quick.io]\npublic-address = localhost\n"
                    "[quick.io-apps]\npubsub = %s\n" % (port, os.path.abspath(args.app)))
        server = benchlib.Server([args.server, "-f", config], port, log + ".server")
        try:
            return client("127.0.0.1:%d" % port)
        finally:
            server.stop()

    def polybus(row):
        # The pub/sub application serves the paths under /pub; a fresh server per run, so one
        # topic for every run.
        flags = ["--topic", "pub/bench", "--messages", "200000", "--size", "200"]
        if row == "http-latency":
            flags = ["--topic", "pub/bench", "--messages", "2000", "--size", "200", "--rate", "200"]

        def client(address):
            out, _, _ = benchlib.run_client([args.polybus, "bench", URLS[row].format(address)]
                                            + flags, 300, log)
            return benchlib.polybus_result(out)
        return client

    # One row per carrier, but the carriers alternate with each other within a round.
    clients = [(row, polybus(row)) for row in rows]
    results = {row: [] for row in rows}
    for i in range(args.rounds):
        for row, client in benchlib.rounds_order(clients, i):
            results[row].append(run(client, row))
            print("  round %d: %s: %.0f msgs/s" % (i + 1, row, results[row][-1]["rate"]),
                  file=sys.stderr, flush=True)
    table = [("%s, %s" % (row, "2,000 x 200 B at 200/s" if row == "http-latency"
                          else "200,000 x 200 B"), [("polybus", results[row])]) for row in rows]
    benchlib.print_table("QuickIO 0.2.1 (%s), %d rounds (log: %s)"
                         % (os.path.basename(args.server), args.rounds, log), table)
    if "http-latency" in results:
        r = results["http-latency"]
        print("- http at 200 msgs/s: p50 %s ms, p99 %s ms" % (
            benchlib.median_range([x["p50_us"] / 1000 for x in r], lambda v: "%.1f" % v),
            benchlib.median_range([x["p99_us"] / 1000 for x in r], lambda v: "%.1f" % v)))
    if "raw" in results and "ws" in results:
        ratios = [w["cpu_us"] / r["cpu_us"] for w, r in zip(results["ws"], results["raw"])]
        print("- WebSocket / raw CPU per message, per round: median %.2f (%.2f-%.2f)"
              % (statistics.median(ratios), min(ratios), max(ratios)))


if __name__ == "__main__":
    main()
