"""Starts and stops `mmdoc serve` for the driver tests: a database in a
temporary directory, a free port (--port 0; the server prints the one it
took), SIGTERM at the end (the server must exit 0, closing the database),
then `mmdoc check` of the file."""
import os
import re
import signal
import subprocess
import tempfile
import time


class Server:
    def __init__(self, mmdoc, args=(), db=None, preexec=None):
        self.mmdoc = mmdoc
        self.preexec = preexec  # run in the child before exec (resource limits)
        self.tmp = None
        if db is None:
            self.tmp = tempfile.TemporaryDirectory(prefix="mmdoc-serve-")
            db = os.path.join(self.tmp.name, "serve.mmdb")
        self.db = db
        self.args = list(args)
        self.proc = None
        self.port = None

    def start(self):
        self.stderr = open(self.db + ".serve.log", "ab")
        self.proc = subprocess.Popen(
            [self.mmdoc, "serve", self.db, "--port", "0"] + self.args,
            stdout=subprocess.PIPE, stderr=self.stderr, preexec_fn=self.preexec)
        line = self.proc.stdout.readline().decode()
        m = re.search(r"listening on [^ ]*:(\d+) ", line)
        if not m:
            self.proc.kill()
            raise RuntimeError("mmdoc serve did not start: %r; log: %s" % (line, self.log()))
        self.port = int(m.group(1))
        return self

    def uri(self):
        return "mongodb://127.0.0.1:%d/" % self.port

    def log(self):
        with open(self.db + ".serve.log", "rb") as f:
            return f.read().decode(errors="replace")

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        """SIGTERM; the server must exit 0 within 30 s."""
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=30)
        if code != 0:
            raise AssertionError("mmdoc serve exited %d; log:\n%s" % (code, self.log()))

    def kill9(self):
        self.proc.kill()
        self.proc.wait()

    def check(self):
        """`mmdoc check` of the database: it must be consistent."""
        r = subprocess.run([self.mmdoc, "check", self.db], capture_output=True)
        if r.returncode != 0:
            raise AssertionError("mmdoc check failed: %s %s" % (r.stdout, r.stderr))

    def cleanup(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self.tmp is not None:
            self.tmp.cleanup()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.cleanup()
        return False
