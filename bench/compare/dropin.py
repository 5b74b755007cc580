#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The in-process brokers against the real servers they stand in for: how long each takes to
start, and the round-trip latency a client sees through it. The table of docs/testing.md.

    bench/compare/dropin.py [--nsqd NSQD] [--nsqlookupd NSQLOOKUPD] [--figg-server FIGG]
                                  [--memodb-broker MEMODB] [--quickio QUICKIO --qio-app SO]
                                  [--rounds 5] [--polybus PATH]

Each server is started fresh per run with the same command line as its shim takes it
(`polybus broker nsqd ...`, `polybus broker figg-server ...`; QuickIO, which has no shim, with
`polybus broker quickio --port P` against the real one's config file); servers whose binary is
not given are measured in process only. Start-up: from the exec until the server accepts a TCP
connection (nsqd and nsqlookupd: until GET /ping answers 200), polled every millisecond.
Latency: `polybus bench URL --messages 2000 --size 200 --rate 1000`, an offered rate well below
every server's capacity, so that it measures the trip and not a queue: publish (when it was
due) to receive (MemoDB: request to reply), p50 and p99. Medians and ranges over the
rounds, the servers alternating per round. Every command and its output goes to --log.
"""

import http.client
import os
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402


def ready_tcp(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def ready_ping(port):
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=0.2)
        c.request("GET", "/ping")
        return c.getresponse().status == 200
    except OSError:
        return False


class Started:
    """A server process and how long it took to answer."""

    def __init__(self, argv, ready, log_path):
        self.log = open(log_path, "ab")
        start = time.monotonic()
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=self.log,
                                     stdin=subprocess.DEVNULL)
        while not ready():
            if self.proc.poll() is not None:
                raise RuntimeError("%s exited with %d" % (argv[0], self.proc.returncode))
            if time.monotonic() - start > 20:
                raise RuntimeError("%s did not start within 20 s" % argv[0])
            time.sleep(0.001)
        self.seconds = time.monotonic() - start

    def stop(self):
        self.proc.kill()
        self.proc.wait()
        self.log.close()


def main():
    p = benchlib.arguments(__doc__, "")
    for flag, env in (("--nsqd", "NSQD"), ("--nsqlookupd", "NSQLOOKUPD"),
                      ("--figg-server", "FIGG_SERVER"), ("--memodb-broker", "MEMODB_BROKER"),
                      ("--quickio", "QUICKIO"), ("--qio-app", "QIO_PUBSUB")):
        p.add_argument(flag, default=os.environ.get(env))
    args = benchlib.parse(p, "dropin")
    args.rounds = max(args.rounds, 1)
    work = tempfile.mkdtemp(prefix="polybus-dropin-")
    shim = lambda name: [args.polybus, "broker", name]  # noqa: E731

    # (name, argv(ports) for ours and the real one, ready(ports), URL(ports) or None)
    def nsqd(base):
        def argv(ports):
            data = tempfile.mkdtemp(dir=work)
            return base + ["--tcp-address=127.0.0.1:%d" % ports[0],
                           "--http-address=127.0.0.1:%d" % ports[1], "--data-path=" + data,
                           "--log-level=warn"]
        return argv

    def nsqlookupd(base):
        return lambda ports: base + ["--tcp-address=127.0.0.1:%d" % ports[0],
                                     "--http-address=127.0.0.1:%d" % ports[1]]

    def figg(base, real):
        admin = ["--admin-addr", "127.0.0.1:%d" % benchlib.free_port()] if real else []
        return lambda ports: base + ["-a", "127.0.0.1:%d" % ports[0], "--commitlog.inmemory"] + admin

    def memodb(base):
        return lambda ports: base + ["tcp://127.0.0.1:%d" % ports[0]]

    def quickio_real(ports):
        config = os.path.join(work, "quickio-%d.ini" % ports[0])
        with open(config, "w") as f:
            f.write("[quick-event]\nlisten = 127.0.0.1:%d\ntimeout = 10000\n"
                    "[quick.io]\npublic-address = localhost\n"
                    "[quick.io-apps]\npubsub = %s\n" % (ports[0], os.path.abspath(args.qio_app)))
        return [args.quickio, "-f", config]

    rows = [
        ("nsqd", nsqd(shim("nsqd")), args.nsqd and nsqd([args.nsqd]), "ping",
         lambda ports: "nsq://127.0.0.1:%d" % ports[0], []),
        ("nsqlookupd", nsqlookupd(shim("nsqlookupd")),
         args.nsqlookupd and nsqlookupd([args.nsqlookupd]), "ping", None, []),
        ("figg-server", figg(shim("figg-server"), False),
         args.figg_server and figg([args.figg_server], True), "tcp",
         lambda ports: "figg://127.0.0.1:%d" % ports[0], []),
        ("memodb-broker", memodb(shim("memodb-broker")),
         args.memodb_broker and memodb([args.memodb_broker]), "tcp",
         lambda ports: "memodb+tcp://127.0.0.1:%d" % ports[0], []),
        ("quickio", lambda ports: shim("quickio") + ["--port", str(ports[0])],
         args.quickio and args.qio_app and quickio_real, "tcp",
         lambda ports: "quickio://127.0.0.1:%d" % ports[0], ["--topic", "pub/bench"]),
    ]
    print("| server | start-up, ms (in process / real) | latency p50, us (in process / real) "
          "| latency p99, us (in process / real) |")
    print("|---|---|---|---|")
    for name, ours, real, readiness, url, topic in rows:
        servers = [("in process", ours)] + ([("real", real)] if real else [])
        starts = {label: [] for label, _ in servers}
        p50 = {label: [] for label, _ in servers}
        p99 = {label: [] for label, _ in servers}
        for i in range(args.rounds):
            for label, argv in benchlib.rounds_order(servers, i):
                ports = (benchlib.free_port(), benchlib.free_port())
                ready = (lambda: ready_ping(ports[1])) if readiness == "ping" else (
                    lambda: ready_tcp(ports[0]))
                server = Started(argv(ports), ready, args.log + ".server")
                try:
                    starts[label].append(server.seconds * 1000)
                    if url:
                        out, _, _ = benchlib.run_client(
                            [args.polybus, "bench", url(ports), "--messages", "2000", "--size",
                             "200", "--rate", "1000"] + topic, 300, args.log)
                        result = benchlib.polybus_result(out)
                        p50[label].append(result["p50_us"])
                        p99[label].append(result["p99_us"])
                finally:
                    server.stop()
                print("  %s, round %d, %s: started in %.1f ms" % (name, i + 1, label,
                                                                 starts[label][-1]),
                      file=sys.stderr, flush=True)

        def cell(values, fmt):
            return " / ".join(benchlib.median_range(values[label], fmt) for label, _ in servers)
        print("| %s | %s | %s | %s |" % (name, cell(starts, lambda v: "%.1f" % v),
                                         cell(p50, lambda v: "%.0f" % v),
                                         cell(p99, lambda v: "%.0f" % v)))
        sys.stdout.flush()
    print("\n(%d rounds; log: %s)" % (args.rounds, args.log))


if __name__ == "__main__":
    main()
