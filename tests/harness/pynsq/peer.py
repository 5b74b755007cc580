#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""pynsq peer for polybus's NSQ interoperability tests.

Uses the pynsq package (pinned in requirements.txt) to publish to, or consume from, a real nsqd.
Every peer in tests/harness has the same command line:

  pub ADDR TOPIC COUNT PREFIX
      publish COUNT messages "PREFIX-0".."PREFIX-(COUNT-1)" (one PUB each, pipelined) to nsqd at
      ADDR (host:port, TCP); exit 0 once nsqd acknowledged all of them.
  sub ADDR TOPIC CHANNEL COUNT TIMEOUT_S
      consume TOPIC/CHANNEL from nsqd at ADDR until COUNT distinct bodies arrived; print each
      distinct body once on its own line to stdout, FIN every message, exit 0; exit 1 when
      TIMEOUT_S seconds pass first. Prints the line "ready" to stderr once nsqd answered SUB.
  sub-lookupd LOOKUPD_HTTP TOPIC CHANNEL COUNT TIMEOUT_S
      the same, discovering nsqd through nsqlookupd's HTTP address (host:port); "ready" once a
      discovered nsqd answered SUB (so the topic must already exist).

With the CloudEvents Python SDK (pinned in requirements.txt), CloudEvents 1.0 in structured JSON
mode, as polybus's envelope=cloudevents writes and reads them:
  ce-pub ADDR TOPIC COUNT PREFIX
      as pub, each message the event the SDK writes for "PREFIX-i" (cloudevent_body below).
  ce-sub ADDR TOPIC CHANNEL COUNT TIMEOUT_S
      as sub, each message read by the SDK and printed as one JSON line (describe_cloudevent).

