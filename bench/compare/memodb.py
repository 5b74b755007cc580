#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""polybus's MemoDB requests and workers against the real broker (memo01), against its own
in-process broker, and against the floor of plain sockets: the MemoDB table of
docs/performance.md.

    bench/compare/memodb.py [--broker MEMODB_BROKER] [--rounds 3]
                                  [--rows real,in-process,floor] [--polybus PATH] [--floor PATH]

Rows (every client of a row once per round, the order rotating per round):
  real        `polybus bench memodb+tcp://... --messages 20000 --size 200`: a requester with a
              window of 1,000 and one worker in the bench's process, against a fresh
              memodb-broker (commit 84dc710, built by hand from its sources; MEMODB_BROKER),
              with the worker's handlers on handler threads (the default) and on the io thread
  in-process  the same against `polybus broker memodb+tcp` in a process of its own
  floor       polybus_loopback_floor (bench/micro/loopback_floor.cpp, built with
              -DPOLYBUS_BUILD_BENCHMARKS=ON): the same exchange over loopback TCP with nothing
              else, no framing, no allocation, `--mode epoll` (as asio waits) and `--mode block`

Jobs per second and CPU per job (requester and worker, the broker not counted) come from the
bench's JSON line and the floor's. Prints a Markdown table of medians and ranges; every command
and its output goes to --log. Paths: --polybus (POLYBUS; default build/release/tools/polybus),
--floor (LOOPBACK_FLOOR; default build/release/bench/micro/polybus_loopback_floor).
"""

import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

ROOT = benchlib.ROOT


class PolybusBroker:
    """`polybus broker memodb+tcp` in a process of its own; its first line is its URL."""

    def __init__(self, polybus, log):
        self.log = open(log + ".server", "ab")
        self.proc = subprocess.Popen([polybus, "broker", "memodb+tcp"], stdout=subprocess.PIPE,
                                     stderr=self.log, stdin=subprocess.DEVNULL)
        self.url = self.proc.stdout.readline().decode().strip()
        if not self.url:
            raise RuntimeError("polybus broker memodb+tcp printed no URL")

    def stop(self):
        self.proc.terminate()
        self.proc.wait()
        self.log.close()


def main():
    p = benchlib.arguments(__doc__, "real,in-process,floor")
    p.add_argument("--floor", default=os.environ.get(
        "LOOPBACK_FLOOR", os.path.join(ROOT, "build/release/bench/micro/polybus_loopback_floor")))
    p.add_argument("--broker", default=os.environ.get("MEMODB_BROKER"))
    args = benchlib.parse(p, "memodb")
    log = args.log

    def bench(handler_thread):
        def client(url):
            out, _, _ = benchlib.run_client(
                [args.polybus, "bench", "%s?handler_thread=%s" % (url, handler_thread),
                 "--messages", "20000", "--size", "200"], 300, log)
            return benchlib.polybus_result(out)
        return client

    def floor(mode):
        def client(_url):
            out, _, _ = benchlib.run_client([args.floor, "--jobs", "20000", "--mode", mode], 300,
                                            log)
            j = benchlib.last_json_line(out)
            return {"rate": j["jobs_per_sec"], "cpu_us": j["cpu_us_per_job"]}
        return client

    def run(client, row):
        if row == "real":
            port = benchlib.free_port()
            server = benchlib.Server([args.broker, "tcp://127.0.0.1:%d" % port], port,
                                     log + ".server")
            try:
                return client("memodb+tcp://127.0.0.1:%d" % port)
            finally:
                server.stop()
        if row == "in-process":
            broker = PolybusBroker(args.polybus, log)
            try:
                return client(broker.url.split("?")[0])
            finally:
                broker.stop()
        return client(None)

    plan = []
    for row in args.rows.split(","):
        clients = [("polybus, handler_thread=pool", bench("pool")),
                   ("polybus, handler_thread=io", bench("io"))]
        if row == "real":
            benchlib.need(args.broker, "--broker (memodb-broker)")
            plan.append((row, "real broker (%s), 1 worker, 20,000 x 200 B"
                         % os.path.basename(args.broker), clients))
        elif row == "in-process":
            plan.append((row, "`polybus broker memodb+tcp`, 1 worker, 20,000 x 200 B", clients))
        elif row == "floor":
            benchlib.need(args.floor, "--floor")
            plan.append((row, "plain sockets, the same exchange, 20,000 jobs",
                         [("floor, epoll", floor("epoll")), ("floor, blocking", floor("block"))]))
        else:
            sys.exit("unknown row %r (real, in-process, floor)" % row)
    # No reference client: print each client alone (a one-client row has no ratio).
    table = []
    for workload, clients in benchlib.measure_rows(plan, args.rounds, run):
        table.extend((workload if i == 0 else "", [c]) for i, c in enumerate(clients))
    benchlib.print_table("MemoDB, %d rounds (log: %s); rates are jobs/s, CPU per job"
                         % (args.rounds, log), table)
    for workload, clients in table:
        for name, results in clients:
            if results and "p99_us" in results[0]:
                print("- %s%s: p50 %s ms, p99 %s ms" % (
                    workload + ", " if workload else "", name,
                    benchlib.median_range([r["p50_us"] / 1000 for r in results], lambda v: "%.0f" % v),
                    benchlib.median_range([r["p99_us"] / 1000 for r in results], lambda v: "%.0f" % v)))


if __name__ == "__main__":
    main()
