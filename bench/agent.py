#!/usr/bin/env python3
"""bench/agent: job start and stop latency through allotd and one agent.

Starts allotd and one allot-agent with emulated GPUs (4xH100-80GB) on
loopback in a temporary folder, then runs --jobs jobs (500), --inflight
(8) at a time. Each job is a real process that prints the wall clock (ns)
when it starts and again when SIGTERM reaches it:
  start latency = first line's time - submission time (submit -> running)
  stop latency  = second line's time - cancel time (cancel -> SIGTERM seen)
The times are read from the task logs in the agent's state folder (same
machine, same clock). Prints
  start_p50_ms=.. start_p99_ms=.. stop_p50_ms=.. stop_p99_ms=.. jobs=..
  agent_rss_mib=..
and whether the target (start p99 < 200 ms) is met. Figures only.
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

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
import cgroups  # noqa: E402 - scripts/cgroups.py

BUILD = os.environ.get("BUILD", "build")


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(len(v) * p / 100.0))] if v else float("nan")


def main():
    ap = argparse.ArgumentParser(description="job start/stop latency through allotd + agent")
    ap.add_argument("--jobs", type=int, default=500)
    ap.add_argument("--inflight", type=int, default=8)
    ap.add_argument("--build", default=BUILD)
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    d = tempfile.mkdtemp(prefix="allot-bench-agent-")
    os.chmod(d, 0o755)
    procs = []
    try:
        admin = subprocess.run([os.path.join(build, "allotd"), "init", "--data-dir", d + "/db"],
                               capture_output=True, text=True, check=True).stdout.strip()
        errf = open(d + "/allotd.log", "w+")
        procs.append(subprocess.Popen([os.path.join(build, "allotd"), "--data-dir", d + "/db",
                                       "--listen", "127.0.0.1:0"], stderr=errf,
                                      stdout=subprocess.DEVNULL))
        port = None
        for _ in range(200):
            errf.seek(0)
            for line in errf:
                if line.startswith("listening on 127.0.0.1:"):
                    port = int(line.strip().rsplit(":", 1)[1])
            if port:
                break
            time.sleep(0.05)
        url = "http://127.0.0.1:%d" % port

        def call(method, path, body=None, token=admin):
            req = urllib.request.Request(url + path, method=method,
                                         data=json.dumps(body).encode() if body else None,
                                         headers={"Authorization": "Bearer " + token})
            for _ in range(100):
                try:
                    with urllib.request.urlopen(req, timeout=10) as r:
                        return json.loads(r.read() or b"null")
                except urllib.error.HTTPError as e:
                    if e.code != 503:
                        raise
                    time.sleep(0.05)

        call("PUT", "/v1/tenants", {"version": 1, "tenants": [{"path": "bench"}]})
        agent_tok = call("POST", "/v1/tokens", {"role": "agent", "name": "a"})["token"]
        sd = d + "/agent"
        os.makedirs(sd)
        os.chmod(sd, 0o755)
        agent = subprocess.Popen([os.path.join(build, "allot-agent"), "--server", url, "--token",
                                  agent_tok, "--name", "b1", "--emulate", "4xH100-80GB",
                                  "--state-dir", sd, "--listen", "127.0.0.1:0", "--grace", "5s",
                                  "--cgroup-root", "allot-bench", "--poll-wait", "20s"],
                                 stderr=open(d + "/agent.log", "w"), stdout=subprocess.DEVNULL)
        procs.append(agent)
        while not call("GET", "/v1/nodes")["nodes"]:
            time.sleep(0.05)
        script = "trap 'date +%s%N; exit 0' TERM; date +%s%N; sleep 1000 & wait"
        starts, stops, live = [], [], {}
        submitted = 0
        rss = 0
        t_end = time.time() + 600
        while (submitted < a.jobs or live) and time.time() < t_end:
            while submitted < a.jobs and len(live) < a.inflight:
                t = time.time_ns()
                j = call("POST", "/v1/jobs", {"tenant": "bench", "gpus": 1, "cpus": 0.1,
                                              "memory": 32, "command": ["sh", "-c", script]})
                live[j["id"]] = {"sub": t, "cancel": None}
                submitted += 1
            for jid, s in list(live.items()):
                p = os.path.join(sd, "logs", str(jid), "task-0.log")
                try:
                    lines = open(p).read().split()
                except OSError:
                    continue
                if s["cancel"] is None and lines:
                    starts.append((int(lines[0]) - s["sub"]) / 1e6)
                    s["cancel"] = time.time_ns()
                    call("POST", "/v1/jobs/%d/cancel" % jid)
                elif s["cancel"] is not None and len(lines) >= 2:
                    stops.append((int(lines[1]) - s["cancel"]) / 1e6)
                    del live[jid]
            try:
                with open("/proc/%d/status" % agent.pid) as f:
                    for line in f:
                        if line.startswith("VmRSS:"):
                            rss = max(rss, int(line.split()[1]) / 1024.0)
            except OSError:
                pass
            time.sleep(0.002)
        print("start_p50_ms=%.1f start_p99_ms=%.1f stop_p50_ms=%.1f stop_p99_ms=%.1f jobs=%d "
              "agent_rss_mib=%.1f" % (pct(starts, 50), pct(starts, 99), pct(stops, 50),
                                      pct(stops, 99), len(stops), rss))
        print("target start p99 < 200 ms: %s" % ("met" if pct(starts, 99) < 200 else "MISSED"))
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
        # agents leave running tasks alone when stopped: kill them, remove their cgroups
        left = cgroups.remove_tree("allot-bench")
        if left:
            print("bench-agent: cgroups left over: %s" % left, file=sys.stderr)
        cgroups.unmount_below(d)
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
