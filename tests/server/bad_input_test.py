#!/usr/bin/env python3
"""Bad input on raw sockets against `mmdoc serve`: an oversized or too
short length, a message cut short, an opcode it does not speak, invalid
BSON, a bad checksum, unknown flag bits, an unknown command, a legacy
query that is not a command, too many connections. Each gets an error
reply (or, where no reply is possible, a closed connection and a log
line), and the server keeps answering everyone else.
Usage: bad_input_test.py MMDOC"""
import os
import resource
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


def ping_within(srv, seconds):
    """Pings until the server answers, for at most `seconds`."""
    deadline = time.time() + seconds
    while True:
        try:
            ping(srv)
            return
        except (AssertionError, OSError):
            if time.time() > deadline:
                raise
            time.sleep(0.2)


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


def command(s, doc, request_id=70):
    s.sendall(op_msg(doc, request_id=request_id))
    r = read_reply(s)
    assert r is not None, "connection closed after %r" % (doc,)
    return r[2]


def fill(s, coll, docs):
    command(s, {"drop": coll, "$db": "bad"})
    doc = command(s, {"insert": coll, "documents": docs, "$db": "bad"})
    assert doc["n"] == len(docs), doc


def test_subdocument_without_its_last_zero(srv):
    """A nested document whose last byte is not 0: refused whole (code 22),
    never stored, never a crash (it once crashed createIndexes)."""
    s = connect(srv)
    fill(s, "term", [{"_id": 1}])
    for cmd, key in [({"insert": "term", "documents": [{"_id": 2, "sub": {"x": 1}, "after": "y"}],
                       "$db": "bad"}, b"after"),
                     ({"createIndexes": "term", "indexes": [{"key": {"a": 1}, "name": "a_1"}],
                       "$db": "bad"}, b"name"),
                     ({"find": "term", "filter": {}, "sort": {"a": 1}, "$db": "bad"}, b"$db")]:
        raw = bytearray(bson.BSON.encode(cmd))
        at = raw.index(key) - 1  # the nested document's last byte
        assert raw[at] == 0
        raw[at] = ord("@")
        s.sendall(op_msg(None, raw_body=bytes(raw), request_id=71))
        op, to, doc = read_reply(s)
        assert to == 71 and doc["ok"] == 0 and doc["code"] == 22, doc
    doc = command(s, {"count": "term", "$db": "bad"})
    assert doc["n"] == 1, doc
    s.close()


def test_q_missing_or_not_a_document_matches_nothing(srv):
    """MongoDB refuses these; reading them as {} emptied the collection."""
    s = connect(srv)
    fill(s, "q", [{"_id": i, "g": 1} for i in range(5)])
    for cmd in [{"delete": "q", "deletes": [{"q": None, "limit": 0}], "$db": "bad"},
                {"delete": "q", "deletes": [{"limit": 0}], "$db": "bad"},
                {"update": "q", "updates": [{"q": "oops", "u": {"$set": {"g": 2}}, "multi": True}],
                 "$db": "bad"},
                {"update": "q", "updates": [{"u": {"$set": {"g": 2}}, "multi": True}],
                 "$db": "bad"}]:
        doc = command(s, cmd)
        assert doc["ok"] == 1 and doc["n"] == 0 and len(doc["writeErrors"]) == 1, (cmd, doc)
    for cmd in [{"count": "q", "query": "x", "$db": "bad"},
                {"distinct": "q", "key": "g", "query": 5, "$db": "bad"},
                {"findAndModify": "q", "query": [], "remove": True, "$db": "bad"},
                {"findAndModify": "q", "sort": 1, "remove": True, "$db": "bad"}]:
        doc = command(s, cmd)
        assert doc["ok"] == 0 and doc["code"] == 14, (cmd, doc)
    assert command(s, {"count": "q", "query": {"g": 1}, "$db": "bad"})["n"] == 5
    assert command(s, {"count": "q", "query": None, "$db": "bad"})["n"] == 5
    s.close()


