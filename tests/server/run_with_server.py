#!/usr/bin/env python3
"""Runs a program against a fresh `mmdoc serve`: starts the server, runs
PROGRAM ARGS... with the server's URI appended, stops the server with
SIGTERM (it must exit 0) and checks the database. Exits with the first
failure.
Usage: run_with_server.py MMDOC PROGRAM [ARGS...]"""
import os
import subprocess
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_util import Server  # noqa: E402


def main():
    mmdoc, program = sys.argv[1], sys.argv[2:]
    with Server(mmdoc) as srv:
        r = subprocess.run(program + [srv.uri()], timeout=120)
        if r.returncode != 0:
            print("%s exited %d; server log:\n%s" % (program[0], r.returncode, srv.log()))
            return 1
        srv.stop()
        srv.check()
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
