#!/usr/bin/env python3
"""Run a command beside a throwaway PostgreSQL server.

usage: pg-sandbox.py [--bindir DIR] [--] COMMAND [ARG...]

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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 usage="pg-sandbox.py [--bindir DIR] [--] COMMAND [ARG...]")
    ap.add_argument("--bindir", help="folder of initdb, postgres and pg_isready")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not cmd:
        ap.error("no command to run")
    bindir = find_bindir(args.bindir)
    if not bindir:
        print("pg-sandbox: no PostgreSQL server found (install the `postgresql` package, "
              "or give --bindir)", file=sys.stderr)
        return 2
    run_as = {}
    if os.geteuid() == 0:
        try:
            pw = pwd.getpwnam("postgres")
        except KeyError:
            print("pg-sandbox: running as root needs the `postgres` user", file=sys.stderr)
            return 2
        run_as = {"user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": []}
    top = tempfile.mkdtemp(prefix="allot-pg-")
    data = os.path.join(top, "data")
    server = None
    try:
        os.mkdir(data, 0o700)
        if run_as:
            os.chown(top, run_as["user"], run_as["group"])
            os.chown(data, run_as["user"], run_as["group"])
        r = subprocess.run([os.path.join(bindir, "initdb"), "-D", data, "-U", "allot",
                            "-A", "trust", "-E", "SQL_ASCII", "--locale=C", "--no-sync"],
                           cwd=top, capture_output=True, text=True, **run_as)
        if r.returncode != 0:
            print("pg-sandbox: initdb failed:\n" + r.stdout + r.stderr, file=sys.stderr)
            return 2
        for attempt in range(3):
            port = free_port()
            log = open(os.path.join(top, "server.log"), "w")
            server = subprocess.Popen(
                [os.path.join(bindir, "postgres"), "-D", data, "-p", str(port), "-k", top,
                 "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off",
                 "-c", "max_connections=200", "-c", "shared_buffers=32MB"],
                cwd=top, stdout=log, stderr=subprocess.STDOUT, **run_as)
            log.close()
            deadline = time.monotonic() + START_TIMEOUT_S
            ready = False
            while time.monotonic() < deadline and server.poll() is None:
                if subprocess.run([os.path.join(bindir, "pg_isready"), "-q", "-h", "127.0.0.1",
                                   "-p", str(port)]).returncode == 0:
                    ready = True
                    break
                time.sleep(0.1)
            if ready:
                break
            stop(server)
            server = None
        if not server:
            with open(os.path.join(top, "server.log")) as f:
                print("pg-sandbox: the server did not start:\n" + f.read(), file=sys.stderr)
            return 2
        env = dict(os.environ, ALLOT_TEST_PG="postgres://allot@127.0.0.1:%d" % port)
        return subprocess.run(cmd, env=env).returncode
    finally:
        if server:
            stop(server)
        shutil.rmtree(top, ignore_errors=True)


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
