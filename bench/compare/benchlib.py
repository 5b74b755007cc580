# SPDX-License-Identifier: Apache-2.0
"""What every comparison script of this folder shares: free ports, a fresh server per run, the
CPU a process used, the order of the clients alternated per round, and a table of medians with
their ranges.

A run is one client against one fresh server. A row is a workload measured with two or more
clients; each round runs every client of the row once, and the order of the clients rotates
from one round to the next, so that a drift of the machine (its speed moves with the hour on a
shared VM) falls on every client alike. A ratio is taken within a round (polybus against the
reference in the same round), then its median and range are given over the rounds.
"""

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

CLK_TCK = os.sysconf("SC_CLK_TCK")
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def arguments(doc, rows):
    """The flags every script takes: --rounds, --rows (default: rows), --polybus (POLYBUS;
    default build/release/tools/polybus) and --log. The script adds its own and parses."""
    p = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--rows", default=rows)
    p.add_argument("--polybus", default=os.environ.get(
        "POLYBUS", os.path.join(ROOT, "build/release/tools/polybus")))
    p.add_argument("--log", default=None)
    return p


def parse(parser, name):
    """Parses the flags; the log defaults to a new temporary file named after the script."""
    args = parser.parse_args()
    args.log = args.log or tempfile.mkstemp(prefix="polybus-compare-%s-" % name, suffix=".log")[1]
    need(args.polybus, "--polybus")
    return args


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port, proc, seconds=20.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("the server exited with %d before it listened on %d"
                               % (proc.returncode, port))
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError("nothing listened on 127.0.0.1:%d within %.0f s" % (port, seconds))


def proc_cpu_seconds(pid):
    """user + system time of a running process, from /proc (before it is killed)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


class Server:
    """A server process started fresh for one run, killed after it (SIGKILL: a server that
    writes its memory out on a clean exit would otherwise spend the next run doing so)."""

    def __init__(self, argv, port, log_path, stdin=subprocess.DEVNULL):
        self.log = open(log_path, "ab")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=self.log, stdin=stdin)
        wait_for_port(port, self.proc)

    def cpu_seconds(self):
        return proc_cpu_seconds(self.proc.pid)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.log.close()


def run_client(argv, timeout, log_path):
    """Runs a client to its end. Returns (stdout, stderr, cpu seconds of the process and its
    children, from wait4), or raises with the tail of its output when it failed."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                proc.kill()
                _, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.01)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    with open(log_path, "a") as log:
        log.write("$ %s\n%s%s(exit %d)\n" % (" ".join(argv), stdout, stderr, proc.returncode))
    if proc.returncode != 0:
        raise RuntimeError("%s exited with %d:\n%s" % (argv[0], proc.returncode,
                                                       (stdout + stderr)[-2000:]))
    return stdout, stderr, usage.ru_utime + usage.ru_stime


def last_json_line(text):
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            return json.loads(line)
    raise RuntimeError("no JSON line in:\n" + text[-2000:])


def rounds_order(clients, round_index):
    """The clients of a row, rotated by the round's index."""
    k = round_index % len(clients)
    return clients[k:] + clients[:k]


def si(value):
    if value >= 1e6:
        return "%.2fM" % (value / 1e6)
    if value >= 1e3:
        return "%.1fk" % (value / 1e3)
    return "%.0f" % value


def median_range(values, fmt):
    if not values:
        return "-"
    values = sorted(values)
    if len(values) == 1:
        return fmt(values[0])
    return "%s (%s-%s)" % (fmt(statistics.median(values)), fmt(values[0]), fmt(values[-1]))


def describe(results, fmt_rate=si):
    """One client's runs: rate, CPU per message, allocations, server CPU per message."""
    parts = [median_range([r["rate"] for r in results], fmt_rate) + " msgs/s"]
    cpu = [r["cpu_us"] for r in results if r.get("cpu_us") is not None]
    if cpu:
        parts.append(median_range(cpu, lambda v: "%.2f" % v) + " us")
    allocs = [r["allocs"] for r in results if r.get("allocs") is not None]
    if allocs:
        parts.append(median_range(allocs, lambda v: "%.2f" % v) + " allocs")
    server = [r["server_us"] for r in results if r.get("server_us") is not None]
    if server:
        parts.append("server " + median_range(server, lambda v: "%.2f" % v) + " us")
    return ", ".join(parts)


def print_table(title, rows, reference_name="reference"):
    """rows: (workload, [(client, [results in round order]), ...]); the last client of a row is
    its reference when the row has more than one. Each client's ratio is of its rate to the
    reference's within each round, then the median and range of those."""
    print("\n%s\n" % title)
    print("| workload | client | msgs/s, CPU per message, allocations, server CPU per message "
          "| ratio to %s, per round |" % reference_name)
    print("|---|---|---|---|")
    for workload, clients in rows:
        reference = clients[-1][1] if len(clients) > 1 else None
        for i, (name, results) in enumerate(clients):
            ratio = "-"
            if reference is not None and i < len(clients) - 1:
                ratios = [a["rate"] / b["rate"] for a, b in zip(results, reference) if b["rate"]]
                ratio = median_range(ratios, lambda v: "%.2fx" % v)
            print("| %s | %s | %s | %s |" % (workload if i == 0 else "", name, describe(results),
                                             ratio))
    sys.stdout.flush()


def measure_rows(rows, rounds, run):
    """rows: (key, workload, [(client name, client)]). Runs every client of a row once per round,
    the order rotating per round, through run(client, key); returns print_table's rows."""
    table = []
    for key, workload, clients in rows:
        results = {name: [] for name, _ in clients}
        for i in range(rounds):
            for name, client in rounds_order(clients, i):
                result = run(client, key)
                results[name].append(result)
                print("  %s, round %d: %s: %.0f msgs/s" % (key, i + 1, name, result["rate"]),
                      file=sys.stderr, flush=True)
        table.append((workload, [(name, results[name]) for name, _ in clients]))
    return table


def polybus_result(stdout, messages=None):
    """The bench's JSON line: rate, CPU and allocations per message, latency percentiles."""
    j = last_json_line(stdout)
    if j.get("failures"):
        raise RuntimeError("polybus bench had %d failures: %s" % (j["failures"],
                                                                    j.get("first_failure", "")))
    return {"rate": j["msgs_per_sec"], "cpu_us": j["cpu_us_per_msg"],
            "allocs": j["allocs_per_msg"], "p50_us": j["p50_us"], "p99_us": j["p99_us"],
            "messages": messages or j["messages"]}


def need(path, what):
    if not path or not os.path.isfile(path) or not os.access(path, os.X_OK):
        sys.exit("%s: not an executable: %r" % (what, path))
    return path
