#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""`polybus bench worker` as OpenMessaging Benchmark's coordinator drives it.

Two workers on loopback against one in-process broker (`polybus broker NAME`): the first
produces, the second consumes, as OMB's coordinator splits two workers. The run follows the calls
of a recorded OMB run (../shared/omb/samples/run1-fixed-rate/sequence.tsv: stop-all,
initialize-driver, create-topics, create-consumers, create-producers, probe-producers,
counters-stats until the consumer has the probe, start-load, reset-stats, period-stats,
cumulative-latencies, stop-all), with windows of a second instead of ten. Each answer is
checked against what OMB's Java worker answered in the recording: the status, the body's keys
in their order and their JSON types, and Jackson's pretty printing byte for byte. The
histograms are decoded with HdrHistogram's Python library (hdrh; the test runs under the
python given by POLYBUS_NSQ_PEERS_DIR's pynsq venv when there is one) and their counts are the
counters'. Then the refusals: a second driver, a call before any driver, an unknown path, a
body over --max-body, more bodies at once than the worker takes, JSON nested too deep, a driver
file that is not polybus's.

    omb_worker.py POLYBUS_BINARY BROKER_NAME
"""
import base64
import http.client
import json
import os
import socket
import subprocess
import sys
import time

# The samples' expected answers, as OMB's Java worker gave them (keys in order, and types).
PERIOD_KEYS = ["messagesSent", "messageSendErrors", "bytesSent", "messagesReceived",
               "bytesReceived", "totalMessagesSent", "totalMessageSendErrors",
               "totalMessagesReceived", "publishLatency", "publishDelayLatency", "endToEndLatency"]
CUMULATIVE_KEYS = ["publishLatency", "publishDelayLatency", "endToEndLatency"]
COUNTERS_KEYS = ["messagesSent", "messagesReceived", "messageSendErrors"]
RATE = 2000.0  # messages per second: light enough for every broker under ASan beside other tests
PERIODS = 3

try:
    from hdrh.histogram import HdrHistogram
except ImportError:
    HdrHistogram = None
    # The interop peers' venv has it (tests/harness/setup-peers.sh): run again under its python.
    # A venv's python is a symlink to the python that made it, so only sys.prefix tells whether
    # this already is the venv's.
    venv = os.path.join(os.environ.get("POLYBUS_NSQ_PEERS_DIR", "/nonexistent"), "pynsq-venv")
    venv_python = os.path.join(venv, "bin", "python")
    if os.path.isfile(venv_python) and os.path.realpath(sys.prefix) != os.path.realpath(venv):
        os.execv(venv_python, [venv_python] + sys.argv)

polybus, broker_name = sys.argv[1], sys.argv[2]
processes = []


def fail(message):
    print("FAILED: " + message)
    sys.exit(1)


def start(args):
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=None, text=True)
    processes.append(process)
    line = process.stdout.readline().strip()
    if not line:
        fail(" ".join(args) + " printed nothing")
    return line


def jackson(value, indent=0):
    """Jackson's DefaultPrettyPrinter, as OMB's worker writes its answers."""
    pad = "  " * (indent + 1)
    if isinstance(value, dict):
        if not value:
            return "{ }"
        items = [pad + json.dumps(k) + " : " + jackson(v, indent + 1) for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + "  " * indent + "}"
    if isinstance(value, list):
        if not value:
            return "[ ]"
        return "[ " + ", ".join(jackson(v, indent) for v in value) + " ]"
    return json.dumps(value)


class Worker:
    def __init__(self, name):
        self.name = name
        url = start([polybus, "bench", "worker", "--listen", "127.0.0.1:0", "--max-body",
                     "1048576"])
        if not url.startswith("worker: http://127.0.0.1:"):
            fail(name + ": unexpected first line " + repr(url))
        self.host_port = url[len("worker: http://"):]
        host, port = self.host_port.rsplit(":", 1)
        # One keep-alive connection, as OMB's AsyncHttpClient keeps one per worker.
        self.connection = http.client.HTTPConnection(host, int(port), timeout=120)

    def call(self, method, path, body=None, expect=200):
        data = body if isinstance(body, (bytes, type(None))) else body.encode()
        headers = {"Accept": "*/*", "User-Agent": "AHC/2.1"}
        if method == "POST":
            headers["Content-Length"] = str(len(data or b""))
        self.connection.request(method, path, body=data, headers=headers)
        response = self.connection.getresponse()
        text = response.read().decode()
        if response.status != expect:
            fail("%s %s %s: status %d (wanted %d): %s" % (self.name, method, path,
                                                          response.status, expect, text))
        if response.getheader("Content-Type") != "text/plain;charset=utf-8":
            fail("%s %s: Content-Type %r, not OMB's worker's" % (self.name, path,
                                                                 response.getheader("Content-Type")))
        return text

    def json(self, method, path, keys=None, body=None):
        text = self.call(method, path, body)
        value = json.loads(text)
        if text != jackson(value):
            fail("%s %s: not Jackson's pretty printing:\n%s" % (self.name, path, text))
        if keys is not None:
            if list(value) != keys:
                fail("%s %s: keys %s, OMB's worker answers %s" % (self.name, path, list(value), keys))
            for key in keys:
                wanted = str if key.endswith("Latency") else int
                if not isinstance(value[key], wanted):
                    fail("%s %s: %s is %r" % (self.name, path, key, value[key]))
                if wanted is str and not value[key].startswith("HISTF"):
                    fail("%s %s: %s is not a compressed V2 histogram" % (self.name, path, key))
        return value


def histogram_count(encoded, what):
    if HdrHistogram is None:
        return None
    h = HdrHistogram.decode(encoded)
    if h.get_max_value() > (60_000_000 if "publish" in what else 43_200_000_000):
        fail(what + ": a value past the range OMB's coordinator adds into")
    return h.get_total_count()


def check_counts(stats, who, spare_sent=0, spare_received=0):
    """Every message sent has its publish latency, every message received its end-to-end one,
    but those before /reset-stats (as OMB's worker, it resets the histograms, not the counters):
    in the first period, up to `spare_sent` and `spare_received` (the probe among them)."""
    pairs = [("publishLatency", "messagesSent", spare_sent),
             ("endToEndLatency", "messagesReceived", spare_received)]
    for histogram, counter, spare in pairs:
        count = histogram_count(stats[histogram], who + " " + histogram)
        if count is not None and not stats[counter] - spare <= count <= stats[counter]:
            fail("%s: %s holds %d values for %s %d" % (who, histogram, count, counter,
                                                        stats[counter]))


def main():
    if HdrHistogram is None and os.environ.get("CI") == "true":
        fail("no hdrh in CI (tests/harness/setup-peers.sh installs it in the pynsq venv)")
    broker_url = start([polybus, "broker", broker_name])
    producer, consumer = Worker("producer worker"), Worker("consumer worker")
    workers = [producer, consumer]
    driver = "name: polybus-%s\ndriverClass: polybus\nurl: %s\n" % (broker_name, broker_url)

    for w in workers:
        w.call("POST", "/stop-all")
        w.call("POST", "/initialize-driver", driver)
    topics = producer.json("POST", "/create-topics",
                           body='{"numberOfTopics" : 1, "numberOfPartitionsPerTopic" : 1}')
    if len(topics) != 1 or not topics[0].startswith("polybus-benchmark-0000000-"):
        fail("create-topics: " + repr(topics))
    consumer.call("POST", "/create-consumers", json.dumps(
        {"topicsSubscriptions": [{"topic": topics[0], "subscription": "sub-000-VY3K4A8"}]}))
    producer.call("POST", "/create-producers", json.dumps(topics))
    producer.call("POST", "/probe-producers")
    deadline = time.monotonic() + 60
    while True:
        counters = [w.json("GET", "/counters-stats", COUNTERS_KEYS) for w in workers]
        # OMB's coordinator waits for the consumers only; the probe's own completion (after
        # the broker's answer) is waited for too, to check how it counts.
        if sum(c["messagesReceived"] for c in counters) >= 1 and counters[0]["messagesSent"]:
            break
        if time.monotonic() > deadline:
            fail("the consumer never received the probe: %s" % counters)
        time.sleep(0.1)
    if counters[0]["messagesSent"] != 1:
        fail("the probe counts once in the producer's total: %s" % counters[0])
    payload = "".join(chr(97 + i % 26) for i in range(1024)).encode()
    producer.call("POST", "/start-load", json.dumps({
        "payloadData": [base64.b64encode(payload).decode()], "publishRate": RATE,
        "keyDistributorType": "NO_KEY"}))
    for w in workers:
        w.call("POST", "/reset-stats")
    # What each had counted by just after its reset bounds what it counted before it: the load
    # started before /reset-stats, and a slow machine (TSan) sends some meanwhile.
    after_reset = [w.json("GET", "/counters-stats", COUNTERS_KEYS) for w in workers]
    sent = received = 0
    for period in range(PERIODS):
        time.sleep(1)
        p = producer.json("GET", "/period-stats", PERIOD_KEYS)
        c = consumer.json("GET", "/period-stats", PERIOD_KEYS)
        first = period == 0
        check_counts(p, "producer period %d" % period,
                     spare_sent=after_reset[0]["messagesSent"] - 1 if first else 0)  # the probe
        check_counts(c, "consumer period %d" % period,
                     spare_received=after_reset[1]["messagesReceived"] if first else 0)
        if p["messagesSent"] == 0 or p["bytesSent"] != 1024 * p["messagesSent"]:
            fail("producer period %d: %s" % (period, p))
        if c["messagesReceived"] == 0 or c["bytesReceived"] < 1024 * (c["messagesReceived"] - 1):
            fail("consumer period %d: %s" % (period, c))
        sent += p["messagesSent"]
        received += c["messagesReceived"]
        print("period %d: sent %d, received %d, errors %d" % (
            period, p["messagesSent"], c["messagesReceived"], p["messageSendErrors"]))
    # The reset by the read: the period starts again.
    again = producer.json("GET", "/period-stats", PERIOD_KEYS)
    if again["messagesSent"] > RATE / 2:
        fail("period-stats did not reset on read: %s" % again)
    cumulative = [w.json("GET", "/cumulative-latencies", CUMULATIVE_KEYS) for w in workers]
    counts = [histogram_count(cumulative[0]["publishLatency"], "publishLatency"),
              histogram_count(cumulative[1]["endToEndLatency"], "endToEndLatency")]
    if counts[0] is not None:
        if counts[0] < sent or counts[1] < received * 0.9:
            fail("cumulative histograms hold %s for %d sent, %d received" % (counts, sent,
                                                                             received))
        emptied = producer.json("GET", "/cumulative-latencies", CUMULATIVE_KEYS)
        if histogram_count(emptied["publishLatency"], "publishLatency") > RATE:
            fail("cumulative-latencies did not reset on read")
        print("histograms: hdrh reads %d publish latencies, %d end-to-end" % tuple(counts))
    else:
        print("histograms: HdrHistogram's Python library not installed, not decoded")
    # Every message arrives: the rate down to 1 msg/s, the consumer catches up (how fast depends
    # on the machine's load, so it is waited for, within a bound).
    producer.call("POST", "/adjust-publish-rate", "1.0")
    target = producer.json("GET", "/counters-stats", COUNTERS_KEYS)["messagesSent"]
    deadline = time.monotonic() + 120
    while consumer.json("GET", "/counters-stats", COUNTERS_KEYS)["messagesReceived"] < target:
        if time.monotonic() > deadline:
            fail("the consumer did not receive the %d messages sent within 120 s" % target)
        time.sleep(0.1)
    # Pause: the broker's own back-pressure holds the messages, resume delivers them.
    consumer.call("POST", "/pause-consumers")
    consumer.call("POST", "/resume-consumers")

    # Refusals, with OMB's status codes.
    producer.call("POST", "/initialize-driver", driver, expect=500)
    producer.call("GET", "/stop-all", expect=404)
    if producer.call("GET", "/no-such-endpoint", expect=404) != "Not found":
        fail("an unknown path is not answered as OMB's worker answers it")
    producer.call("POST", "/create-topics", "[" * 100 + "]" * 100, expect=500)
    producer.call("POST", "/adjust-publish-rate", "not a number", expect=500)
    started = time.monotonic()
    for w in workers:
        w.call("POST", "/stop-all")
        w.call("POST", "/stop-all")  # idempotent
    print("stop-all: %.3f s" % (time.monotonic() - started))
    after = producer.json("GET", "/counters-stats", COUNTERS_KEYS)
    if after["messagesSent"] != 0:
        fail("stop-all left the counters: %s" % after)
    producer.call("POST", "/create-producers", json.dumps(topics), expect=500)
    producer.call("POST", "/initialize-driver", "name: x\ndriverClass: io.Other\nurl: mem://x\n",
                  expect=500)
    producer.call("POST", "/initialize-driver", "{[: not yaml", expect=500)
    producer.call("POST", "/initialize-driver", driver)  # allowed again after stop-all
    producer.call("POST", "/stop-all")
    # A body declared over --max-body: 413 before it is read, and the connection closes.
    host, port = producer.host_port.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as raw:
        raw.sendall(b"POST /create-topics HTTP/1.1\r\nHost: w\r\nContent-Length: %d\r\n\r\n"
                    % (2 << 20))
        answer = b""
        while True:
            chunk = raw.recv(4096)
            if not chunk:
                break
            answer += chunk
    if not answer.startswith(b"HTTP/1.1 413 "):
        fail("a body over --max-body: " + repr(answer[:100]))
    # Bodies declared and not sent hold their bytes: four of --max-body at once, the fifth 503.
    held = []
    for i in range(5):
        raw = socket.create_connection((host, int(port)), timeout=30)
        raw.sendall(b"POST /create-topics HTTP/1.1\r\nHost: w\r\nContent-Length: %d\r\n\r\n"
                    % (1 << 20))
        held.append(raw)
    held[-1].settimeout(10)
    answer = held[-1].recv(4096)
    if not answer.startswith(b"HTTP/1.1 503 "):
        fail("a fifth body of --max-body while four are read: " + repr(answer[:100]))
    for raw in held:
        raw.close()
    print("ok: %d sent, %d received over two workers on %s" % (sent, received, broker_name))


try:
    main()
finally:
    # The workers first, then the broker their clients are connected to.
    for process in reversed(processes):
        process.terminate()
    for process in reversed(processes):
        try:
            code = process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            fail("a process did not end within 30 s of SIGTERM")
        # A clean end on SIGTERM; a sanitizer's report at exit would make it another.
        if code != 0:
            fail("%s exited %d on SIGTERM" % (" ".join(process.args), code))