def test_multi_replacement_is_refused(srv):
    s = connect(srv)
    fill(s, "mr", [{"_id": i, "keep": i} for i in range(3)])
    doc = command(s, {"update": "mr", "updates": [{"q": {}, "u": {"status": "x"}, "multi": True}],
                      "$db": "bad"})
    assert doc["n"] == 0 and doc["nModified"] == 0 and "operators" in \
        doc["writeErrors"][0]["errmsg"], doc
    assert command(s, {"count": "mr", "query": {"keep": {"$exists": True}}, "$db": "bad"})["n"] == 3
    s.close()


def test_failed_multi_update_changes_nothing(srv):
    """The third statement fails on its second document: the reply and the
    collection both say that statement changed nothing; the others stand."""
    s = connect(srv)
    fill(s, "um", [{"_id": i, "g": 1, "e": i} for i in range(3)] + [{"_id": 9, "g": 2, "e": 9}])
    assert command(s, {"createIndexes": "um", "indexes": [{"key": {"e": 1}, "name": "e_1",
                                                           "unique": True}], "$db": "bad"})["ok"]
    for ordered in (True, False):
        doc = command(s, {"update": "um", "ordered": ordered, "$db": "bad", "updates": [
            {"q": {"_id": 9}, "u": {"$inc": {"n": 1}}},
            {"q": {"_id": 9}, "u": {"$inc": {"n": 1}}},
            {"q": {"g": 1}, "u": {"$set": {"e": "same"}}, "multi": True},
            {"q": {"_id": 9}, "u": {"$inc": {"n": 1}}}]})
        assert [e["index"] for e in doc["writeErrors"]] == [2], doc
        assert doc["writeErrors"][0]["code"] == 11000, doc
        assert doc["nModified"] == (2 if ordered else 3), doc
        assert command(s, {"count": "um", "query": {"e": "same"}, "$db": "bad"})["n"] == 0
    assert command(s, {"count": "um", "query": {"n": 5}, "$db": "bad"})["n"] == 1
    s.close()


def test_nul_in_a_name_is_refused(srv):
    s = connect(srv)
    fill(s, "c", [{"_id": 1}])
    for cmd in [{"insert": "c\0evil", "documents": [{"_id": 2}], "$db": "bad"},
                {"drop": "c\0evil", "$db": "bad"},
                {"dropDatabase": 1, "$db": "bad\0x"}]:
        doc = command(s, cmd)
        assert doc["ok"] == 0 and doc["code"] == 73, (cmd, doc)
    assert command(s, {"count": "c", "$db": "bad"})["n"] == 1
    s.close()


def test_find_refuses_options_it_does_not_know(srv):
    s = connect(srv)
    fill(s, "fo", [{"_id": i} for i in range(6)])
    for opt in [{"min": {"_id": 3}}, {"max": {"_id": 3}}, {"returnKey": True},
                {"tailable": True}, {"frobnicate": 1}]:
        doc = command(s, dict({"find": "fo", "hint": {"_id": 1}, "$db": "bad"}, **opt))
        assert doc["ok"] == 0 and list(opt)[0] in doc["errmsg"], (opt, doc)
    doc = command(s, {"find": "fo", "hint": {"_id": 1}, "comment": "c", "maxTimeMS": 5,
                      "allowDiskUse": True, "$db": "bad"})
    assert len(doc["cursor"]["firstBatch"]) == 6, doc
    s.close()


