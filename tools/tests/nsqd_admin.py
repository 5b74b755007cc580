#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""polybus broker nsqd's admin API, driven with nothing but an HTTP client and a socket, as a
test in any language would: a fault rule added over HTTP answers the second PUB with its error,
the journal lists what the connection sent and was sent, and the rule goes away again.

  nsqd_admin.py POLYBUS_BINARY
"""
import json
import socket
import struct
import subprocess
import sys
import urllib.error
import urllib.request

BOUND = 20  # seconds: a failure bound, never a wait


def fail(message):
    print("FAILED: " + message)
    sys.exit(1)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(method, url, body=None):
    request = urllib.request.Request(url, data=body.encode() if body is not None else None,
                                     method=method)
    try:
        with urllib.request.urlopen(request, timeout=BOUND) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


class Nsq:
    """NSQ's V2 protocol, as much of it as a publish takes."""

    def __init__(self, port):
        self.socket = socket.create_connection(("127.0.0.1", port), timeout=BOUND)
        self.socket.sendall(b"  V2")

    def pub(self, topic, body):
        self.socket.sendall(b"PUB " + topic.encode() + b"\n" + struct.pack(">I", len(body)) + body)
        return self.frame()

    def read(self, count):
        data = b""
        while len(data) < count:
            more = self.socket.recv(count - len(data))
            if not more:
                fail("nsqd closed the connection")
            data += more
        return data

    def frame(self):
        size, kind = struct.unpack(">Ii", self.read(8))
        return kind, self.read(size - 4).decode()


def main():
    polybus = sys.argv[1]
    tcp, http_port, admin = free_port(), free_port(), free_port()
    nsqd = subprocess.Popen([polybus, "broker", "nsqd", "--tcp-address=127.0.0.1:%d" % tcp,
                             "--http-address=127.0.0.1:%d" % http_port,
                             "--admin-address=127.0.0.1:%d" % admin],
                            stderr=subprocess.PIPE, text=True)
    try:
        # Its stderr says when it listens (the admin line comes after the listeners').
        for line in nsqd.stderr:
            if "admin (journal, faults, clock): listening on" in line:
                break
        else:
            fail("polybus broker nsqd ended: exit %s" % nsqd.wait())
        base = "http://127.0.0.1:%d" % admin
        status, body = http("POST", base + "/faults", "unit=PUB,nth=2,error=E_PUB_FAILED PUB failed")
        if status != 200:
            fail("POST /faults: %d %s" % (status, body))
        rule = json.loads(body)["id"]
        status, body = http("POST", base + "/faults", "unit=PUB,nth=0,close")
        if status != 400 or "nth and first count from 1" not in body:
            fail("a bad rule: %d %s" % (status, body))

        client = Nsq(tcp)
        answers = [client.pub("orders", b"first"), client.pub("orders", b"second"),
                   client.pub("orders", b"third")]
        if answers != [(0, "OK"), (1, "E_PUB_FAILED PUB failed"), (0, "OK")]:
            fail("answers: %s" % answers)
        if json.loads(http("GET", base + "/faults/%d" % rule)[1]) != {"id": rule, "fired": 1}:
            fail("GET /faults/%d" % rule)

        status, body = http("GET", base + "/journal")
        entries = [json.loads(line) for line in body.splitlines()]
        units = [(e["direction"], e["kind"], e.get("text", "")) for e in entries
                 if e["kind"] in ("PUB", "response", "error")]
        expected = [("in", "PUB", ""), ("out", "response", "OK"),
                    ("in", "PUB", ""), ("out", "error", "E_PUB_FAILED PUB failed"),
                    ("in", "PUB", ""), ("out", "response", "OK")]
        if status != 200 or units != expected:
            fail("journal: %d %s" % (status, body))
        if any(e.get("topic") != "orders" or e.get("bytes", 0) == 0 for e in entries
               if e["kind"] == "PUB"):
            fail("journal: a PUB without its topic or size: %s" % body)
        last = entries[-1]["seq"]
        if http("GET", base + "/journal?since=%d" % last) != (200, ""):
            fail("GET /journal?since=%d is not empty" % last)

        if http("DELETE", base + "/faults/%d" % rule)[0] != 200:
            fail("DELETE /faults/%d" % rule)
        if http("DELETE", base + "/faults/%d" % rule)[0] != 404:
            fail("DELETE of a rule gone is not 404")
        status, body = http("GET", base + "/clock")
        if status != 200 or json.loads(body)["manual"] is not False:
            fail("GET /clock of an nsqd on the real clock: %d %s" % (status, body))
        if http("POST", base + "/clock/advance?ms=1")[0] != 409:
            fail("advancing the real clock is not refused with 409")
        if http("GET", base + "/nowhere")[0] != 404:
            fail("an unknown path is not 404")
        # nsqd's own HTTP API has no such path: the admin API is on its own port only.
        if http("GET", "http://127.0.0.1:%d/journal" % http_port)[0] != 404:
            fail("nsqd's HTTP API answers /journal")
        nsqd.terminate()
        # Its output read meanwhile: a long report (a sanitizer's) must not fill the pipe.
        _, err = nsqd.communicate(timeout=BOUND)
        if nsqd.returncode != 0:  # a sanitizer's report, or a shutdown that failed
            fail("polybus broker nsqd exited %d on SIGTERM: %s" % (nsqd.returncode, err))
        print("ok: faults added and removed over HTTP, the journal read, nsqd's API untouched")
    finally:
        if nsqd.poll() is None:
            nsqd.kill()
            nsqd.wait()


main()
