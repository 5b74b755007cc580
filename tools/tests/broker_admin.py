#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""`polybus broker NAME --fault RULE --journal FILE --admin-address A --manual-clock`, driven with
nothing but an HTTP client and a socket, as a test in any language would, on the in-process
QuickIO server (its raw TCP carrier is a few lines of Python): the rule from the command line
answers the first request with its error, the admin API adds and counts rules, the journal is
served and written to the file, and a request nobody answers expires only when the test
advances the clock, before the advance is answered. Then every other in-process broker's admin
API answers the same calls, and `polybus broker nsqlookupd` takes the same flags.

  broker_admin.py POLYBUS_BINARY
"""
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request

BOUND = 20  # seconds: a failure bound, never a wait
EXPIRY_MS = 15000  # the QuickIO server's callback_expiry


def fail(message):
    print("FAILED: " + message)
    sys.exit(1)


def http(method, url, body=None):
    request = urllib.request.Request(url, data=body.encode() if body is not None else None,
                                     method=method)
    try:
        with urllib.request.urlopen(request, timeout=BOUND) as answer:
            return answer.status, answer.read().decode(), answer.headers
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(), error.headers


class QuickIO:
    """QuickIO's raw TCP carrier: "/qio/ohai", then events framed by an 8-byte length."""

    def __init__(self, port):
        self.socket = socket.create_connection(("127.0.0.1", port), timeout=BOUND)
        self.socket.sendall(b"/qio/ohai")
        if self.read(9) != b"/qio/ohai":
            fail("no QuickIO handshake")

    def send(self, event):
        data = event.encode()
        self.socket.sendall(struct.pack(">Q", len(data)) + data)

    def read(self, count):
        data = b""
        while len(data) < count:
            more = self.socket.recv(count - len(data))
            if not more:
                fail("the server closed the connection")
            data += more
        return data

    def next(self):
        while True:
            (size,) = struct.unpack(">Q", self.read(8))
            event = self.read(size).decode()
            if not event.startswith("/qio/heartbeat"):
                return event