def test_write_and_read_commands_refuse_fields_they_do_not_know(srv):
    """Found by an outside test: a typo such as upset: true in an update
    statement was ignored, so nothing was inserted and nothing said why."""
    s = connect(srv)
    fill(s, "uf", [{"_id": 1, "x": 1}])
    for cmd, field in [
            ({"update": "uf", "updates": [{"q": {"_id": 2}, "u": {"$set": {"x": 2}},
                                           "upset": True}]}, "upset"),
            ({"update": "uf", "updates": [{"q": {"_id": 1}, "u": {"$set": {"x": 3}}}],
              "let": {"v": 1}}, "let"),
            ({"delete": "uf", "deletes": [{"q": {"_id": 1}, "limt": 1}]}, "limt"),
            ({"insert": "uf", "documents": [{"_id": 3}], "bogus": 1}, "bogus"),
            ({"findAndModify": "uf", "query": {"_id": 1}, "update": {"$set": {"x": 4}},
              "returnNewDocument": True}, "returnNewDocument"),
            ({"count": "uf", "bogus": 1}, "bogus"),
            ({"distinct": "uf", "key": "x", "bogus": 1}, "bogus"),
            ({"create": "uf2", "bogus": 1}, "bogus")]:
        doc = command(s, dict(cmd, **{"$db": "bad"}))
        assert doc["ok"] == 0 and field in doc["errmsg"], (cmd, doc)
    # Nothing ran: the document is as it was, and no other appeared.
    found = command(s, {"find": "uf", "$db": "bad"})["cursor"]["firstBatch"]
    assert found == [{"_id": 1, "x": 1}], found
    # What drivers send on every command is not refused.
    lsid = {"id": bson.binary.Binary(b"0123456789abcdef", 4)}
    doc = command(s, {"update": "uf", "updates": [{"q": {"_id": 1}, "u": {"$set": {"x": 5}},
                                                   "upsert": False, "multi": False,
                                                   "hint": {"_id": 1}}],
                      "ordered": True, "lsid": lsid, "comment": "c",
                      "writeConcern": {"w": 1}, "$db": "bad"})
    assert doc["ok"] == 1 and doc["nModified"] == 1, doc
    s.close()


def test_system_collections_are_not_written(srv):
    """Found by an outside test: an insert into system.js was taken, as
    MongoDB refuses (73 InvalidNamespace)."""
    s = connect(srv)
    for cmd in [{"insert": "system.js", "documents": [{"_id": 1}]},
                {"update": "system.x", "updates": [{"q": {}, "u": {"a": 1}, "upsert": True}]},
                {"create": "system.y"},
                {"createIndexes": "system.z", "indexes": [{"key": {"a": 1}, "name": "a_1"}]},
                {"findAndModify": "system.w", "query": {}, "update": {"a": 1}, "upsert": True}]:
        doc = command(s, dict(cmd, **{"$db": "bad"}))
        assert doc["ok"] == 0 and doc["code"] == 73 and "system" in doc["errmsg"], (cmd, doc)
    names = [c["name"] for c in command(s, {"listCollections": 1, "$db": "bad"})["cursor"]
             ["firstBatch"]]
    assert not [n for n in names if n.startswith("system.")], names
    assert command(s, {"find": "system.js", "$db": "bad"})["ok"] == 1  # reads find nothing
    s.close()


def test_a_document_nested_too_deep_fails_alone(srv):
    """Found by an outside test: one document nested deeper than 100 levels
    in a kind 1 section failed the whole insert, as a command over 16 MiB
    did before; it is that statement's write error now."""
    s = connect(srv)
    deep = {"v": 1}
    for _ in range(120):
        deep = {"n": deep}
    for ordered, kept in ((False, [1, 3]), (True, [1])):
        command(s, {"drop": "deep", "$db": "bad"})
        doc = insert_sequence(s, "deep", ordered, [bson.BSON.encode(d) for d in (
            {"_id": 1}, {"_id": 2, "d": deep}, {"_id": 3})])
        assert doc["ok"] == 1 and doc["n"] == len(kept), doc
        errors = doc["writeErrors"]
        assert len(errors) == 1 and errors[0]["index"] == 1, doc
        assert "nested deeper than 100" in errors[0]["errmsg"], doc
        found = command(s, {"find": "deep", "$db": "bad"})["cursor"]["firstBatch"]
        assert [d["_id"] for d in found] == kept, found
    command(s, {"drop": "deep", "$db": "bad"})
    s.close()


