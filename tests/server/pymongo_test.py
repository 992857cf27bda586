#!/usr/bin/env python3
"""pymongo (python3-pymongo 3.11, Debian 12) against `mmdoc serve`: CRUD,
indexes, a cursor over many batches, duplicate keys (code 11000), upserts,
errors for what is not supported, cursor limits and timeouts, many clients
at once. Usage: pymongo_test.py MMDOC. Exits 1 naming each failed test."""
import os
import sys
import threading
import time
import traceback

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_util import Server  # noqa: E402

import pymongo  # noqa: E402
from pymongo import errors  # noqa: E402
from pymongo.write_concern import WriteConcern  # noqa: E402


def client(srv, **kw):
    return pymongo.MongoClient(srv.uri(), serverSelectionTimeoutMS=5000, **kw)


def test_handshake_and_admin(srv):
    c = client(srv)
    assert c.admin.command("ping")["ok"] == 1.0
    hello = c.admin.command("isMaster")
    assert hello["ismaster"] is True and hello["maxWireVersion"] >= 6, hello
    assert hello["maxMessageSizeBytes"] == 48000000, hello
    assert c.server_info()["version"], "buildInfo without version"
    c.admin.command("endSessions", [])


def test_crud(srv):
    coll = client(srv).crud.people
    coll.drop()
    assert coll.insert_one({"_id": 1, "name": "ada", "age": 36}).inserted_id == 1
    ids = coll.insert_many([{"name": "n%d" % i, "age": i} for i in range(50)]).inserted_ids
    assert len(ids) == 50
    assert coll.find_one({"_id": 1})["name"] == "ada"
    assert coll.count_documents({}) == 51
    assert coll.count_documents({"age": {"$gte": 40}}) == 10  # 40..49
    assert coll.count_documents({"age": {"$gte": 40}}, skip=2, limit=5) == 5
    assert coll.count_documents({"nobody": 1}) == 0
    assert coll.estimated_document_count() == 51
    got = list(coll.find({"age": {"$lt": 5}}, {"age": 1, "_id": 0}).sort("age", -1).skip(1).limit(3))
    assert got == [{"age": 3}, {"age": 2}, {"age": 1}], got
    # {field: 0} drops fields and keeps the rest; with _id: 0 too.
    assert coll.find_one({"_id": 1}, {"age": 0}) == {"_id": 1, "name": "ada"}
    assert coll.find_one({"_id": 1}, {"age": 0, "_id": 0}) == {"name": "ada"}
    try:
        coll.find_one({"_id": 1}, {"age": 0, "name": 1})
        raise AssertionError("a projection keeping and dropping fields was accepted")
    except errors.OperationFailure as e:
        assert "cannot both keep and drop" in str(e), e
    try:  # the engine's "-a" means {a: 0}: a field named "-a" is refused, not misread
        coll.find_one({"_id": 1}, {"-age": 1})
        raise AssertionError("a field named -age was projected")
    except errors.OperationFailure as e:
        assert "starts with '-'" in str(e), e
    r = coll.update_one({"_id": 1}, {"$set": {"age": 37}, "$push": {"tags": "math"}})
    assert (r.matched_count, r.modified_count) == (1, 1), r.raw_result
    r = coll.update_many({"age": {"$lt": 10}}, {"$inc": {"age": 100}})
    assert (r.matched_count, r.modified_count) == (10, 10), r.raw_result
    assert coll.find_one({"_id": 1}) == {"_id": 1, "name": "ada", "age": 37, "tags": ["math"]}
    r = coll.replace_one({"_id": 1}, {"name": "ada lovelace"})
    assert r.modified_count == 1 and coll.find_one({"_id": 1})["name"] == "ada lovelace"
    assert coll.delete_one({"age": {"$gte": 100}}).deleted_count == 1
    assert coll.delete_many({"age": {"$gte": 100}}).deleted_count == 9
    assert coll.count_documents({}) == 41


def test_upsert(srv):
    coll = client(srv).crud.upserts
    coll.drop()
    r = coll.update_one({"_id": "x"}, {"$set": {"v": 1}, "$setOnInsert": {"new": True}}, upsert=True)
    assert r.upserted_id == "x" and r.matched_count == 0, r.raw_result
    r = coll.update_one({"_id": "x"}, {"$set": {"v": 2}}, upsert=True)
    assert r.upserted_id is None and r.modified_count == 1, r.raw_result
    r = coll.replace_one({"k": 7}, {"k": 7, "w": 1}, upsert=True)
    assert r.upserted_id is not None, r.raw_result
    assert coll.find_one({"_id": "x"}) == {"_id": "x", "v": 2, "new": True}
    assert coll.count_documents({}) == 2


