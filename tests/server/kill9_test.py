#!/usr/bin/env python3
"""kill -9 of `mmdoc serve` in the middle of writes: every insert the
server acknowledged with j: true must be there when the database is opened
again (by a new server), and the file must pass `mmdoc check`. A killed
process leaves the OS page cache behind, so what this proves is that the
server acknowledges a write only after its commit, and that recovery
replays every committed one (a power cut is the engine's crash tests'
concern). The server runs with --durability none and j: true maps to a
group commit. Three rounds on one database, 6 writer threads each.
Usage: kill9_test.py MMDOC"""
import os
import random
import subprocess
import sys
import tempfile
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_util import Server  # noqa: E402

import pymongo  # noqa: E402
from pymongo.write_concern import WriteConcern  # noqa: E402

ROUNDS = 3
WRITERS = 6


def main():
    mmdoc = sys.argv[1]
    rng = random.Random(int(os.environ.get("MMDOC_TEST_SEED", time.time())))
    tmp = tempfile.TemporaryDirectory(prefix="mmdoc-kill9-")
    path = os.path.join(tmp.name, "k9.mmdb")
    acked = []
    lock = threading.Lock()
    for round_no in range(ROUNDS):
        srv = Server(mmdoc, ["--durability", "none"], db=path).start()
        stop = threading.Event()

        def writer(t):
            c = pymongo.MongoClient(srv.uri(), serverSelectionTimeoutMS=5000,
                                    socketTimeoutMS=5000, retryWrites=False)
            coll = c.get_database("k9", write_concern=WriteConcern(w=1, j=True)).docs
            i = 0
            while not stop.is_set():
                doc_id = "%d-%d-%d" % (round_no, t, i)
                try:
                    coll.insert_one({"_id": doc_id, "pad": "x" * rng.randint(10, 2000)})
                except pymongo.errors.PyMongoError:
                    return  # the server is gone
                with lock:
                    acked.append(doc_id)
                i += 1

        threads = [threading.Thread(target=writer, args=(t,)) for t in range(WRITERS)]
        for th in threads:
            th.start()
        time.sleep(0.3 + rng.random() * 0.7)
        srv.kill9()
        stop.set()
        for th in threads:
            th.join()
        # Reopen (recovery from the log) and look for every acknowledged _id.
        srv = Server(mmdoc, db=path).start()
        coll = pymongo.MongoClient(srv.uri(), serverSelectionTimeoutMS=5000).k9.docs
        have = set(d["_id"] for d in coll.find({}, {"_id": 1}, batch_size=1000))
        missing = [i for i in acked if i not in have]
        srv.stop()
        if missing:
            print("FAIL: round %d: %d of %d acknowledged inserts lost, e.g. %s" %
                  (round_no, len(missing), len(acked), missing[:5]))
            return 1
        print("round %d: %d acknowledged inserts, all there" % (round_no, len(acked)))
    r = subprocess.run([mmdoc, "check", path], capture_output=True)
    if r.returncode != 0:
        print("FAIL: mmdoc check: %s %s" % (r.stdout, r.stderr))
        return 1
    if len(acked) < ROUNDS:
        print("FAIL: too few writes acknowledged (%d) to test anything" % len(acked))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
