#!/usr/bin/env python3
"""Run a command beside a throwaway PostgreSQL server.

usage: pg_sandbox.py [--bindir DIR] [--] COMMAND [ARG...]

Creates a database cluster in a new folder under $TMPDIR (initdb, SQL_ASCII
and C locale, trust authentication for the user `allot`), starts its server
on 127.0.0.1 at a free port, runs COMMAND with ALLOT_TEST_PG set to
postgres://allot@127.0.0.1:PORT (append /DATABASE), then stops the server by
its pid and removes the folder. Exits with COMMAND's status, or 2 when the
server cannot be started (the reason is printed).

Run as root, the server runs as the `postgres` user the Debian package
creates (PostgreSQL refuses to run as root). The server's binaries are taken
from --bindir, else the newest /usr/lib/postgresql/*/bin. The server runs
with fsync off: it is for tests, and what is checked is allot's use of it.

Tests import it too: `with pg_sandbox.Server() as pg:` gives pg.url and
pg.createdb(NAME) (a SQL_ASCII database, as the store needs).
"""
import argparse
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

START_TIMEOUT_S = 60
STOP_TIMEOUT_S = 30


def find_bindir(given):
    if given:
        return given
    dirs = sorted(glob.glob("/usr/lib/postgresql/*/bin"),
                  key=lambda d: int(d.split("/")[-2]) if d.split("/")[-2].isdigit() else 0)
    for d in reversed(dirs):
        if os.path.exists(os.path.join(d, "initdb")):
            return d
    return None


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Error(Exception):
    """The server cannot be started; the text says why."""


class Server:
    """A throwaway PostgreSQL server; stop() (or leaving `with`) ends it by pid and
    removes its folder."""

    def __init__(self, bindir=None):
        self.bindir = find_bindir(bindir)
        if not self.bindir:
            raise Error("no PostgreSQL server found (install the `postgresql` package, "
                        "or give --bindir)")
        self.run_as = {}
        if os.geteuid() == 0:
            try:
                pw = pwd.getpwnam("postgres")
            except KeyError:
                raise Error("running as root needs the `postgres` user") from None
            self.run_as = {"user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": []}
        self.top = tempfile.mkdtemp(prefix="allot-pg-")
        self.proc = None
        try:
            self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self):
        data = os.path.join(self.top, "data")
        os.mkdir(data, 0o700)
        if self.run_as:
            os.chown(self.top, self.run_as["user"], self.run_as["group"])
            os.chown(data, self.run_as["user"], self.run_as["group"])
        r = subprocess.run([os.path.join(self.bindir, "initdb"), "-D", data, "-U", "allot",
                            "-A", "trust", "-E", "SQL_ASCII", "--locale=C", "--no-sync"],
                           cwd=self.top, capture_output=True, text=True, **self.run_as)
        if r.returncode != 0:
            raise Error("initdb failed:\n" + r.stdout + r.stderr)
        logpath = os.path.join(self.top, "server.log")
        for _ in range(3):
            port = free_port()
            with open(logpath, "w") as log:
                self.proc = subprocess.Popen(
                    [os.path.join(self.bindir, "postgres"), "-D", data, "-p", str(port),
                     "-k", self.top, "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off",
                     "-c", "max_connections=200", "-c", "shared_buffers=32MB"],
                    cwd=self.top, stdout=log, stderr=subprocess.STDOUT, **self.run_as)
            deadline = time.monotonic() + START_TIMEOUT_S
            while time.monotonic() < deadline and self.proc.poll() is None:
                if subprocess.run([os.path.join(self.bindir, "pg_isready"), "-q", "-h",
                                   "127.0.0.1", "-p", str(port)]).returncode == 0:
                    self.port = port
                    self.url = "postgres://allot@127.0.0.1:%d" % port
                    return
                time.sleep(0.1)
            stop(self.proc)
            self.proc = None
        with open(logpath) as f:
            raise Error("the server did not start:\n" + f.read())

    def sql(self, statement, database="postgres"):
        """Runs one SQL statement with psql; returns its unaligned output."""
        r = subprocess.run([os.path.join(self.bindir, "psql"), "-X", "-q", "-A", "-t",
                            "-v", "ON_ERROR_STOP=1", "-d", "%s/%s" % (self.url, database),
                            "-c", statement], capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            raise Error("psql: %s: %s" % (statement, r.stderr))
        return r.stdout.strip()

    def createdb(self, name):
        """A new database as the store needs it (SQL_ASCII, C order); its URL."""
        self.sql("CREATE DATABASE %s TEMPLATE template0 ENCODING 'SQL_ASCII' "
                 "LC_COLLATE 'C' LC_CTYPE 'C'" % name)
        return "%s/%s" % (self.url, name)

    def stop(self):
        if self.proc:
            stop(self.proc)
            self.proc = None
        shutil.rmtree(self.top, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 usage="pg_sandbox.py [--bindir DIR] [--] COMMAND [ARG...]")
    ap.add_argument("--bindir", help="folder of initdb, postgres, pg_isready and psql")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not cmd:
        ap.error("no command to run")
    try:
        server = Server(args.bindir)
    except Error as e:
        print("pg_sandbox: %s" % e, file=sys.stderr)
        return 2
    with server:
        env = dict(os.environ, ALLOT_TEST_PG=server.url)
        return subprocess.run(cmd, env=env).returncode


def stop(proc):
    """Fast shutdown by pid, then kill when it does not end in time."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


if __name__ == "__main__":
    sys.exit(main())