def test_find_and_modify(srv):
    coll = client(srv).fam.jobs
    coll.drop()
    coll.insert_many([{"_id": i, "state": "new", "prio": i % 3} for i in range(6)])
    got = coll.find_one_and_update({"state": "new"}, {"$set": {"state": "taken"}},
                                   sort=[("prio", -1)])
    assert got["state"] == "new" and got["prio"] == 2, got  # as it was
    got = coll.find_one_and_update({"state": "new"}, {"$set": {"state": "taken"}},
                                   sort=[("_id", 1)], return_document=pymongo.ReturnDocument.AFTER)
    assert got == {"_id": 0, "state": "taken", "prio": 0}, got
    got = coll.find_one_and_update({"_id": 99}, {"$set": {"state": "up"}}, upsert=True,
                                   return_document=pymongo.ReturnDocument.AFTER)
    assert got == {"_id": 99, "state": "up"}, got
    assert coll.find_one_and_update({"_id": 100}, {"$set": {"a": 1}}) is None
    got = coll.find_one_and_delete({"state": "taken"}, sort=[("_id", 1)])
    assert got["_id"] == 0, got
    assert coll.count_documents({}) == 6
    got = coll.find_one_and_update({"_id": 1}, {"$set": {"prio": 7}}, projection={"prio": 0},
                                   return_document=pymongo.ReturnDocument.AFTER)
    assert got == {"_id": 1, "state": "new"}, got
    got = coll.find_one_and_delete({"_id": 1}, projection={"prio": 1, "_id": 0})
    assert got == {"prio": 7}, got
    assert coll.count_documents({}) == 5
    try:
        coll.find_one_and_update({}, {"$set": {"a": 1}}, sort=[("a", 1), ("b", 1)])
        raise AssertionError("a two-key sort was accepted")
    except errors.OperationFailure as e:
        assert e.code == 2, e.details


def test_cursor_many_batches(srv):
    coll = client(srv).cur.many
    coll.drop()
    n = 2500
    coll.insert_many([{"_id": i, "pad": "x" * 100} for i in range(n)])
    got = [d["_id"] for d in coll.find({}, batch_size=17)]
    assert got == list(range(n)), "cursor lost or reordered documents"
    got = [d["_id"] for d in coll.find({"_id": {"$gte": 1000}}).sort("_id", -1).batch_size(100)]
    assert got == list(range(n - 1, 999, -1))
    got = [d["_id"] for d in coll.find({}, batch_size=10, limit=35)]
    assert got == list(range(35)), got
    cur = coll.find({}, batch_size=5)
    next(cur)
    cur.close()  # killCursors
    assert coll.aggregate([{"$match": {}}, {"$group": {"_id": 1, "n": {"$sum": 1}}}]).next()["n"] == n


def test_duplicate_keys(srv):
    coll = client(srv).dup.things
    coll.drop()
    assert coll.create_index("email", unique=True) == "email_1"
    coll.insert_one({"_id": 1, "email": "a@x"})
    try:
        coll.insert_one({"_id": 1, "email": "b@x"})
        raise AssertionError("duplicate _id accepted")
    except errors.DuplicateKeyError as e:
        assert e.code == 11000, e.details
    try:
        coll.insert_one({"_id": 2, "email": "a@x"})
        raise AssertionError("duplicate unique key accepted")
    except errors.DuplicateKeyError as e:
        assert e.code == 11000 and "E11000" in str(e), e.details
        # MongoDB's form, which tools read the index and key from.
        assert "index: email_1 dup key: { email: \"a@x\" }" in e.details["errmsg"], e.details
        assert e.details["keyPattern"] == {"email": 1}, e.details
        assert e.details["keyValue"] == {"email": "a@x"}, e.details
    try:
        coll.update_one({"_id": 1}, {"$set": {"email": "a@x"}})  # same value: fine
        coll.insert_one({"_id": 3, "email": "c@x"})
        coll.update_one({"_id": 3}, {"$set": {"email": "a@x"}})
        raise AssertionError("update to a duplicate unique key accepted")
    except errors.DuplicateKeyError as e:
        assert e.code == 11000, e.details
    # ordered insert_many stops at the duplicate, unordered goes on
    try:
        coll.insert_many([{"_id": 10}, {"_id": 1}, {"_id": 11}])
        raise AssertionError("ordered insert_many with a duplicate accepted")
    except errors.BulkWriteError as e:
        assert e.details["nInserted"] == 1, e.details
        assert [w["code"] for w in e.details["writeErrors"]] == [11000], e.details
    try:
        coll.insert_many([{"_id": 20, "email": "x1"}, {"_id": 1}, {"_id": 21, "email": "x2"}],
                         ordered=False)
        raise AssertionError("unordered insert_many with a duplicate accepted")
    except errors.BulkWriteError as e:
        assert e.details["nInserted"] == 2, e.details
    assert sorted(coll.distinct("_id")) == [1, 3, 10, 20, 21]
    names = [i["name"] for i in coll.list_indexes()]
    assert names == ["_id_", "email_1"], names
    coll.drop_index("email_1")
    assert list(coll.index_information()) == ["_id_"]
    try:
        coll.drop_index("nope_1")
        raise AssertionError("dropping a missing index succeeded")
    except errors.OperationFailure as e:
        assert e.code == 27, e.details


