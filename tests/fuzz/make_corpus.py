#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes the seed corpora under tests/fuzz/corpus/<fuzzer>/: small valid (and a few
near-valid) inputs taken from the unit tests (tests/unit, tests/quickio), in each fuzzer's input
layout (see the comment at the top of each fuzzer). Run it again after changing a layout; the
files it writes are committed, so running the fuzzers needs only the build."""
import os
import shutil
import struct
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus")

corpora = {}


def seed(fuzzer, name, data):
    if isinstance(data, str):
        data = data.encode("latin-1")
    assert len(data) < 4096, (fuzzer, name, len(data))
    corpora.setdefault(fuzzer, {})[name] = data


def split(payload, flags=0, sizes=()):
    """fuzz_util.hpp's [control][splits][payload]: no sizes means one byte at a time."""
    return bytes([(flags << 4) | len(sizes)]) + bytes(s - 1 for s in sizes) + payload


def b(s):
    return s.encode("latin-1") if isinstance(s, str) else s


# ---- NSQ ----------------------------------------------------------------------------------

def nsq_frame(ftype, body):
    body = b(body)
    return struct.pack(">ii", len(body) + 4, ftype) + body


def nsq_message(attempts, mid, payload, ts=1):
    return struct.pack(">qH", ts, attempts) + b(mid) + b(payload)


ID = "0123456789abcdef"
IDENTIFY_JSON = ('{"max_rdy_count":1000,"version":"1.3.0","max_msg_timeout":600000,"msg_timeout":30000,'
                 '"tls_v1":true,"deflate":false,"deflate_level":0,"max_deflate_level":9,"snappy":true,'
                 '"sample_rate":25,"auth_required":true,"output_buffer_size":8192,'
                 '"output_buffer_timeout":100,"topology_region":"eu","topology_zone":"eu-1a"}')
AUTH_JSON = '{"identity":"svc-orders","identity_url":"https://auth.example/u/1","permission_count":3}'
PRODUCERS = ('[{"remote_address":"10.0.0.5:52011","hostname":"nsqd-a","broadcast_address":"nsqd-a.internal",'
             '"tcp_port":4150,"http_port":4151,"version":"1.3.0","topology_zone":"","topology_region":""},'
             '{"remote_address":"10.0.0.6:40000","hostname":"nsqd-b","broadcast_address":"10.0.0.6",'
             '"tcp_port":65535,"http_port":0,"version":"1.2.1"}]')
LOOKUP = '{"channels":["archive","metrics"],"producers":' + PRODUCERS + '}'
LOOKUP_OLD = '{"status_code":200,"status_txt":"OK","data":{"channels":["a"],"producers":' + PRODUCERS + '}}'

stream = (nsq_frame(0, "OK") + nsq_frame(0, "_heartbeat_") + nsq_frame(2, nsq_message(3, ID, "hello")) +
          nsq_frame(2, nsq_message(1, ID, "world")) + nsq_frame(1, "E_FIN_FAILED FIN failed") +
          nsq_frame(0, "CLOSE_WAIT"))
seed("nsq_frame_fuzzer", "stream_bytewise", split(stream))
seed("nsq_frame_fuzzer", "stream_split_3_7", split(stream, sizes=(3, 7)))
seed("nsq_frame_fuzzer", "message_whole", split(nsq_frame(2, nsq_message(65535, ID, "x" * 100)), sizes=(256,)))
seed("nsq_frame_fuzzer", "error_frames", split(nsq_frame(1, "E_INVALID bad command") + nsq_frame(1, "E_NOPE")))
seed("nsq_frame_fuzzer", "small_max", split(nsq_frame(0, "OK") + nsq_frame(0, "x" * 40), flags=6, sizes=(5,)))
seed("nsq_frame_fuzzer", "negative_size", split(b"\xff\xff\xff\xfc\x00\x00\x00\x00"))
seed("nsq_frame_fuzzer", "truncated_message", split(nsq_frame(2, "short")))

for name, body in [("ok", "OK"), ("identify_full", IDENTIFY_JSON),
                   ("identify_future", '{"version":"9.9.9","future_field":{"nested":[1,2,3]},"another":null}'),
                   ("identify_bad", '{"max_rdy_count":-1}'), ("auth", AUTH_JSON), ("lookup", LOOKUP),
                   ("lookup_old", LOOKUP_OLD), ("not_found", '{"message":"TOPIC_NOT_FOUND"}'),
                   ("not_found_old", '{"status_code":404,"status_txt":"TOPIC_NOT_FOUND","data":null}'),
                   ("escapes", '{"client_id":"quote\\" backslash\\\\ newline\\n ctl\\u0001 nul\\u0000 end"}'),
                   ("deep", "[" * 200 + "]" * 200)]:
    seed("nsq_json_fuzzer", name, body)


