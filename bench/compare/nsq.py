#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""polybus against NSQ's own clients on one nsqd: the NSQ table of docs/performance.md.

    bench/compare/nsq.py [--rounds 3] [--rows e2e,mpub,consume,e2e-4k] [paths]

Rows (each round runs every client of a row once, against a fresh nsqd each, in an order that
rotates per round):
  e2e      1 publisher + 1 subscriber, 200,000 x 200 B: `polybus bench` against go-nsq
           (tests/harness/gonsq's bench mode: one Consumer, MaxInFlight 200, PublishAsync with at
           most 1,000 unacknowledged, as polybus bench's window)
  e2e-4k   the same with 100,000 x 4 KiB
  mpub     publish only, MPUB of 200 x 200 B from 2 connections: polybus against nsq's
           bench_writer (one connection per GOMAXPROCS, 2 here), for 3 s or 2,000,000 messages
  consume  drain a channel filled beforehand with 2,000,000 x 200 B: polybus (2 subscribers)
           against nsq's bench_reader (RDY 2500, one connection per GOMAXPROCS)

Paths (flags, or the environment variables named): --polybus (POLYBUS; default
build/release/tools/polybus), --nsqd (NSQD: a real nsqd binary) or else --harness
(NSQ_HARNESS; default build/nsq-harness: nsqd 1.3.0 from the nsq Go module, tests/harness/nsq),
--gonsq (GONSQ; default build/nsq-peers/gonsq, built by tests/harness/setup-peers.sh),
--bench-writer (BENCH_WRITER) and --bench-reader (BENCH_READER): nsq v1.3.0's bench tools, built
with `go build` in its bench/bench_writer and bench/bench_reader. A row whose reference is
missing is measured for polybus alone, and says so.

nsqd keeps up to 10,000,000 messages in memory (--mem-queue-size), so that no run measures its
disk queue. CPU per message: the bench's JSON for polybus and go-nsq (the process over the run),
wait4's user + system time for bench_writer and bench_reader (start-up included, over the
messages they report), /proc for nsqd (read before it is killed). Prints a Markdown table of
medians and ranges; every command and its output goes to --log (default: a temporary file).
"""

import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

ROOT = benchlib.ROOT


class Nsqd:
    def __init__(self, args, log):
        self.port = benchlib.free_port()
        self.data = tempfile.TemporaryDirectory(prefix="polybus-nsqd-")
        if args.nsqd:
            argv = [args.nsqd, "--tcp-address", "127.0.0.1:%d" % self.port,
                    "--http-address", "127.0.0.1:%d" % benchlib.free_port(),
                    "--data-path", self.data.name, "--mem-queue-size", "10000000"]
        else:
            argv = [args.harness, "-no-lookupd", "-nsqd-tcp", "127.0.0.1:%d" % self.port,
                    "-data-dir", self.data.name, "-mem-queue-size", "10000000",
                    "-watch-stdin=false"]
        self.server = benchlib.Server(argv, self.port, log + ".server")
        self.address = "127.0.0.1:%d" % self.port

    def stop(self):
        self.server.stop()
        self.data.cleanup()


def go_tool_result(stderr, cpu_seconds):
    """bench_writer's and bench_reader's last line: duration: 3.0s - X mb/s - Y ops/s - Z us/op"""
    m = None
    for m in re.finditer(r"duration: ([0-9.]+)(m?s) - [0-9.]+mb/s - ([0-9.]+)ops/s", stderr):
        pass
    if not m:
        raise RuntimeError("no 'duration: ... ops/s' line in:\n" + stderr[-2000:])
    seconds = float(m.group(1)) / (1000.0 if m.group(2) == "ms" else 1.0)
    rate = float(m.group(3))
    messages = rate * seconds
    return {"rate": rate, "cpu_us": cpu_seconds * 1e6 / messages if messages else None}


def main():
    p = benchlib.arguments(__doc__, "e2e,mpub,consume,e2e-4k")
    p.add_argument("--nsqd", default=os.environ.get("NSQD"))
    p.add_argument("--harness", default=os.environ.get(
        "NSQ_HARNESS", os.path.join(ROOT, "build/nsq-harness")))
    p.add_argument("--gonsq", default=os.environ.get(
        "GONSQ", os.path.join(ROOT, "build/nsq-peers/gonsq")))
    p.add_argument("--bench-writer", default=os.environ.get("BENCH_WRITER"))
    p.add_argument("--bench-reader", default=os.environ.get("BENCH_READER"))
    args = benchlib.parse(p, "nsq")
    log = args.log
    benchlib.need(args.nsqd or args.harness, "--nsqd or --harness")
    server_name = ("nsqd (%s)" % os.path.basename(args.nsqd) if args.nsqd
                   else "nsqd 1.3.0 of the nsq module (%s)" % os.path.basename(args.harness))
    have_gonsq = args.gonsq and os.access(args.gonsq, os.X_OK)
    rows = args.rows.split(",")
    notes = []

    def run(client, workload):
        """One run of one client against a fresh nsqd: its result with the server's CPU."""
        nsqd = Nsqd(args, log)
        try:
            if workload == "consume":  # fill the channel first, with polybus's MPUB
                benchlib.run_client([args.polybus, "bench", "nsq://" + nsqd.address, "--topic",
                                     "t", "--subscribers", "0", "--batch", "200", "--messages",
                                     "2000000", "--publishers", "2", "--window", "32"], 300, log)
            before = nsqd.server.cpu_seconds()
            result = client(nsqd.address)
            server = nsqd.server.cpu_seconds() - before
            if result.get("messages"):
                result["server_us"] = server * 1e6 / result["messages"]
            return result
        finally:
            nsqd.stop()

    def polybus_e2e(size, count):
        def client(address):
            out, _, _ = benchlib.run_client([args.polybus, "bench", "nsq://" + address,
                                             "--messages", str(count), "--size", str(size)],
                                            300, log)
            r = benchlib.polybus_result(out)
            r["messages"] = count
            return r
        return client

    def gonsq_e2e(size, count):
        def client(address):
            out, _, _ = benchlib.run_client([args.gonsq, "bench", address, "bench-gonsq",
                                             str(count), str(size), "200"], 300, log)
            j = benchlib.last_json_line(out)
            return {"rate": j["msgs_per_sec"], "cpu_us": j["cpu_us_per_msg"], "messages": count}
        return client

    def polybus_mpub(address):
        out, _, _ = benchlib.run_client([args.polybus, "bench", "nsq://" + address, "--topic", "t",
                                         "--subscribers", "0", "--batch", "200", "--messages",
                                         "2000000", "--publishers", "2", "--window", "32"],
                                        300, log)
        r = benchlib.polybus_result(out)
        r["messages"] = 2000000
        return r

    def go_tool(binary, flags):
        """bench_writer or bench_reader for 3 s: the rate it reports, its CPU over its messages."""
        def client(address):
            _, err, cpu = benchlib.run_client([binary, "-nsqd-tcp-address", address, "-runfor",
                                               "3s", "-topic", "t", "-size", "200"] + flags, 120,
                                              log)
            r = go_tool_result(err, cpu)
            r["messages"] = r["rate"] * 3
            return r
        return client

    def polybus_consume(address):
        out, _, _ = benchlib.run_client([args.polybus, "bench", "nsq://" + address, "--topic", "t",
                                         "--publishers", "0", "--messages", "2000000", "--group",
                                         "ch", "--subscribers", "2"], 300, log)
        r = benchlib.polybus_result(out)
        r["messages"] = 2000000
        return r

    plan = []
    for row in rows:
        if row in ("e2e", "e2e-4k"):
            size, count = (200, 200000) if row == "e2e" else (4096, 100000)
            clients = [("polybus", polybus_e2e(size, count))]
            if have_gonsq:
                clients.append(("go-nsq", gonsq_e2e(size, count)))
            else:
                notes.append("%s: go-nsq left out (no --gonsq)" % row)
            plan.append((row, "1 pub + 1 sub, {:,} x {:,} B".format(count, size), clients))
        elif row == "mpub":
            clients = [("polybus", polybus_mpub)]
            if args.bench_writer:
                clients.append(("bench_writer",
                                go_tool(args.bench_writer, ["-batch-size", "200"])))
            else:
                notes.append("mpub: bench_writer left out (no --bench-writer)")
            plan.append((row, "publish only, MPUB 200 x 200 B, 2 connections", clients))
        elif row == "consume":
            clients = [("polybus", polybus_consume)]
            if args.bench_reader:
                clients.append(("bench_reader", go_tool(args.bench_reader, ["-channel", "ch"])))
            else:
                notes.append("consume: bench_reader left out (no --bench-reader)")
            plan.append((row, "consume only, 2,000,000 x 200 B queued", clients))
        else:
            sys.exit("unknown row %r (e2e, mpub, consume, e2e-4k)" % row)
    table = benchlib.measure_rows(plan, args.rounds, run)
    benchlib.print_table("NSQ, %s, %d rounds (log: %s)" % (server_name, args.rounds, log), table,
                         "the NSQ client")
    for note in notes:
        print("- " + note)


if __name__ == "__main__":
    main()