def test_a_failed_more_to_come_message_closes_the_connection(srv):
    """The client reads no reply to it: one would answer its next request."""
    s = connect(srv)
    good = bson.BSON.encode({"insert": "c", "documents": [{"_id": 3}], "$db": "bad"})
    bad = good[:4] + b"\x7f" + good[5:]
    s.sendall(op_msg(None, flags=2, raw_body=bad, request_id=81))
    assert closed(s)


def test_a_batch_over_16_mib_in_a_sequence(srv):
    """Drivers pack up to maxMessageSizeBytes of documents into a kind 1
    section; each document stays under 16 MiB."""
    s = connect(srv)
    command(s, {"drop": "big", "$db": "bad"})
    docs = b"".join(bson.BSON.encode({"_id": i, "pad": "x" * 1000}) for i in range(20000))
    seq = b"documents\0" + docs
    body = bson.BSON.encode({"insert": "big", "$db": "bad"})
    payload = struct.pack("<I", 0) + b"\x00" + body + b"\x01" + struct.pack("<i", 4 + len(seq)) + seq
    assert len(payload) > 16 * 1024 * 1024
    s.sendall(frame(OP_MSG, payload, request_id=91))
    op, to, doc = read_reply(s)
    assert to == 91 and doc["ok"] == 1 and doc["n"] == 20000, doc
    assert command(s, {"count": "big", "$db": "bad"})["n"] == 20000
    command(s, {"drop": "big", "$db": "bad"})
    s.close()


def insert_sequence(s, coll, ordered, encoded_docs, request_id=93):
    """An insert whose documents (BSON bytes) go in a kind 1 section; its reply."""
    seq = b"documents\0" + b"".join(encoded_docs)
    body = bson.BSON.encode({"insert": coll, "ordered": ordered, "$db": "bad"})
    payload = (struct.pack("<I", 0) + b"\x00" + body + b"\x01" +
               struct.pack("<i", 4 + len(seq)) + seq)
    s.sendall(frame(OP_MSG, payload, request_id=request_id))
    op, to, doc = read_reply(s)
    assert to == request_id, (to, doc)
    return doc


def test_a_document_over_16_mib_fails_alone(srv):
    """Found by an outside test: one document over 16 MiB in a kind 1
    section failed the whole insert. As MongoDB (which takes sequence
    documents up to 16 MiB + 16 KiB), it is that statement's write error:
    unordered inserts the others, ordered those before it."""
    s = connect(srv)
    big = bson.BSON.encode({"_id": 2, "s": "x" * (16 * 1024 * 1024)})
    assert 16 * 1024 * 1024 < len(big) <= 16 * 1024 * 1024 + 16 * 1024
    for ordered, kept in ((False, [1, 3]), (True, [1])):
        command(s, {"drop": "huge", "$db": "bad"})
        doc = insert_sequence(s, "huge", ordered, [bson.BSON.encode({"_id": 1}), big,
                                                   bson.BSON.encode({"_id": 3})])
        assert doc["ok"] == 1 and doc["n"] == len(kept), doc
        errors = doc["writeErrors"]
        assert len(errors) == 1 and errors[0]["index"] == 1 and errors[0]["code"] == 2, doc
        assert "too large" in errors[0]["errmsg"], doc
        found = command(s, {"find": "huge", "$db": "bad"})["cursor"]["firstBatch"]
        assert [d["_id"] for d in found] == kept, found
    command(s, {"drop": "huge", "$db": "bad"})
    s.close()


def test_find_and_modify_upsert_names_its_id(srv):
    s = connect(srv)
    fill(s, "fam", [{"_id": 1}])
    for new in (False, True):
        doc = command(s, {"findAndModify": "fam", "query": {"_id": 10 + new},
                          "update": {"$set": {"a": 1}}, "upsert": True, "new": new, "$db": "bad"})
        last = doc["lastErrorObject"]
        assert last["n"] == 1 and last["updatedExisting"] is False, doc
        assert last["upserted"] == 10 + new, doc
        assert (doc["value"] is None) if not new else (doc["value"]["_id"] == 11), doc
    doc = command(s, {"count": "fam", "limit": bson.int64.Int64(-2**63), "$db": "bad"})
    assert doc["ok"] == 0, doc
    s.close()


