#!/usr/bin/env python3
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


def eprint(*args):
    print(*args, file=sys.stderr, flush=True)


def usage():
    eprint("usage: peer.py pub ADDR TOPIC COUNT PREFIX\n"
           "       peer.py sub ADDR TOPIC CHANNEL COUNT TIMEOUT_S\n"
           "       peer.py sub-lookupd LOOKUPD_HTTP TOPIC CHANNEL COUNT TIMEOUT_S")
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


def pub(addr, topic, count, prefix):
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
                body = ("%s-%d" % (prefix, i)).encode()
                self.pub(topic, body, callback=lambda conn, data, i=i: on_response(i, conn, data))

        def _on_connection_error(self, conn, error, **kwargs):
            super()._on_connection_error(conn, error, **kwargs)
            run.stop(1, "connection error: %s" % error)

    Writer([addr])
    return run.run()


def sub(via_lookupd, addr, topic, channel, count, timeout_s):
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
        body = message.body.decode()
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
    usage()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