def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def varint(n):
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def snappy_literal(data):
    """A snappy block of one literal (valid, uncompressed in effect)."""
    n = len(data) - 1
    if n < 60:
        tag = bytes([n << 2])
    else:
        tag = bytes([60 << 2, n])
    return varint(len(data)) + tag + data


def snappy_chunk(ctype, data, body):
    chunk = struct.pack("<I", masked(data)) + body
    return bytes([ctype]) + struct.pack("<I", len(chunk))[:3] + chunk


SNAPPY_ID = b"\xff\x06\x00\x00sNaPpY"
plain = nsq_frame(0, "OK") + nsq_frame(2, nsq_message(1, ID, "compressed"))
snappy_stream = (SNAPPY_ID + snappy_chunk(0, plain[:30], snappy_literal(plain[:30])) +
                 snappy_chunk(1, plain[30:], plain[30:]) + b"\xfe\x03\x00\x00pad" +
                 b"\x80\x01\x00\x00s")
seed("nsq_snappy_fuzzer", "stream_bytewise", split(snappy_stream))
seed("nsq_snappy_fuzzer", "stream_split", split(snappy_stream, sizes=(4, 11)))
seed("nsq_snappy_fuzzer", "bad_checksum", split(SNAPPY_ID + b"\x01\x06\x00\x00\x00\x00\x00\x00ab"))
seed("nsq_snappy_fuzzer", "roundtrip", split(plain * 3, flags=1, sizes=(17, 100)))
seed("nsq_snappy_fuzzer", "small_limit", split(snappy_stream, flags=2, sizes=(256,)))

raw_deflate = zlib.compressobj(6, zlib.DEFLATED, -15)
deflated = raw_deflate.compress(plain) + raw_deflate.flush(zlib.Z_SYNC_FLUSH)
deflated += raw_deflate.compress(b"more " * 50) + raw_deflate.flush(zlib.Z_SYNC_FLUSH)
ended = zlib.compressobj(9, zlib.DEFLATED, -15)
ended_stream = ended.compress(b"end") + ended.flush(zlib.Z_FINISH)
bomb = zlib.compressobj(9, zlib.DEFLATED, -15)
bomb_stream = bomb.compress(b"\0" * 200000) + bomb.flush(zlib.Z_SYNC_FLUSH)
seed("nsq_deflate_fuzzer", "stream_bytewise", split(deflated))
seed("nsq_deflate_fuzzer", "stream_split", split(deflated, sizes=(9, 33)))
seed("nsq_deflate_fuzzer", "final_block_then_data", split(ended_stream + b"x"))
seed("nsq_deflate_fuzzer", "bomb", split(bomb_stream, flags=2, sizes=(256,)))
seed("nsq_deflate_fuzzer", "roundtrip", split(plain * 3, flags=1 | 8, sizes=(17, 100)))