def test_compound_sparse_partial_indexes(srv):
    coll = client(srv).idx.people
    coll.drop()
    name = coll.create_index([("last", 1), ("first", -1)], unique=True)
    assert name == "last_1_first_-1", name
    coll.create_index("nick", sparse=True, unique=True)
    coll.create_index("age", partialFilterExpression={"age": {"$gte": 18}})
    specs = {i["name"]: i for i in coll.list_indexes()}
    assert list(specs["last_1_first_-1"]["key"].items()) == [("last", 1), ("first", -1)], specs
    assert specs["last_1_first_-1"]["unique"] is True
    assert specs["nick_1"]["sparse"] is True, specs["nick_1"]
    assert specs["age_1"]["partialFilterExpression"] == {"age": {"$gte": 18}}, specs["age_1"]
    coll.insert_one({"last": "lovelace", "first": "ada"})
    coll.insert_one({"last": "lovelace", "first": "byron"})  # another first: fine
    try:
        coll.insert_one({"last": "lovelace", "first": "ada"})
        raise AssertionError("a duplicate compound key was accepted")
    except errors.DuplicateKeyError as e:
        assert e.code == 11000, e.details
    coll.insert_one({"last": "x", "first": "y"})  # no nick twice: sparse leaves them out
    # the same index again is fine; with other options it is a conflict
    coll.create_index([("last", 1), ("first", -1)], unique=True)
    try:
        coll.create_index([("last", 1), ("first", -1)])
        raise AssertionError("an index with other options was accepted")
    except errors.OperationFailure as e:
        assert e.code == 85, e.details
    try:
        coll.create_index([("body", "text")])
        raise AssertionError("a text index was accepted")
    except errors.OperationFailure as e:
        assert e.code == 67, e.details
    coll.drop_index([("last", 1), ("first", -1)])
    coll.drop_index("nick_1")
    assert sorted(coll.index_information()) == ["_id_", "age_1"]


def test_databases_and_collections(srv):
    c = client(srv)
    c.dbs_a.one.insert_one({})
    c.dbs_a.two.insert_one({})
    c.dbs_b.three.insert_one({})
    names = c.list_database_names()
    assert "dbs_a" in names and "dbs_b" in names, names
    try:
        c.admin.command("listDatabases", filter={"name": "dbs_a"})
        raise AssertionError("a listDatabases filter was ignored")
    except errors.OperationFailure as e:
        assert e.code == 2, e.details
    assert sorted(c.dbs_a.list_collection_names()) == ["one", "two"]
    c.dbs_a.create_collection("made")
    try:
        c.dbs_a.create_collection("made")
        raise AssertionError("creating an existing collection succeeded")
    except errors.CollectionInvalid:
        pass
    c.dbs_a.drop_collection("two")
    c.dbs_a.drop_collection("never-was")  # pymongo ignores "ns not found"
    assert sorted(c.dbs_a.list_collection_names()) == ["made", "one"]
    c.drop_database("dbs_b")
    assert "dbs_b" not in c.list_database_names()


def test_errors(srv):
    db = client(srv).errs
    for cmd in ("frobnicate", "serverStatus", "mapReduce", "geoNear"):
        try:
            db.command(cmd)
            raise AssertionError(cmd + " succeeded")
        except errors.OperationFailure as e:
            assert e.code == 59 and e.details["codeName"] == "CommandNotFound", e.details
    try:
        list(db.c.find({"a": {"$where": "1"}}))
        raise AssertionError("$where accepted")
    except errors.OperationFailure as e:
        assert e.code == 2, e.details
    try:
        list(db.c.aggregate([{"$project": {"a": 1}}]))
        raise AssertionError("an unsupported pipeline ran")
    except errors.OperationFailure as e:
        assert "countDocuments" in str(e), e.details
    db.c.insert_one({"a": 1})
    try:
        db.c.update_one({}, {"$frob": {"a": 2}})
        raise AssertionError("an unknown update operator was accepted")
    except errors.WriteError as e:
        assert e.code == 9, e.details
    assert db.command("ping")["ok"] == 1.0  # still answering