def test_a_flag_that_is_not_a_boolean_is_refused(srv):
    """Found by an outside test: the string "false" was read as true, so an
    update with multi: "false" changed every document and remove: "false"
    deleted one. Booleans, numbers and null are flags; nothing else is."""
    s = connect(srv)
    fill(s, "flags", [{"_id": i, "k": 1} for i in range(5)])
    for cmd in [{"update": "flags", "updates": [{"q": {"k": 1}, "u": {"$set": {"k": 2}},
                                                 "multi": "false"}]},
                {"update": "flags", "updates": [{"q": {"_id": 99}, "u": {"$set": {"k": 2}},
                                                 "upsert": "false"}]}]:
        doc = command(s, dict(cmd, **{"$db": "bad"}))
        assert doc["n"] == 0 and "must be a boolean" in doc["writeErrors"][0]["errmsg"], doc
    for cmd in [{"findAndModify": "flags", "query": {"_id": 1}, "remove": "false"},
                {"findAndModify": "flags", "query": {"_id": 1}, "update": {"$set": {"k": 3}},
                 "new": "false"},
                {"find": "flags", "batchSize": 2, "singleBatch": "false"},
                {"insert": "flags", "documents": [{"_id": 0}, {"_id": 50}], "ordered": "false"},
                {"listCollections": 1, "nameOnly": "false"},
                {"createIndexes": "flags", "indexes": [{"key": {"k": 1}, "name": "k_1",
                                                        "unique": "false"}]}]:
        doc = command(s, dict(cmd, **{"$db": "bad"}))
        assert doc["ok"] == 0 and doc["code"] == 14 and "must be a boolean" in doc["errmsg"], \
            (cmd, doc)
    doc = command(s, {"insert": "flags", "documents": [{"_id": 51}],
                      "writeConcern": {"j": "yes"}, "$db": "bad"})
    assert doc["ok"] == 0 and "j must be a boolean" in doc["errmsg"], doc
    # Nothing changed: five documents with k: 1, no index on k.
    assert command(s, {"count": "flags", "query": {"k": 1}, "$db": "bad"})["n"] == 5
    assert command(s, {"count": "flags", "$db": "bad"})["n"] == 5
    indexes = command(s, {"listIndexes": "flags", "$db": "bad"})["cursor"]["firstBatch"]
    assert [i["name"] for i in indexes] == ["_id_"], indexes
    # Numbers and null are flags, as MongoDB's: 0 and null are false.
    doc = command(s, {"update": "flags", "updates": [{"q": {"k": 1}, "u": {"$set": {"k": 1}},
                                                      "multi": 1, "upsert": None}], "$db": "bad"})
    assert doc["ok"] == 1 and doc["n"] == 5, doc
    doc = command(s, {"find": "flags", "batchSize": 2, "singleBatch": 0, "$db": "bad"})
    assert doc["cursor"]["id"] != 0, doc
    command(s, {"killCursors": "flags", "cursors": [doc["cursor"]["id"]], "$db": "bad"})
    s.close()


