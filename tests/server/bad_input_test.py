#!/usr/bin/env python3
"""Bad input on raw sockets against `mmdoc serve`: an oversized or too
short length, a message cut short, an opcode it does not speak, invalid
BSON, a bad checksum, unknown flag bits, an unknown command, a legacy
query that is not a command, too many connections. Each gets an error
reply (or, where no reply is possible, a closed connection and a log
line), and the server keeps answering everyone else.
Usage: bad_input_test.py MMDOC"""
import os
import socket
import struct
import sys
import time
import traceback

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_util import Server  # noqa: E402

import bson  # noqa: E402  (python3-bson, with python3-pymongo)

OP_REPLY, OP_QUERY, OP_MSG = 1, 2004, 2013


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def frame(op, payload, request_id=7, length=None):
    n = 16 + len(payload) if length is None else length
    return struct.pack("<iiii", n, request_id, 0, op) + payload


def op_msg(doc, flags=0, request_id=7, checksum=None, raw_body=None):
    body = raw_body if raw_body is not None else bson.BSON.encode(doc)
    payload = struct.pack("<I", flags) + b"\x00" + body
    if flags & 1:
        msg = frame(OP_MSG, payload + b"\0\0\0\0", request_id)
        crc = crc32c(msg[:-4]) if checksum is None else checksum
        return msg[:-4] + struct.pack("<I", crc)
    return frame(OP_MSG, payload, request_id)


def connect(srv):
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    return s


def recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            return buf
        buf += chunk
    return buf


def read_reply(s):
    """(opcode, responseTo, document) of the next reply; None when closed."""
    head = recv_exact(s, 16)
    if len(head) < 16:
        return None
    length, _, response_to, op = struct.unpack("<iiii", head)
    rest = recv_exact(s, length - 16)
    if op == OP_MSG:
        assert rest[4] == 0, "reply section kind %d" % rest[4]
        return op, response_to, bson.BSON(rest[5:]).decode()
    if op == OP_REPLY:
        return op, response_to, bson.BSON(rest[20:]).decode()
    raise AssertionError("reply opcode %d" % op)


def closed(s):
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True


def ping(srv):
    s = connect(srv)
    s.sendall(op_msg({"ping": 1, "$db": "admin"}, request_id=99))
    r = read_reply(s)
    s.close()
    assert r is not None and r[1] == 99 and r[2]["ok"] == 1.0, r


def test_oversized_length(srv):
    s = connect(srv)
    s.sendall(frame(OP_MSG, b"", length=48000001))
    op, _, doc = read_reply(s)
    assert doc["ok"] == 0 and "over the limit of 48000000" in doc["errmsg"], doc
    assert closed(s)


def test_short_length(srv):
    s = connect(srv)
    s.sendall(frame(OP_MSG, b"", length=5))
    op, _, doc = read_reply(s)
    assert doc["ok"] == 0 and "shorter than its header" in doc["errmsg"], doc
    assert closed(s)


def test_truncated_message(srv):
    s = connect(srv)
    whole = op_msg({"ping": 1, "$db": "admin"})
    s.sendall(whole[: len(whole) - 5])
    s.shutdown(socket.SHUT_WR)  # the rest never comes
    assert read_reply(s) is None
    s.close()


def test_bad_opcode(srv):
    s = connect(srv)
    s.sendall(frame(2002, b"\0\0\0\0test.c\0" + bson.BSON.encode({"a": 1})))  # OP_INSERT
    op, _, doc = read_reply(s)
    assert doc["ok"] == 0 and "unsupported opcode 2002" in doc["errmsg"], doc
    assert closed(s)


def test_invalid_bson_keeps_connection(srv):
    s = connect(srv)
    good = bson.BSON.encode({"ping": 1, "$db": "admin"})
    bad = good[:4] + b"\x7f" + good[5:]  # an element type that does not exist
    s.sendall(op_msg(None, raw_body=bad, request_id=11))
    op, to, doc = read_reply(s)
    assert to == 11 and doc["ok"] == 0 and doc["code"] == 22, doc
    short = struct.pack("<i", 200) + good[4:]  # a length past the message
    s.sendall(op_msg(None, raw_body=short, request_id=12))
    op, to, doc = read_reply(s)
    assert to == 12 and doc["ok"] == 0, doc
    s.sendall(op_msg({"ping": 1, "$db": "admin"}, request_id=13))
    op, to, doc = read_reply(s)
    assert to == 13 and doc["ok"] == 1.0, doc
    s.close()