def test_error_codes(srv):
    # Found by an outside test: these were all code 2.
    db = client(srv).codes
    db.c.drop()
    db.c.insert_one({"_id": 1, "s": "a", "arr": [1, 2], "b": {"c": 1}})
    for update, code in (({"$inc": {"s": 1}}, 14), ({"$set": {"_id": 2}}, 66),
                         ({"$set": {"a": 1}, "$inc": {"a": 1}}, 40)):
        try:
            db.c.update_one({"_id": 1}, update)
            raise AssertionError(str(update) + " accepted")
        except errors.WriteError as e:
            assert e.code == code, e.details
    for flag in ("multi", "upsert"):
        reply = db.command("update", "c", updates=[{"q": {}, "u": {"$set": {"x": 1}}, flag: "false"}])
        assert reply["writeErrors"][0]["code"] == 14, reply
    try:
        db.command("insert", "c", documents=[{}], writeConcern={"j": "x"})
        raise AssertionError("j: 'x' accepted")
    except errors.OperationFailure as e:
        assert e.code == 14, e.details
    for projection in ({"b": 1, "b.c": 1}, {"_id.x": 1, "_id": 0}):
        try:
            list(db.c.find({}, projection))
            raise AssertionError(str(projection) + " accepted")
        except errors.OperationFailure as e:
            assert e.code == 31250, e.details
    db.k.drop()
    db.k.insert_one({"_id": {"x": 1, "y": 2}, "a": 1})
    assert list(db.k.find({}, {"_id.x": 1, "a": 1})) == [{"_id": {"x": 1}, "a": 1}]


def test_write_concerns(srv):
    c = client(srv)
    fast = c.get_database("wc", write_concern=WriteConcern(w=0)).things
    fast.drop()
    for i in range(300):
        fast.insert_one({"i": i})  # no reply (moreToCome)
    durable = c.get_database("wc", write_concern=WriteConcern(w=1, j=True)).things
    durable.insert_one({"i": 300})
    # One client keeps one connection here, so the w:0 writes came first.
    assert durable.count_documents({}) == 301
    majority = c.get_database("wc", write_concern=WriteConcern(w="majority")).things
    majority.insert_one({"i": 301})
    try:
        c.get_database("wc", write_concern=WriteConcern(w=2)).things.insert_one({})
        raise AssertionError("w:2 accepted by a server without replicas")
    except errors.OperationFailure as e:
        assert e.code == 2, e.details


def test_many_clients(srv):
    threads, failures = [], []
    per = 150

    def work(t):
        try:
            c = client(srv)
            coll = c.get_database("mt", write_concern=WriteConcern(j=bool(t % 2))).docs
            for i in range(per):
                coll.insert_one({"_id": "%d-%d" % (t, i), "t": t})
            assert coll.count_documents({"t": t}) == per
            assert sum(1 for _ in coll.find({"t": t}, batch_size=7)) == per
            coll.update_many({"t": t}, {"$set": {"done": True}})
            c.close()
        except Exception:
            failures.append(traceback.format_exc())

    for t in range(12):
        threads.append(threading.Thread(target=work, args=(t,)))
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not failures, failures[0]
    coll = client(srv).mt.docs
    assert coll.count_documents({"done": True}) == 12 * per


def test_cursor_limits(mmdoc):
    with Server(mmdoc, ["--max-cursors", "2", "--cursor-timeout-ms", "300"]) as srv:
        coll = client(srv).lim.c
        coll.insert_many([{"i": i} for i in range(20)])
        a = coll.find({}, batch_size=2)
        b = coll.find({}, batch_size=2)
        next(a), next(b)
        try:
            next(coll.find({}, batch_size=2))
            raise AssertionError("a third cursor opened past --max-cursors 2")
        except errors.OperationFailure as e:
            assert "too many open cursors" in str(e), e.details
        time.sleep(1.6)  # idle past the timeout; the server reaps once a second
        try:
            list(a)
            raise AssertionError("an idle cursor outlived --cursor-timeout-ms")
        except errors.CursorNotFound as e:
            assert e.code == 43, e.details
        assert len(list(coll.find({}, batch_size=2))) == 20  # room again
        srv.stop()
        srv.check()


def main():
    mmdoc = sys.argv[1]
    failed = []
    srv = Server(mmdoc).start()
    try:
        for name, fn in sorted(globals().items()):
            if not name.startswith("test_"):
                continue
            try:
                fn(mmdoc) if name == "test_cursor_limits" else fn(srv)
                print("ok   " + name)
            except Exception:
                failed.append(name)
                print("FAIL " + name + "\n" + traceback.format_exc())
            if name != "test_cursor_limits" and not srv.alive():
                raise AssertionError("the server died during %s:\n%s" % (name, srv.log()))
        srv.stop()
        srv.check()
    finally:
        srv.cleanup()
    if failed:
        print("failed: " + " ".join(failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
