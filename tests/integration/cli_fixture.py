"""Shared helpers of the `allot` command-line tests.

The CLI binary sits next to allotd in the build folder (or is named by the
ALLOT_CLI environment variable). `cli()` runs it against a Daemon of
allotd_fixture with a clean environment: no config file (HOME is a fresh
temporary folder), the server and token from ALLOT_SERVER / ALLOT_TOKEN
unless the test says otherwise. Every run has a time limit.

`Proxy` is a TCP relay between the CLI and allotd that can misbehave on
its first connections (close at once, or forward the request and drop the
reply), to test the CLI's retries. Its thread is a daemon thread and every
socket has a timeout, so nothing outlives the test.
"""

import json
import os
import socket
import subprocess
import threading

import allotd_fixture as fx

ALLOT = os.environ.get("ALLOT_CLI") or os.path.join(
    os.path.dirname(os.path.abspath(fx.ALLOTD)), "allot")


class Result:
    def __init__(self, p):
        self.rc = p.returncode
        self.out = p.stdout
        self.err = p.stderr

    def json(self):
        return json.loads(self.out)

    def lines(self):
        return self.out.splitlines()

    def __repr__(self):
        return "rc=%d\nstdout:\n%s\nstderr:\n%s" % (self.rc, self.out[-3000:], self.err[-3000:])


def cli(dm, *args, token=None, server=None, env=None, home=None, stdin=None, timeout=25,
        no_env=False, cwd=None):
    """Runs `allot ARGS` against dm; returns a Result."""
    e = {k: v for k, v in os.environ.items() if not k.startswith(("ALLOT_", "XDG_"))}
    e["HOME"] = home or fx.tempdir()
    if not no_env:
        e["ALLOT_SERVER"] = server or ("http://127.0.0.1:%d" % dm.port)
        e["ALLOT_TOKEN"] = token or dm.admin
    e.update(env or {})
    p = subprocess.run([ALLOT] + [str(a) for a in args], capture_output=True, text=True,
                       env=e, input=stdin, timeout=timeout, cwd=cwd)
    # a sanitizer build (ALLOT_CLI=build-asan/allot) reports here
    assert "runtime error" not in p.stderr and "Sanitizer" not in p.stderr, p.stderr
    return Result(p)


def ok(r, what=""):
    assert r.rc == 0, "%s: %r" % (what, r)
    return r


def fails(r, rc, code=None, what=""):
    """Checks exit status rc and, when given, the `allot: CODE:` error line."""
    assert r.rc == rc, "%s: want rc %d: %r" % (what, rc, r)
    if code:
        assert ("allot: %s: " % code) in r.err, "%s: want allot: %s: %r" % (what, code, r)
    return r


def write(path, text, mode=0o600):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)
    return path


class Proxy:
    """Relays 127.0.0.1:PORT to allotd. `mode` decides the fate of the
    first `bad` connections: "close" closes at once without reading,
    "drop" forwards the request and closes without passing on the reply.
    Later connections are relayed both ways. `conns` counts connections."""

    def __init__(self, upstream_port, mode="drop", bad=1, port=0):
        self.up = upstream_port
        self.mode = mode
        self.bad = bad
        self.conns = 0
        self.forwarded = 0
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.stopping = False
        self.t = threading.Thread(target=self._serve, daemon=True)
        self.t.start()

    def stop(self):
        self.stopping = True
        self.t.join(timeout=5)
        self.sock.close()

    def _serve(self):
        while not self.stopping:
            try:
                c, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            self.conns += 1
            n = self.conns
            c.settimeout(10)
            threading.Thread(target=self._handle, args=(c, n), daemon=True).start()

    @staticmethod
    def _read_message(s):
        """Reads one HTTP message (headers and Content-Length body)."""
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = s.recv(65536)
            if not chunk:
                return data
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            k, _, v = line.partition(b":")
            if k.strip().lower() == b"content-length":
                length = int(v.strip())
        while len(body) < length:
            chunk = s.recv(65536)
            if not chunk:
                break
            body += chunk
        return head + b"\r\n\r\n" + body

    def _handle(self, c, n):
        try:
            if n <= self.bad and self.mode == "close":
                c.close()
                return
            u = socket.create_connection(("127.0.0.1", self.up), timeout=10)
            if n <= self.bad and self.mode == "drop":
                req = self._read_message(c)
                u.sendall(req)
                self.forwarded += 1
                self._read_message(u)  # the server answered; the client never hears it
                u.close()
                c.close()
                return
            self._pipe(c, u)
        except OSError:
            pass
        finally:
            c.close()

    def _pipe(self, c, u):
        def one_way(a, b):
            try:
                while True:
                    d = a.recv(65536)
                    if not d:
                        break
                    b.sendall(d)
            except OSError:
                pass
            finally:
                try:
                    b.shutdown(socket.SHUT_WR)
                except OSError:
                    pass

        t = threading.Thread(target=one_way, args=(u, c), daemon=True)
        t.start()
        one_way(c, u)
        t.join(timeout=10)
        u.close()