def test_transactions_and_read_concerns_it_cannot_keep_are_refused(srv):
    """Found by an outside test: an insert with startTransaction committed at
    once, and stayed after abortTransaction failed."""
    s = connect(srv)
    lsid = {"id": bson.binary.Binary(b"0123456789abcdef", 4)}
    doc = command(s, {"insert": "txn", "documents": [{"_id": 1}], "lsid": lsid,
                      "txnNumber": bson.int64.Int64(1), "startTransaction": True,
                      "autocommit": False, "$db": "bad"})
    assert doc["ok"] == 0 and doc["code"] == 20 and doc["codeName"] == "IllegalOperation", doc
    assert command(s, {"count": "txn", "$db": "bad"})["n"] == 0
    for rc in [{"level": "snapshot"}, {"level": "linearizable"}, {"afterClusterTime": 5}, "local"]:
        doc = command(s, {"find": "txn", "readConcern": rc, "$db": "bad"})
        assert doc["ok"] == 0 and doc["code"] == 72 and "readConcern" in doc["errmsg"], (rc, doc)
    for level in ("local", "majority", "available"):
        doc = command(s, {"find": "txn", "readConcern": {"level": level}, "$db": "bad"})
        assert doc["ok"] == 1, (level, doc)
    doc = command(s, {"insert": "txn", "documents": [{"_id": 2}],
                      "writeConcern": {"w": 1, "bogus": 1}, "$db": "bad"})
    assert doc["ok"] == 0 and "bogus" in doc["errmsg"], doc
    s.close()


def test_find_and_modify_option_clashes_and_projected_upserts(srv):
    s = connect(srv)
    fill(s, "famp", [{"_id": 1}])
    for extra in ({"new": True}, {"upsert": True}):
        doc = command(s, dict({"findAndModify": "famp", "query": {"_id": 1}, "remove": True,
                               "$db": "bad"}, **extra))
        assert doc["ok"] == 0 and "cannot be combined" in doc["errmsg"], doc
    assert command(s, {"count": "famp", "$db": "bad"})["n"] == 1
    # A projection without _id still reports the upserted _id.
    for fields in ({"_id": 0}, {"a": 1, "_id": 0}):
        doc = command(s, {"findAndModify": "famp", "query": {"_id": 7}, "fields": fields,
                          "update": {"$set": {"a": 1, "b": 2}}, "upsert": True, "new": True,
                          "$db": "bad"})
        assert doc["lastErrorObject"]["upserted"] == 7, doc
        assert "_id" not in doc["value"] and doc["value"]["a"] == 1, doc
        assert ("b" in doc["value"]) == ("a" not in fields), doc
        command(s, {"delete": "famp", "deletes": [{"q": {"_id": 7}, "limit": 1}], "$db": "bad"})
    s.close()


def test_kill_cursors_and_id_indexes_refuse_what_they_cannot_do(srv):
    s = connect(srv)
    fill(s, "kc", [{"_id": i} for i in range(5)])
    doc = command(s, {"find": "kc", "batchSize": 1, "$db": "bad"})
    cursor = doc["cursor"]["id"]
    doc = command(s, {"killCursors": "kc", "cursors": [cursor, 1.5, "s"], "$db": "bad"})
    assert doc["ok"] == 0 and doc["code"] == 14, doc
    # The bad list killed nothing: the cursor still reads.
    doc = command(s, {"getMore": cursor, "collection": "kc", "$db": "bad"})
    assert doc["ok"] == 1 and len(doc["cursor"]["nextBatch"]) == 4, doc
    doc = command(s, {"createIndexes": "kc", "indexes": [{"key": {"_id": -1}, "name": "_id_-1"}],
                      "$db": "bad"})
    assert doc["ok"] == 0 and doc["code"] == 67, doc
    doc = command(s, {"createIndexes": "kc", "indexes": [{"key": {"_id": 1}, "name": "_id_"}],
                      "$db": "bad"})
    assert doc["ok"] == 1, doc
    doc = command(s, {"count": "kc", "limit": bson.int64.Int64(-2**63), "$db": "bad"})
    assert doc["ok"] == 0 and "out of range" in doc["errmsg"], doc
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
        ping_within(srv, 5)  # the server notices a's close within its one-second tick
        assert "refused connection" in srv.log()
        b.close()
        srv.stop()