for i, (name, resp) in enumerate([
        ("lookup_length", "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
         % (len(LOOKUP), LOOKUP)),
        ("chunked_404", "HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"),
        ("to_close", "HTTP/1.0 200 OK\r\nX: y\r\n\r\n" + LOOKUP_OLD),
        ("bad_status", "HTTP/1.1 abc OK\r\n\r\n"),
        ("short_body", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")]):
    seed("nsq_lookupd_http_fuzzer", name + "_bytewise", split(b(resp)))
    seed("nsq_lookupd_http_fuzzer", name + "_split", split(b(resp), flags=i % 16, sizes=(7, 50)))

# The session's operation stream (nsq_session_fuzzer.cpp): byte 0 config, then op bytes.
def op_frame(ftype, body):
    body = b(body)
    return bytes([1, ftype, len(body)]) + body

seed("nsq_session_fuzzer", "plain_ok_then_messages",
     bytes([0]) + bytes([2, 0xff]) + bytes([7, 1, 3]) + ID.encode() + bytes([5]) + b"hello" +
     bytes([6, 11, 10, 2, 1, 8, 2, 0, 11]))
seed("nsq_session_fuzzer", "negotiated_json",
     bytes([0]) + bytes([2, 0x00, 0x03, 0xe8]) + bytes([10, 0, 1, 1, 10, 1, 0, 0, 0, 9]) +
     bytes([7, 5, 2]) + ID.encode() + bytes([0, 12]) + nsq_frame(0, "_heartbeat_"))
seed("nsq_session_fuzzer", "snappy_in_one_read", bytes([2]) + bytes([9, 1, 1]) + bytes([7, 1, 1]) + ID.encode() +
     bytes([3]) + b"abc" + bytes([11]))
seed("nsq_session_fuzzer", "deflate_in_one_read", bytes([4]) + bytes([9, 0, 0]) + bytes([6, 7, 1, 1]) + ID.encode() +
     bytes([0, 10, 6, 1, 4]) + b"body" + bytes([11]))
seed("nsq_session_fuzzer", "tls_then_auth", bytes([1 | 8]) + bytes([2, 0x09, 0, 10]) + bytes([3, 4]) +
     bytes([5, 1]) + bytes([7, 0, 0]) + ID.encode() + bytes([0]))
seed("nsq_session_fuzzer", "raw_stream", bytes([0, 12]) + nsq_frame(0, "OK") + stream)

# nsq_testing_server_fuzzer: byte 0 the target, then [control][splits][payload].
ident = b'{"client_id":"worker-1","hostname":"host.example","feature_negotiation":true,"heartbeat_interval":30000,"snappy":true,"deflate":true,"deflate_level":6,"msg_timeout":60000}'
commands = (b"IDENTIFY\n" + struct.pack(">I", len(ident)) + ident + b"SUB topic ch#ephemeral\n" + b"RDY 100\n" +
            b"PUB topic\n" + struct.pack(">I", 5) + b"hello" + b"MPUB t\n" + struct.pack(">II", 4 + 4 + 2, 1) +
            struct.pack(">I", 2) + b"hi" + b"FIN " + ID.encode() + b"\r\n" + b"REQ " + ID.encode() + b" 1000\n" +
            b"NOP\nCLS\n")
seed("nsq_testing_server_fuzzer", "commands_bytewise", bytes([0]) + split(commands))
seed("nsq_testing_server_fuzzer", "commands_split", bytes([0]) + split(commands, sizes=(3, 17)))
seed("nsq_testing_server_fuzzer", "bad_size", bytes([0]) + split(b"PUB t\n\xff\xff\xff\xff"))
seed("nsq_testing_server_fuzzer", "encoders", bytes([1]) + split(bytes([0, 0, 4]) + b"w-1x" + bytes([1]) + b"h" +
     bytes([0, 0, 0x75, 0x30, 1]) + bytes([1, 1]) + b"0123456789abcdef" + bytes([3]) + b"abc" +
     bytes([3, 2]) + b"0123456789abcdef" + bytes([2, 2]) + b"ab" + bytes([0]) +
     bytes([5, 0]) + b"0123456789abcdef" + bytes([0, 0, 0, 9]), sizes=(5,)))
for i, j in enumerate([ident, b'{"heartbeat_interval":-1,"output_buffer_size":-1,"sample_rate":0}', b'null',
                       b'{"CLIENT_ID":"x","client_id":"y","msg_timeout":999}', b'{"tls_v1":1}',
                       b'{"deflate_level":1e3}', b'"<&>\xff"']):
    seed("nsq_testing_server_fuzzer", "identify_%d" % i, bytes([2]) + split(j, sizes=(256,)))
lookup_req = (b"GET /lookup?topic=t%20x&x=1 HTTP/1.1\r\nHost: l\r\n\r\n" +
              b"POST /topic/create?topic=a HTTP/1.1\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc" +
              b"GET /ping HTTP/1.0\r\n\r\n")
seed("nsq_testing_server_fuzzer", "http_bytewise", bytes([3]) + split(lookup_req))
seed("nsq_testing_server_fuzzer", "http_chunked", bytes([3]) + split(
    b"POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", sizes=(9,)))
lookup_identify = b'{"broadcast_address":"127.0.0.1","hostname":"h","tcp_port":4150,"http_port":4151,"version":"1.3.0"}'
lookup_v1 = (b"  V1PING\nIDENTIFY\n" + struct.pack(">I", len(lookup_identify)) + lookup_identify +
             b"REGISTER orders billing\nREGISTER t\nUNREGISTER orders billing\nUNREGISTER t\nPING\n")
seed("nsq_testing_server_fuzzer", "lookup_v1_bytewise", bytes([4]) + split(lookup_v1))
seed("nsq_testing_server_fuzzer", "lookup_v1_split", bytes([4]) + split(lookup_v1, sizes=(5, 11)))
seed("nsq_testing_server_fuzzer", "lookup_v1_bad", bytes([4]) + split(
    b"  V1IDENTIFY\n\x7f\xff\xff\xff" + b"REGISTER bad! c\n"))

# ---- Figg ---------------------------------------------------------------------------------

def figg(mtype, payload, version=1):
    return struct.pack(">HHI", mtype, version, len(payload)) + payload


def field(data):
    data = b(data)
    return struct.pack(">I", len(data)) + data


attach = figg(1, struct.pack(">H", 0x8000) + field("orders") + struct.pack(">Q", 42))
attached = figg(2, field("orders") + struct.pack(">Q", 7))
detach = figg(3, field("orders"))
detached = figg(4, field("orders"))
publish = figg(5, field("orders") + struct.pack(">Q", 1) + field("payload"))
ack = figg(6, struct.pack(">Q", 1))
data = figg(7, field("orders") + struct.pack(">Q", 8) + field("hello"))
ping = figg(8, struct.pack(">Q", 123))
pong = figg(9, struct.pack(">Q", 123))
all_figg = attach + attached + detach + detached + publish + ack + data + ping + pong
seed("figg_codec_fuzzer", "all_types_bytewise", split(all_figg))
seed("figg_codec_fuzzer", "all_types_split", split(all_figg, sizes=(3, 13, 64)))
seed("figg_codec_fuzzer", "small_max", split(all_figg, flags=6, sizes=(256,)))
seed("figg_codec_fuzzer", "unknown_and_trailing", split(figg(77, b"xyz") + figg(6, struct.pack(">Q", 1) + b"!")))

# figg_client_fuzzer: window, max_payload choice, then ops.
seed("figg_client_fuzzer", "publish_ack", bytes([4, 0]) + bytes([3, 0, 0, 0, 2]) + b"\x00hi\x00" +
     bytes([2, 2]) + b"yo\x01" + bytes([8, 6, 0, 0, 0, 0, 7, 0, 0, 1, 0, 0]) + bytes([8]))
seed("figg_client_fuzzer", "data_and_attached", bytes([2, 1]) + bytes([3, 1, 0, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0]) +
     bytes([6, 1, 0, 2, 0, 0, 0, 0, 0, 0, 0, 9, 0]) + bytes([6, 0, 0, 1, 3]) + b"abc" + bytes([0, 0, 0, 0, 0, 0, 0, 1, 0]) +
     bytes([4, 0, 6, 0, 0, 3, 0, 1, 9]))
seed("figg_client_fuzzer", "raw", bytes([1, 3, 0, 6, 0, 0, 6, 40]) + all_figg[:41])

# ---- QuickIO ------------------------------------------------------------------------------

events = ["/some/path:123={\"a\":[1,2]}", "/qio/ohai:0=null", "/a-b_c/D9:18446744073709551615=\"x=y:z\"",
          "/qio/callback/1:0={\"code\":404,\"data\":null,\"err_msg\":\"no such event\"}",
          "/qio/on:1=\"/news\"", "/path:12null", "/pa th:1=null", "/news/:0=[1,2]", "a//b/"]
for i, e in enumerate(events):
    seed("quickio_event_fuzzer", "event_%d" % i, e)
seed("quickio_event_fuzzer", "lines", "/a:0=1\n/b:0=2\n\n/c:0=3\n")

for i, j in enumerate(['{"code":200,"data":null}', '{"code":500,"data":{"k":[1,2.5,"s"]},"err_msg":"no"}',
                       '"caf\xc3\xa9 \\u00e9 \\ud83d\\ude00"', "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xc0\xaf",
                       '{"code":202}', '{"code":"200"}', "[" * 100 + "]" * 100, "null\0junk", ' 1e400 ']):
    seed("quickio_json_fuzzer", "json_%d" % i, j)


def raw(event):
    event = b(event)
    return struct.pack(">Q", len(event)) + event


raw_stream = b"".join(raw(e) for e in events[:5])
seed("quickio_raw_frame_fuzzer", "frames_bytewise", split(raw_stream))
seed("quickio_raw_frame_fuzzer", "frames_split", split(raw_stream, sizes=(5, 9, 30)))
seed("quickio_raw_frame_fuzzer", "empty_frame", split(struct.pack(">Q", 0)))
seed("quickio_raw_frame_fuzzer", "too_large", split(raw(events[0]), flags=7, sizes=(256,)))

http_bodies = ["HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 12\r\n\r\n/a:0=1\n/b:0=2",
               "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
               "HTTP/1.1 200 OK\r\n\r\n/qio/callback/1:0={\"code\":200,\"data\":\"host.example:8081\"}\n/a:0=1",
               "HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n",
               "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", "NOT HTTP\r\n\r\n"]
for i, r in enumerate(http_bodies):
    seed("quickio_http_fuzzer", "http_%d_bytewise" % i, split(b(r)))
    seed("quickio_http_fuzzer", "http_%d_split" % i, split(b(r), flags=i % 16, sizes=(11, 64)))
seed("quickio_http_fuzzer", "host_answer_url", split(b"ws://[::1]:9000/x"))

# quickio_session_fuzzer: config byte, then ops (connect, handshake, listen, send, events...).
seed("quickio_session_fuzzer", "open_listen_events",
     bytes([0, 5, 1, 0, 0, 0, 1, 0, 11, 1, 8, 0, 3, 1, 1, 3, 2, 8, 2, 0, 0, 4, 0, 0, 11, 1, 13, 0]))
seed("quickio_session_fuzzer", "queued_then_callbacks",
     bytes([2, 3, 1, 3, 1, 2, 6, 0, 0, 1, 0, 3, 1, 0, 1, 0, 1, 11, 1, 8, 1, 0, 0, 1, 1, 8, 1, 1, 1, 0]))
seed("quickio_session_fuzzer", "move_and_heartbeat", bytes([0, 0, 1, 0, 9, 1, 1, 1, 2, 1, 11, 1]))
seed("quickio_session_fuzzer", "raw_bytes", bytes([4, 0, 1, 3, 10, 20]) + raw("/a:0=1") + b"junk")

seed("quickio_ws_wire_fuzzer", "upgrade_ohai_events", bytes([16, 3, 0, 1, 0, 0, 1, 0x81, 0, 3]) + b"abc" +
     bytes([0, 2, 0, 0, 0]))
seed("quickio_ws_wire_fuzzer", "upgrade_split_frames", bytes([0, 40, 2, 0, 1, 7, 0, 0, 1, 0x88, 1, 2]) + b"\x03\xe8")
seed("quickio_ws_wire_fuzzer", "no_subprotocol", bytes([2, 10, 2, 0, 0]))
seed("quickio_ws_wire_fuzzer", "refused", bytes([4, 0x01, 0x94, 5, 0]))

# ---- MemoDB -------------------------------------------------------------------------------

VERSION = bytes.fromhex("666d656d6f3031")
ready = bytes([0x84]) + VERSION + bytes([0x01, 0x40, 0x82, 0x64]) + b"echo" + bytes([0x68]) + b"alive.tv"
job = bytes([0x85]) + VERSION + bytes([0x02, 0x44]) + b"\x00\x01\x02\x03" + bytes([0x64]) + b"echo" + \
    bytes([0x19, 0x27, 0x10]) + b"payload"
result = bytes([0x84]) + VERSION + bytes([0x03, 0x44]) + b"\x00\x01\x02\x03" + bytes([0xf5]) + b"result"
result3 = bytes([0x83]) + VERSION + bytes([0x03, 0x40]) + b"r"
heartbeat = bytes([0x83]) + VERSION + bytes([0x04, 0x44]) + b"\x00\x01\x02\x03"
disconnect = bytes([0x83]) + VERSION + bytes([0x05, 0x40])
for name, msg in [("ready", ready), ("job", job), ("result", result), ("result3", result3),
                  ("heartbeat", heartbeat), ("disconnect", disconnect),
                  ("job_long_timeout", job.replace(bytes([0x19, 0x27, 0x10]), bytes([0x1b]) + b"\x00" * 7 + b"\x01")),
                  ("indefinite", bytes([0x9f]) + VERSION + bytes([0x04, 0x40, 0xff])),
                  ("non_shortest", bytes([0x98, 0x03]) + VERSION + bytes([0x18, 0x04, 0x40]))]:
    seed("memodb_codec_fuzzer", name, msg)

# The SP layer: the peer's header, then framed messages (a request ID or backtrace in front).
REQ0 = b"\x00SP\x00\x00\x30\x00\x00"
REP0 = b"\x00SP\x00\x00\x31\x00\x00"


def sp_frame(body, ipc=False):
    return (b"\x01" if ipc else b"") + struct.pack(">Q", len(body)) + body


request = b"\x80\x00\x00\x07" + job
via_device = b"\x00\x00\x00\x02\x80\x00\x00\x07" + ready
for ipc in (False, True):
    flags = 1 if ipc else 0
    kind = "ipc" if ipc else "tcp"
    seed("memodb_sp_fuzzer", "req0_" + kind, split(REQ0 + sp_frame(request, ipc) + sp_frame(via_device, ipc), flags))
    seed("memodb_sp_fuzzer", "rep0_" + kind, split(REP0 + sp_frame(b"\x80\x00\x00\x07" + result3, ipc), flags, (3, 9)))
    seed("memodb_sp_fuzzer", "empty_" + kind, split(REQ0 + sp_frame(b"", ipc) + sp_frame(b"\x80", ipc), flags))
    seed("memodb_sp_fuzzer", "over_limit_" + kind, split(REQ0 + sp_frame(b"x" * 65, ipc), flags | 2))
seed("memodb_sp_fuzzer", "huge_length", split(REQ0 + b"\xff" * 8 + b"x"))
seed("memodb_sp_fuzzer", "ipc_bad_type", split(REQ0 + b"\x02" + struct.pack(">Q", 1) + b"x", 1))
seed("memodb_sp_fuzzer", "not_sp", split(b"GET / HTTP/1.1\r\n\r\n"))

# ---- core ---------------------------------------------------------------------------------

CE = '"specversion":"1.0","id":"1","source":"/s","type":"t"'
for i, event in enumerate([
        '{' + CE + ',"datacontenttype":"text/plain; charset=utf-8","data":"hello \\u00e9 \\n"}',
        '{' + CE + ',"datacontenttype":"application/json","data":{"a":[1,2.5e3,null,true]}}',
        '{' + CE + ',"datacontenttype":"application/octet-stream","data_base64":"AP/+"}',
        '{' + CE + ',"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01","n":5,"b":false}',
        '{' + CE + ',"data":42}',
        '{' + CE + ',"data":"only text"}',
        '{' + CE + ',"datacontenttype":"application/json","data_base64":"e30="}',
        '{"specversion":"1.0","id":"1","source":"","type":"t"}',
        '{' + CE + ',"data":[[[[[[1]]]]]]}',
        'raw payload, not an envelope']):
    seed("core_cloudevents_fuzzer", "event_%d" % i, bytes([i % 2 and 2 or 31]) + event.encode())

for i, u in enumerate(["nsq://a:4150,b.example:4151?max_in_flight=10&client_id=x%20y",
                       "memodb+tcp://[::1]:12701", "memodb+ipc:///tmp/memodb.socket", "mem://demo",
                       "nsq:///path", "nsq+lookupd://l:4161?lookupd_poll_interval=15s&snappy=true",
                       "quickio+ws://h:8080/qio?heartbeat_timeout=1m&payload=json",
                       "figg://h:7000?op_timeout=250ms&reconnect_backoff=full_jitter",
                       "quickio://h?reconnect_initial=0&reconnect_max=1h", "bad url", "x://a:99999",
                       "nsq://h?deflate=true&deflate_level=9&tls=yes&max_frame_size=1024", "-90s"]):
    seed("core_url_fuzzer", "url_%d" % i, u)

for i, rule in enumerate(["unit=FIN,nth=3,error=E_FIN_FAILED FIN failed",
                          "unit=SUB,topic=t,channel=c,delay=2000",
                          "unit=message,probability=0.25,seed=7,duplicate",
                          "unit=*,connection=2,every,after=100,close", "unit=PUB,first=2,fatal,error=E",
                          "unit=message,once,swallow", "unit=RDY,reset", "unit=FIN,nth=0,close",
                          "unit=FIN,probability=1.5,close", "error=x,unit=FIN", "unit=,close"]):
    seed("core_fault_rule_fuzzer", "rule_%d" % i, rule)


def main():
    if os.path.isdir(OUT):
        shutil.rmtree(OUT)
    total = 0
    for fuzzer, files in sorted(corpora.items()):
        os.makedirs(os.path.join(OUT, fuzzer))
        for name, data in sorted(files.items()):
            with open(os.path.join(OUT, fuzzer, name), "wb") as f:
                f.write(data)
            total += len(data)
    assert total < 1 << 20, total
    print("%d fuzzers, %d files, %d bytes" % (len(corpora), sum(len(f) for f in corpora.values()), total))


if __name__ == "__main__":
    main()