Exit codes: 0 done, 1 timeout or failure, 2 bad arguments. Logs go to stderr.
"""
import logging
import sys
import warnings

# pynsq creates its IOLoop before one runs, which tornado >= 6.2 reports as deprecated.
warnings.filterwarnings("ignore", category=DeprecationWarning)

import nsq  # noqa: E402
import tornado.ioloop  # noqa: E402

PUB_TIMEOUT_S = 30


def plain_body(prefix, i):
    return ("%s-%d" % (prefix, i)).encode()


def cloudevent_body(prefix, i):
    """Event i: text, JSON and binary data in turn; the extension correlationid is "PREFIX-i"."""
    from cloudevents.core.formats.json import JSONFormat
    from cloudevents.core.v1.event import CloudEvent
    name = "%s-%d" % (prefix, i)
    attributes = {"type": "com.example.interop", "source": "/pynsq-peer", "id": name,
                  "correlationid": name}
    if i % 3 == 0:
        attributes["datacontenttype"] = "text/plain"
        data = name
    elif i % 3 == 1:
        attributes["datacontenttype"] = "application/json"
        data = {"seq": i, "prefix": prefix}
    else:
        attributes["datacontenttype"] = "application/octet-stream"
        data = b"\x00\xff" + name.encode()
    return JSONFormat().write(CloudEvent(attributes, data))


def describe_cloudevent(body):
    """One line: the attributes but id and time, and the data as data_text (a string),
    data_json (compact, keys sorted) or data_base64 (bytes); compact JSON, keys sorted."""
    import base64
    import json
    from cloudevents.core.formats.json import JSONFormat
    event = JSONFormat().read(None, body)
    out = {k: str(v) for k, v in event.get_attributes().items() if k not in ("id", "time")}
    data = event.get_data()
    if isinstance(data, (bytes, bytearray)):
        out["data_base64"] = base64.b64encode(data).decode()
    elif isinstance(data, str):
        out["data_text"] = data
    elif data is not None:
        out["data_json"] = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return json.dumps(out, sort_keys=True, separators=(",", ":"))


def eprint(*args):
    print(*args, file=sys.stderr, flush=True)


def usage():
    eprint("usage: peer.py pub ADDR TOPIC COUNT PREFIX\n"
           "       peer.py sub ADDR TOPIC CHANNEL COUNT TIMEOUT_S\n"
           "       peer.py sub-lookupd LOOKUPD_HTTP TOPIC CHANNEL COUNT TIMEOUT_S\n"
           "       peer.py ce-pub ADDR TOPIC COUNT PREFIX\n"
           "       peer.py ce-sub ADDR TOPIC CHANNEL COUNT TIMEOUT_S")
    sys.exit(2)


def positive(text):
    try:
        n = int(text)
    except ValueError:
        usage()
    if n <= 0:
        usage()
    return n


class Run:
    """The IOLoop and the exit code it ends with."""

    def __init__(self, timeout_s, on_timeout):
        self.loop = tornado.ioloop.IOLoop.current()
        self.rc = 1
        self.loop.call_later(timeout_s, lambda: self.stop(1, on_timeout()))

    def stop(self, rc, why=None):
        if why:
            eprint("pynsq-peer:", why)
        self.rc = rc
        self.loop.stop()

    def run(self):
        self.loop.start()
        return self.rc


def pub(addr, topic, count, prefix, make_body=plain_body):
    acked = []
    run = Run(PUB_TIMEOUT_S, lambda: "timeout: %d of %d publishes acknowledged" % (len(acked), count))

    def on_response(i, conn, data):
        if isinstance(data, nsq.Error):
            run.stop(1, "publish %d failed: %s" % (i, data))
            return
        acked.append(i)
        if len(acked) == count:
            run.stop(0)

    class Writer(nsq.Writer):
        # Publishing starts once the connection is identified (pynsq's Writer connects in the
        # background and refuses to publish before).
        def _on_connection_ready(self, conn, **kwargs):
            super()._on_connection_ready(conn, **kwargs)
            if getattr(self, "started", False):
                return
            self.started = True
            for i in range(count):
                body = make_body(prefix, i)
                self.pub(topic, body, callback=lambda conn, data, i=i: on_response(i, conn, data))

        def _on_connection_error(self, conn, error, **kwargs):
            super()._on_connection_error(conn, error, **kwargs)
            run.stop(1, "connection error: %s" % error)

    Writer([addr])
    return run.run()


def sub(via_lookupd, addr, topic, channel, count, timeout_s, describe=lambda body: body.decode()):
    seen = set()
    state = {"ready": False, "closing": set()}
    run = Run(timeout_s, lambda: "timeout: %d of %d messages after %ds" % (len(seen), count, timeout_s))

    def on_response(conn, data, **kwargs):
        if data == b"OK" and not state["ready"]:
            # The first OK after IDENTIFY (no TLS/snappy/deflate/auth here) answers SUB.
            state["ready"] = True
            eprint("ready")
        elif data == b"CLOSE_WAIT":
            # nsqd handles a connection's commands in order: every FIN sent before CLS is done.
            # The process exits with the connection open; nsqd drops it.
            state["closing"].discard(conn.id)
            if not state["closing"]:
                run.stop(0)

    class Reader(nsq.Reader):
        def connect_to_nsqd(self, host, port):
            conn = super().connect_to_nsqd(host, port)
            if conn is not None:
                conn.on("response", on_response)
            return conn

    def handler(message):
        try:
            body = describe(message.body)
        except Exception as e:  # noqa: BLE001 - what the SDK refused is the test's failure
            run.stop(1, "cannot read message %r: %s" % (message.body[:200], e))
            return True
        if body in seen:
            eprint("redelivered: %s (attempt %d)" % (body, message.attempts))
        elif len(seen) < count:
            seen.add(body)
            print(body, flush=True)
        message.finish()
        if len(seen) == count and not state["closing"]:
            # Close cleanly: CLS on every connection, then wait for CLOSE_WAIT.
            for conn in list(reader.conns.values()):
                state["closing"].add(conn.id)
                conn.send(b"CLS\n")
            if not state["closing"]:
                run.stop(0)
        return True

    options = dict(topic=topic, channel=channel, message_handler=handler, max_in_flight=50)
    if via_lookupd:
        options.update(lookupd_http_addresses=[addr], lookupd_poll_interval=1)
    else:
        options.update(nsqd_tcp_addresses=[addr])
    reader = Reader(**options)
    return run.run()


def main(argv):
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING,
                        format="pynsq %(levelname)s %(message)s")
    if len(argv) == 5 and argv[0] == "pub":
        return pub(argv[1], argv[2], positive(argv[3]), argv[4])
    if len(argv) == 6 and argv[0] in ("sub", "sub-lookupd"):
        return sub(argv[0] == "sub-lookupd", argv[1], argv[2], argv[3], positive(argv[4]),
                   positive(argv[5]))
    if len(argv) == 5 and argv[0] == "ce-pub":
        return pub(argv[1], argv[2], positive(argv[3]), argv[4], make_body=cloudevent_body)
    if len(argv) == 6 and argv[0] == "ce-sub":
        return sub(False, argv[1], argv[2], argv[3], positive(argv[4]), positive(argv[5]),
                   describe=describe_cloudevent)
    usage()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
