#!/usr/bin/env python3
"""bench/takeover: how long allotd takes to serve again with many running jobs.

Starts allotd on loopback in a temporary folder (SQLite; with --pg URL, a
PostgreSQL database; --pg sandbox starts a throwaway server with
scripts/pg_sandbox.py), registers --nodes
nodes of 8 GPUs (a lease of an hour: they send no heartbeats), submits --jobs checkpointable one-GPU jobs, waits until
every one is placed, and reports one save for each (as `allot checkpoint`
in the job would). Then, --rounds times, stops allotd (SIGTERM, then
SIGKILL on alternate rounds) and starts it again on the same store,
timing start -> /readyz 200: the rebuild of the core from the store, in
which every running job is adopted where it runs and its last save read
back. A standby taking over does the same rebuild. Prints

  build=.. store=.. jobs=.. restart_ms=[..] median_ms=.. per_job_us=..

(one line per build with --against OTHER_BUILD, whose allotd restarts in
alternate rounds on the same store: a before/after in one run).

Figures only; no target is asserted (machines here are shared).
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

BUILD = os.environ.get("BUILD", "build")


def req(port, method, path, body=None, token=None):
    data = json.dumps(body).encode() if body is not None else None
    r = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), data=data, method=method)
    if data is not None:
        r.add_header("Content-Type", "application/json")
    if token:
        r.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(r, timeout=60) as f:
            return f.status, json.loads(f.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def start(build, store, port, log):
    """allotd on the store; returns (process, port) once it listens."""
    errf = open(log, "a+")
    at = errf.tell()
    p = subprocess.Popen([os.path.join(build, "allotd"), "--store", store, "--listen",
                          "127.0.0.1:%d" % port, "--log-level", "warn", "--lease", "1h"],
                         stderr=errf,
                         stdout=subprocess.DEVNULL)
    end = time.time() + 60
    while time.time() < end and p.poll() is None:
        errf.seek(at)
        for line in errf:
            if line.startswith("listening on 127.0.0.1:"):
                return p, int(line.strip().rsplit(":", 1)[1])
        time.sleep(0.002)
    p.kill()
    raise SystemExit("allotd did not start (see %s)" % log)


def ready(port, limit_s=600):
    end = time.time() + limit_s
    while time.time() < end:
        try:
            if req(port, "GET", "/readyz")[0] == 200:
                return True
        except OSError:
            pass
        time.sleep(0.005)
    return False


def progress(what, done, total):
    sys.stderr.write("\r%-10s %6d/%d" % (what, done, total))
    if done == total:
        sys.stderr.write("\n")
    sys.stderr.flush()


def main():
    ap = argparse.ArgumentParser(description="allotd restart/takeover time with running jobs")
    ap.add_argument("--jobs", type=int, default=20000)
    ap.add_argument("--nodes", type=int, default=0, help="default: jobs / 8")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--pg", default="",
                    help="postgres://... database instead of SQLite; 'sandbox': a throwaway one")
    ap.add_argument("--build", default=BUILD)
    ap.add_argument("--against", default="",
                    help="another build folder: its allotd restarts on the same store in "
                         "alternate rounds, and both figures are printed side by side")
    a = ap.parse_args()
    if a.pg == "sandbox":
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                        "scripts"))
        import pg_sandbox  # noqa: E402 - scripts/pg_sandbox.py
        with pg_sandbox.Server() as pg:
            a.pg = pg.createdb("takeover")
            run(a)
    else:
        run(a)


def run(a):
    build = os.path.abspath(a.build)
    builds = [build] + ([os.path.abspath(a.against)] if a.against else [])
    nodes = a.nodes or (a.jobs + 7) // 8
    d = tempfile.mkdtemp(prefix="allot-bench-takeover-")
    store = a.pg or "sqlite:" + d + "/allot.db"
    log = d + "/allotd.log"
    proc = None
    try:
        admin = subprocess.run([os.path.join(build, "allotd"), "init", "--store", store],
                               capture_output=True, text=True, check=True).stdout.strip()
        proc, port = start(build, store, 0, log)
        if not ready(port):
            raise SystemExit("allotd not ready")
        st, _ = req(port, "PUT", "/v1/tenants", {"version": 1, "tenants": [{"path": "b"}]},
                    token=admin)
        assert st == 200, st
        st, ag = req(port, "POST", "/v1/tokens", {"role": "agent", "name": "agents"},
                     token=admin)
        ag = ag["token"]
        for i in range(nodes):
            st, _ = req(port, "POST", "/v1/nodes/register", {
                "name": "n%05d" % i, "cpus": 64, "memory": 512000,
                "gpus": [{"model": "A100-80GB"}] * 8}, token=ag)
            assert st == 201, st
            if i % 256 == 255 or i == nodes - 1:
                progress("nodes", i + 1, nodes)
        body = {"tenant": "b", "gpus": 1, "checkpointable": True, "command": ["true"]}
        ids = []
        with ThreadPoolExecutor(8) as ex:
            for k, (st, j) in enumerate(ex.map(lambda _: req(port, "POST", "/v1/jobs", body,
                                                             token=admin), range(a.jobs))):
                assert st == 201, (st, j)
                ids.append(j["id"])
                if k % 1000 == 999 or k == a.jobs - 1:
                    progress("submitted", k + 1, a.jobs)
        end = time.time() + 600
        while time.time() < end:
            st, page = req(port, "GET", "/v1/jobs?state=pending&limit=1", token=admin)
            if st == 200 and not page["jobs"]:
                break
            time.sleep(0.5)
        with ThreadPoolExecutor(8) as ex:
            for k, (st, r) in enumerate(ex.map(lambda i: req(
                    port, "POST", "/v1/jobs/%d/checkpoint" % i, token=admin), ids)):
                assert st == 200, (st, r)
                if k % 1000 == 999 or k == a.jobs - 1:
                    progress("saves", k + 1, a.jobs)
        times = [[] for _ in builds]
        rounds = a.rounds * len(builds)
        for rnd in range(rounds):
            b = rnd % len(builds)  # alternate builds on the same store
            proc.send_signal(signal.SIGKILL if (rnd // len(builds)) % 2 else signal.SIGTERM)
            proc.wait(timeout=120)
            t0 = time.monotonic()
            proc, port = start(builds[b], store, port, log)
            if not ready(port):
                raise SystemExit("allotd not ready after a restart (see %s)" % log)
            times[b].append((time.monotonic() - t0) * 1000)
            st, j = req(port, "GET", "/v1/jobs/%d" % ids[-1], token=admin)
            assert st == 200 and j["state"] in ("starting", "running") and \
                "last_checkpoint" in j, j
            progress("restarts", rnd + 1, rounds)
        for b, ts in zip(builds, times):
            med = sorted(ts)[len(ts) // 2]
            print("build=%s store=%s jobs=%d nodes=%d restart_ms=[%s] median_ms=%.0f "
                  "per_job_us=%.1f" % (
                      os.path.relpath(b), "postgresql" if a.pg else "sqlite", a.jobs, nodes,
                      ", ".join("%.0f" % t for t in ts), med, med * 1000 / a.jobs))
    finally:
        if proc and proc.poll() is None:
            proc.kill()
            proc.wait()
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