def test_checksum(srv):
    s = connect(srv)
    s.sendall(op_msg({"ping": 1, "$db": "admin"}, flags=1, request_id=21))
    assert read_reply(s)[2]["ok"] == 1.0
    s.sendall(op_msg({"ping": 1, "$db": "admin"}, flags=1, request_id=22, checksum=12345))
    op, to, doc = read_reply(s)
    assert to == 22 and doc["ok"] == 0 and "checksum" in doc["errmsg"], doc
    s.close()


def test_unknown_required_flag(srv):
    s = connect(srv)
    s.sendall(op_msg({"ping": 1, "$db": "admin"}, flags=1 << 4, request_id=31))
    op, to, doc = read_reply(s)
    assert doc["ok"] == 0 and "flag" in doc["errmsg"], doc
    s.close()


def test_unknown_command_and_missing_db(srv):
    s = connect(srv)
    s.sendall(op_msg({"frobnicate": 1, "$db": "admin"}, request_id=41))
    op, to, doc = read_reply(s)
    assert doc["code"] == 59 and doc["codeName"] == "CommandNotFound", doc
    s.sendall(op_msg({"ping": 1}, request_id=42))  # no $db
    op, to, doc = read_reply(s)
    assert doc["ok"] == 0 and "$db" in doc["errmsg"], doc
    s.sendall(op_msg({}, request_id=43))
    assert read_reply(s)[2]["ok"] == 0
    s.close()


def test_more_to_come_gets_no_reply(srv):
    s = connect(srv)
    insert = {"insert": "c", "documents": [{"_id": "mtc"}], "$db": "bad",
              "writeConcern": {"w": 0}}
    s.sendall(op_msg(insert, flags=2, request_id=51))
    s.sendall(op_msg({"count": "c", "query": {"_id": "mtc"}, "$db": "bad"}, request_id=52))
    op, to, doc = read_reply(s)
    assert to == 52 and doc["n"] == 1, (to, doc)  # the first reply answers the count
    s.close()


def test_legacy_query(srv):
    s = connect(srv)
    q = struct.pack("<i", 0) + b"admin.$cmd\0" + struct.pack("<ii", 0, -1)
    s.sendall(frame(OP_QUERY, q + bson.BSON.encode({"isMaster": 1}), request_id=61))
    op, to, doc = read_reply(s)
    assert op == OP_REPLY and to == 61 and doc["ismaster"] is True, doc
    q = struct.pack("<i", 0) + b"test.people\0" + struct.pack("<ii", 0, -1)
    s.sendall(frame(OP_QUERY, q + bson.BSON.encode({}), request_id=62))
    op, to, doc = read_reply(s)
    assert op == OP_REPLY and doc["ok"] == 0 and "only for commands" in doc["errmsg"], doc
    s.close()


def test_max_connections(mmdoc):
    with Server(mmdoc, ["--max-connections", "2"]) as srv:
        a, b = connect(srv), connect(srv)
        for s in (a, b):
            s.sendall(op_msg({"ping": 1, "$db": "admin"}))
            assert read_reply(s)[2]["ok"] == 1.0
        c = connect(srv)
        assert closed(c), "a third connection was served past --max-connections 2"
        a.close()
        deadline = time.time() + 5
        while True:  # the server notices a's close within its one-second tick
            try:
                ping(srv)
                break
            except (AssertionError, OSError):
                if time.time() > deadline:
                    raise
                time.sleep(0.2)
        assert "refused connection" in srv.log()
        b.close()
        srv.stop()


def main():
    mmdoc = sys.argv[1]
    failed = []
    with Server(mmdoc) as srv:
        for name, fn in sorted(globals().items()):
            if not name.startswith("test_"):
                continue
            try:
                fn(mmdoc) if name == "test_max_connections" else fn(srv)
                if name != "test_max_connections":
                    ping(srv)  # the server still answers others
                print("ok   " + name)
            except Exception:
                failed.append(name)
                print("FAIL " + name + "\n" + traceback.format_exc())
        log = srv.log()
        srv.stop()
        srv.check()
        for expected in ("over the limit", "cut short", "unsupported opcode"):
            if expected not in log:
                failed.append("log lacks '%s'" % expected)
    if failed:
        print("failed: " + ", ".join(failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
