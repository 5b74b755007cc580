#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""`polybus bench --workload FILE URL --workers URL,...` over `polybus bench worker` processes on
loopback, and its failures.

The run: WORKERS workers (2 or 3), the broker in-process in the coordinator (`broker:NAME`, which
the workers reach on loopback), OMB's 1-topic workload with SUBSCRIPTIONS subscriptions, 3 s
without a warm-up (so that the first messages, before any backlog, are in the figures) in 1 s windows, at 1,000 msgs/s. The result has every field of OMB's TestResult with its type
(check_omb_result.py), traffic on every window, the summed counters equal to what the workers
counted, and the workers named. Two workers' clocks are made to differ by a second
(--clock-skew-ms): the coordinator measures them and the end-to-end latency is that of the
messages, not of the clocks. Then the failures, each ended within its bound and named by the
worker's address and endpoint: a worker nobody listens on, a worker that accepts and never
answers (--call-timeout 2), and a consuming worker killed during the test.

    omb_coordinator.py POLYBUS_BINARY BROKER_NAME WORKERS SUBSCRIPTIONS
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_omb_result import type_failures  # noqa: E402

polybus = os.path.abspath(sys.argv[1])
broker, worker_count, subscriptions = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
processes = []


def fail(message):
    print("FAILED: " + message)
    sys.exit(1)


def start_worker(skew_ms=0):
    process = subprocess.Popen([polybus, "bench", "worker", "--listen", "127.0.0.1:0",
                                "--clock-skew-ms", str(skew_ms)],
                               stdout=subprocess.PIPE, text=True)
    processes.append(process)
    line = process.stdout.readline().strip()
    if not line.startswith("worker: http://"):
        fail("a worker printed " + repr(line))
    return process, line[len("worker: "):]


def coordinate(workers, extra=(), bound=120):
    args = [polybus, "bench", "--workload", "workload.yaml", "broker:" + broker, "--workers",
            ",".join(workers), "--duration", "3s", "--warmup", "0s", "--window-seconds", "1",
            "--result", "result.json"] + list(extra)
    started = time.monotonic()
    run = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         timeout=bound)
    return run.returncode, run.stdout, time.monotonic() - started


def main(work):
    os.chdir(work)
    os.mkdir("payload")
    with open("payload/payload-1Kb.data", "w") as f:
        f.write("".join(chr(97 + i % 26) for i in range(1024)))
    with open("workload.yaml", "w") as f:
        f.write("""name: 1 topic / 1 partition / 1Kb
topics: 1
partitionsPerTopic: 1
keyDistributor: "NO_KEY"
messageSize: 1024
payloadFile: "payload/payload-1Kb.data"
subscriptionsPerTopic: %d
consumerPerSubscription: 1
producersPerTopic: 1
producerRate: 1000
consumerBacklogSizeGB: 0
testDurationMinutes: 1
warmupDurationMinutes: 0
""" % subscriptions)
    # Clocks apart, as on machines that are: the producing worker's 700 ms behind, the last
    # consuming one's 300 ms ahead. Uncorrected, every end-to-end latency would be 1 s longer
    # than it is: the shortest would be over 1 s.
    skews = [-700] + [0] * (worker_count - 2) + [300]
    workers = [start_worker(skew) for skew in skews]
    urls = [url for _, url in workers]
    code, out, seconds = coordinate(urls)
    if code != 0:
        fail("the coordinator exited %d:\n%s" % (code, out))
    with open("result.json") as f:
        result = json.load(f)
    failures = type_failures(result, "result.json")
    if failures:
        fail("\n".join(failures))
    extra = result["polybus"]
    if extra.get("workers") != urls or extra.get("producingWorkers") != worker_count // 2:
        fail("the result names workers %r, %r producing" % (extra.get("workers"),
                                                            extra.get("producingWorkers")))
    # Traffic in every window (how much depends on the machine's load: not checked).
    if min(result["publishRate"]) <= 0 or min(result["consumeRate"]) <= 0:
        fail("a window without traffic: %r %r" % (result["publishRate"], result["consumeRate"]))
    if result["aggregatedEndToEndLatency50pct"] <= 0:
        fail("no end-to-end latency")
    clocks = extra["clocks"]
    if not clocks["endToEndCorrected"]:
        fail("the clocks were not measured: %r" % clocks)
    for clock, skew in zip(clocks["workers"], skews):
        if abs(clock["offsetMs"] - skew) > 20 or clock["errorMs"] > 20:
            fail("a worker %d ms off was measured at %r" % (skew, clock))
    shortest = min(result["aggregatedEndToEndLatencyQuantiles"].values())
    if shortest > 500:
        fail("the skew passed for latency: the shortest end-to-end is %.1f ms" % shortest)
    print("run: %d workers on %s, %d published, %d received, e2e shortest %.3f ms, p99 %.3f ms, "
          "in %.1f s" % (worker_count, broker, extra["published"], extra["received"], shortest,
                         result["aggregatedEndToEndLatency99pct"], seconds))

    # Nobody listening: named, at once.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = "http://127.0.0.1:%d" % s.getsockname()[1]
    code, out, seconds = coordinate([urls[0], dead])
    if code == 0 or dead + "/stop-all: cannot connect" not in out:
        fail("a worker nobody listens on: exit %d:\n%s" % (code, out))
    print("nobody listening: %.1f s: %s" % (seconds, out.strip().splitlines()[-1]))

    # Accepts and never answers: the call's bound, then the end.
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    mute = "http://127.0.0.1:%d" % silent.getsockname()[1]
    code, out, seconds = coordinate([urls[0], mute], ["--call-timeout", "2"])
    silent.close()
    if code == 0 or mute + "/stop-all: no answer within 2000 ms" not in out or seconds > 30:
        fail("a worker that never answers: exit %d after %.1f s:\n%s" % (code, seconds, out))
    print("never answering: %.1f s: %s" % (seconds, out.strip().splitlines()[-1]))

    # A consuming worker killed during the test.
    consumer, consumer_url = workers[-1]
    args = [polybus, "bench", "--workload", "workload.yaml", "broker:" + broker, "--workers",
            ",".join(urls), "--duration", "20s", "--warmup", "0s", "--window-seconds", "1",
            "--call-timeout", "5"]
    run = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    for line in run.stdout:
        lines.append(line)
        if line.startswith("workers test:"):
            consumer.kill()
            break
    rest, _ = run.communicate(timeout=60)
    out = "".join(lines) + rest
    if run.returncode == 0 or consumer_url not in out.splitlines()[-1]:
        fail("a worker killed during the test: exit %d:\n%s" % (run.returncode, out))
    print("killed during the test: " + out.strip().splitlines()[-1])
    # The others were told /stop-all: each takes a driver again at once.
    for _, url in workers[:-1]:
        host, port = url[len("http://"):].rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=10) as s:
            s.sendall(b"GET /counters-stats HTTP/1.1\r\nHost: w\r\nConnection: close\r\n\r\n")
            answer = b""
            while chunk := s.recv(4096):
                answer += chunk
        if b'"messagesSent" : 0' not in answer:
            fail("%s was not stopped: %r" % (url, answer))
    print("ok")


work = tempfile.mkdtemp()
try:
    main(work)
finally:
    shutil.rmtree(work, ignore_errors=True)
    for process in processes:
        process.terminate()
    for process in processes:
        try:
            code = process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            fail("a worker did not end within 30 s of SIGTERM")
        # A clean end on SIGTERM (but the worker killed on purpose); a sanitizer's report at exit
        # would make it another.
        if code not in (0, -9):
            fail("%s exited %d on SIGTERM" % (" ".join(process.args), code))