def start(command, marker):
    """The broker's process and its admin API's base URL, from the line `marker` begins."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for line in process.stderr:
        if marker in line:
            return process, "http://" + line.split("listening on ")[1].strip()
    fail("%s ended: exit %s" % (" ".join(command), process.wait()))


def stop(process):
    process.terminate()
    # Its output read meanwhile: a long report (a sanitizer's) must not fill the pipe and stall it.
    _, err = process.communicate(timeout=BOUND)
    if process.returncode != 0:  # a sanitizer's report, or a shutdown that failed
        fail("exit %d on SIGTERM: %s" % (process.returncode, err))


def every_broker(polybus):
    names = ["mem", "nsq", "nsq+lookupd", "figg", "figg-quirks", "quickio+ws", "quickio+http",
             "memodb+tcp", "memodb+ipc"]
    for name in names:
        process, admin = start([polybus, "broker", name, "--admin-address", "127.0.0.1:0",
                                "--manual-clock", "--fault", "unit=*,probability=0,seed=1,close"],
                               "admin (journal, faults, clock): listening on ")
        try:
            status, body, _ = http("GET", admin + "/clock")
            if status != 200 or json.loads(body)["manual"] is not True:
                fail("%s: GET /clock: %d %s" % (name, status, body))
            before = json.loads(body)["now_ns"]
            status, body, _ = http("POST", admin + "/clock/advance?ms=60000")
            if status != 200 or json.loads(body)["now_ns"] != before + 60 * 10**9:
                fail("%s: POST /clock/advance: %d %s" % (name, status, body))
            if http("GET", admin + "/faults/1")[:2] != (200, '{"id":1,"fired":0}\n'):
                fail("%s: GET /faults/1" % name)
            if http("GET", admin + "/journal")[0] != 200:
                fail("%s: GET /journal" % name)
            stop(process)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()


def nsqlookupd(polybus):
    http_port = free_port()
    process, admin = start([polybus, "broker", "nsqlookupd", "-tcp-address=127.0.0.1:0",
                            "-http-address=127.0.0.1:%d" % http_port,
                            "-admin-address=127.0.0.1:0", "-fault=unit=/lookup,once,error=500 down"],
                           "[nsqlookupd] admin (journal, faults, clock): listening on ")
    try:
        lookup = "http://127.0.0.1:%d/lookup?topic=t" % http_port
        first, second = http("GET", lookup), http("GET", lookup)
        if first[:2] != (500, '{"message":"down"}') or second[0] != 404:
            fail("nsqlookupd's /lookup: %s then %s" % (first[:2], second[:2]))
        _, body, _ = http("GET", admin + "/journal")
        statuses = [e.get("count") for e in map(json.loads, body.splitlines())
                    if e["direction"] == "out"]
        if statuses != [500, 404]:
            fail("nsqlookupd's journal: %s" % body)
        stop(process)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    polybus = sys.argv[1]
    journal_file = os.path.join(tempfile.mkdtemp(prefix="polybus-broker-admin-"), "journal.jsonl")
    broker = subprocess.Popen(
        [polybus, "broker", "quickio", "--admin-address", "127.0.0.1:0", "--manual-clock",
         "--journal", journal_file, "--fault", "unit=/svc,once,error=503 busy"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        admin = None
        for line in broker.stderr:
            if "admin (journal, faults, clock): listening on " in line:
                admin = "http://" + line.split("listening on ")[1].strip()
                break
        if admin is None:
            fail("polybus broker quickio ended: exit %s" % broker.wait())
        url = broker.stdout.readline().strip()
        if not url.startswith("quickio://127.0.0.1:"):
            fail("printed URL: %r" % url)
        port = int(url[len("quickio://127.0.0.1:"):])

        responder, requester = QuickIO(port), QuickIO(port)
        responder.send('/qio/on:1="/svc"')
        if not responder.next().startswith('/qio/callback/1:0={"code":200'):
            fail("/qio/on was not answered 200")
        requester.send("/svc:2=null")  # the command line's rule answers it
        answer = requester.next()
        if answer != '/qio/callback/2:0={"code":503,"data":null,"err_msg":"busy"}':
            fail("the first request: %s" % answer)
        status, body, _ = http("GET", admin + "/faults/1")
        if status != 200 or json.loads(body) != {"id": 1, "fired": 1}:
            fail("GET /faults/1: %d %s" % (status, body))

        status, body, _ = http("GET", admin + "/clock")
        clock = json.loads(body)
        if status != 200 or clock["manual"] is not True:
            fail("GET /clock: %d %s" % (status, body))
        requester.send("/svc:3=null")  # relayed, and never answered
        if not responder.next().startswith("/svc:"):
            fail("the second request was not relayed")
        status, body, _ = http("POST", admin + "/clock/advance?ms=%d" % (EXPIRY_MS - 1))
        if status != 200 or json.loads(body)["now_ns"] != clock["now_ns"] + (EXPIRY_MS - 1) * 10**6:
            fail("POST /clock/advance: %d %s" % (status, body))
        expired = '/qio/callback/3:0={"code":500,"data":null,"err_msg":"callback expired"}'

        def answers_to(callback):
            _, lines, _ = http("GET", admin + "/journal")
            return [e for e in map(json.loads, lines.splitlines())
                    if e["direction"] == "out" and e["kind"] == "/qio/callback"
                    and e.get("id") == str(callback)]

        if answers_to(3):
            fail("the request expired before its time")
        http("POST", admin + "/clock/advance?ms=1")
        if len(answers_to(3)) != 1:  # answered before the advance was
            fail("the request did not expire with the advance")
        if requester.next() != expired:
            fail("the requester was not told of the expiry")

        status, body, headers = http("PUT", admin + "/clock/advance?ms=1")
        if status != 405 or headers.get("Allow") != "POST":
            fail("PUT /clock/advance: %d, Allow %s" % (status, headers.get("Allow")))
        if http("POST", admin + "/clock/advance?ms=x")[0] != 400:
            fail("a bad span is not 400")
        with open(journal_file) as f:
            written = [json.loads(line) for line in f]
        if not any(e["kind"] == "/qio/on" and e["direction"] == "in" for e in written):
            fail("the journal file lacks the /qio/on: %s" % written)

        stop(broker)
        every_broker(polybus)
        nsqlookupd(polybus)
        print("ok: a rule from the command line, the admin API's rules, journal and clock, on "
              "every broker and nsqlookupd")
    finally:
        if broker.poll() is None:
            broker.kill()
            broker.wait()


main()
