#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""polybus against figg-bench (the Go SDK's bench) on one Figg server: the Figg table of
docs/performance.md.

    bench/compare/figg.py --server FIGG_SERVER --figg-bench FIGG_BENCH [--rounds 3]
                                [--rows e2e,e2e-4k] [--polybus PATH] [--polybus-before PATH]

Rows (every client once per round, each against a fresh figg-server with its in-memory log,
`--commitlog.inmemory`, the order rotating per round):
  e2e     1 publisher + 1 subscriber, 600,000 x 128 B: `polybus bench` with its defaults (window
          1024; the Go SDK's is fixed at 256), the same with `handler_thread=io`, and
          `figg-bench --pubs 1 --subs 1 --resumers 0`; and polybus doing figg-bench's work
          ("figg-bench's work"): its handler on the io thread, as the Go SDK runs its callback
          on the connection's reader, and `--no-latency`, no send time in the payloads and no
          latency timed, as figg-bench times none
  e2e-4k  the same with 100,000 x 4 KiB (polybus with its defaults)
With --polybus-before, each row also runs that build with its defaults ("polybus before"), in the
same rounds, so that a change is measured against the build before it under the same load.

The server and figg-bench are built by hand from their sources at commit 703b195; the
paths come from the flags or FIGG_SERVER, FIGG_BENCH and POLYBUS (default
build/release/tools/polybus). figg-bench's rate is its "sub stats" line (messages received per
second, end to end, as polybus bench measures); its CPU is wait4's user + system time over the
messages (start-up included); the server's is read from /proc before it is killed. Prints a
Markdown table of medians and ranges; every command and its output goes to --log.
"""

import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402


def main():
    p = benchlib.arguments(__doc__, "e2e,e2e-4k")
    p.add_argument("--server", default=os.environ.get("FIGG_SERVER"))
    p.add_argument("--figg-bench", default=os.environ.get("FIGG_BENCH"))
    p.add_argument("--polybus-before", default=None)
    args = benchlib.parse(p, "figg")
    if args.polybus_before:
        benchlib.need(args.polybus_before, "--polybus-before")
    log = args.log
    benchlib.need(args.server, "--server (figg-server)")
    benchlib.need(args.figg_bench, "--figg-bench")

    def run(client, _row):
        port = benchlib.free_port()
        server = benchlib.Server([args.server, "--addr", "127.0.0.1:%d" % port, "--admin-addr",
                                  "127.0.0.1:%d" % benchlib.free_port(), "--commitlog.inmemory"],
                                 port, log + ".server")
        try:
            before = server.cpu_seconds()
            result = client("127.0.0.1:%d" % port)
            result["server_us"] = (server.cpu_seconds() - before) * 1e6 / result["messages"]
            return result
        finally:
            server.stop()

    def polybus(count, size, query="", binary=None, flags=()):
        def client(address):
            out, _, _ = benchlib.run_client([binary or args.polybus, "bench",
                                             "figg://" + address + query,
                                             "--messages", str(count), "--size", str(size)] +
                                            list(flags), 300, log)
            return benchlib.polybus_result(out, count)
        return client

    def figg_bench(count, size):
        def client(address):
            out, _, cpu = benchlib.run_client([args.figg_bench, "--addr", address, "--msgs",
                                               str(count), "--msg-size", str(size), "--pubs", "1",
                                               "--subs", "1", "--resumers", "0"], 300, log)
            m = re.search(r"sub stats: ([0-9,.]+) msgs/sec", out, re.IGNORECASE)
            if not m:
                raise RuntimeError("no 'sub stats' line in figg-bench's output:\n" + out)
            return {"rate": float(m.group(1).replace(",", "")), "cpu_us": cpu * 1e6 / count,
                    "messages": count}
        return client

    def earlier_build(count, size):
        if not args.polybus_before:
            return []
        return [("polybus before", polybus(count, size, binary=args.polybus_before))]

    plan = []
    for row in args.rows.split(","):
        if row == "e2e":
            plan.append((row, "1 pub + 1 sub, 600,000 x 128 B", [
                ("polybus", polybus(600000, 128)),
                ("polybus, handler_thread=io", polybus(600000, 128, "?handler_thread=io")),
                ("polybus, figg-bench's work", polybus(600000, 128, "?handler_thread=io",
                                                       flags=["--no-latency"]))] +
                earlier_build(600000, 128) + [("figg-bench", figg_bench(600000, 128))]))
        elif row == "e2e-4k":
            plan.append((row, "1 pub + 1 sub, 100,000 x 4,096 B",
                         [("polybus", polybus(100000, 4096))] + earlier_build(100000, 4096) +
                         [("figg-bench", figg_bench(100000, 4096))]))
        else:
            sys.exit("unknown row %r (e2e, e2e-4k)" % row)
    table = benchlib.measure_rows(plan, args.rounds, run)
    benchlib.print_table("Figg, %s, %d rounds (log: %s)"
                         % (os.path.basename(args.server), args.rounds, log), table, "figg-bench")


if __name__ == "__main__":
    main()