def test_dead_clients_cursors_make_room(mmdoc):
    """Found by an outside test: clients that died mid-cursor, without
    killCursors, held --max-cursors for the whole cursor timeout and every
    other client's second batch failed. A closed connection's cursors now
    make room, the one idle longest first; a live connection's never do."""
    with Server(mmdoc, ["--max-cursors", "2"]) as srv:
        s = connect(srv)
        fill(s, "cur", [{"_id": i} for i in range(10)])
        find = {"find": "cur", "batchSize": 1, "$db": "bad"}
        for _ in range(3):  # each dies with a cursor open
            dead = connect(srv)
            assert command(dead, find)["cursor"]["id"] != 0
            dead.close()
        def opened():  # once the server has seen the closes (a loaded machine is slow)
            for _ in range(100):
                doc = command(s, find)
                if doc["ok"] == 1:
                    return doc["cursor"]["id"]
                time.sleep(0.1)
            raise AssertionError("no room made: %r" % (doc,))
        kept = opened()
        other = opened()
        assert kept != 0 and other != 0
        # Both cursors of the live connection hold the limit now.
        doc = command(connect(srv), find)
        assert doc["ok"] == 0 and "too many open cursors" in doc["errmsg"], doc
        more = command(s, {"getMore": kept, "collection": "cur", "$db": "bad"})
        assert more["ok"] == 1 and len(more["cursor"]["nextBatch"]) == 9, more
        s.close()
        srv.stop()


def test_out_of_descriptors(mmdoc):
    """Found by an outside test: past ulimit -n, accept failed with EMFILE
    and the server spun on poll at a full core while clients hung. Now each
    connection it cannot take is closed, with a log line."""
    if os.environ.get("MMDOC_SANITIZE"):
        # The sanitizers' own checks need descriptors too (UBSan's vptr check
        # reads memory through a pipe), so they fail first: a false report.
        print("skip test_out_of_descriptors: a sanitizer build")
        return

    def low_limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (24, 24))
    with Server(mmdoc, preexec=low_limit) as srv:
        held = []
        for _ in range(40):
            s = connect(srv)
            s.sendall(op_msg({"ping": 1, "$db": "admin"}))
            held.append(s)
        answered = refused = 0
        for s in held:
            try:  # a reply, or a closed or reset connection; never a hang
                r = read_reply(s)
            except ConnectionResetError:
                r = None
            if r is None:
                refused += 1
            else:
                answered += 1
        assert answered > 0 and refused > 0, (answered, refused)
        stat = open("/proc/%d/stat" % srv.proc.pid).read().split(")")[-1].split()
        busy0 = int(stat[11]) + int(stat[12])
        time.sleep(2)
        stat = open("/proc/%d/stat" % srv.proc.pid).read().split(")")[-1].split()
        busy = int(stat[11]) + int(stat[12]) - busy0
        ticks = os.sysconf("SC_CLK_TCK")
        assert busy < ticks / 2, "the server used %d ticks in 2 s holding connections" % busy
        for s in held:
            s.close()
        ping_within(srv, 5)  # the server reaps the closed ones within its one-second tick
        assert "out of file descriptors" in srv.log()
        srv.stop()


def test_a_port_in_use_makes_no_database(mmdoc):
    """Found by an outside test: serve on a taken port exited 2 and left a
    new empty database behind."""
    import subprocess
    import tempfile
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    port = taken.getsockname()[1]
    with tempfile.TemporaryDirectory() as d:
        db = os.path.join(d, "new.mmdb")
        r = subprocess.run([mmdoc, "serve", db, "--port", str(port)], capture_output=True,
                           timeout=60)
        assert r.returncode == 2 and b"cannot listen" in r.stderr, r
        assert not os.path.exists(db) and not os.path.exists(db + "-log"), os.listdir(d)
    taken.close()


OWN_SERVER = ("test_max_connections", "test_out_of_descriptors", "test_a_port_in_use_makes_no_database",
              "test_dead_clients_cursors_make_room")


def main():
    mmdoc = sys.argv[1]
    failed = []
    with Server(mmdoc) as srv:
        for name, fn in sorted(globals().items()):
            if not name.startswith("test_"):
                continue
            try:
                fn(mmdoc) if name in OWN_SERVER else fn(srv)
                if name not in OWN_SERVER:
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
