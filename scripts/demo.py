#!/usr/bin/env python3
"""make demo: the whole of allot on one machine.

Starts allotd (SQLite store in a demo folder) and two allot-agents with
emulated GPUs on loopback (gpu-1: 4 H100s shared in whole GPUs and
fractions; gpu-2: 2 A100s split by MIG), applies etc/demo-tenants.yaml
(three teams, one exclusive-gpu), submits a mixed workload of real short
processes (a multi-GPU gang, whole GPUs, fractions, MIG slices, an array
with a throttle, a dependency) and shows `allot top` while it runs:
queueing, borrowing, reclaim with grace, completion. Prints the URL and
the admin token, keeps serving until Ctrl-C, or with --exit-when-done
exits 0 once the workload has finished, after a per-tenant summary.
Ctrl-C (or the end) stops every process it started, by pid.

Standard library only. Usage: scripts/demo.py [--build DIR] [--exit-when-done]
"""

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

import cgroups  # scripts/cgroups.py: the agents' cgroup folders at the end

SOURCE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
procs = []


def log(msg):
    print("\033[1mdemo:\033[0m %s" % msg if sys.stdout.isatty() else "demo: %s" % msg,
          flush=True)


class Api:
    def __init__(self, url, token):
        self.url, self.token = url, token

    def call(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method, headers={
            "Authorization": "Bearer " + self.token, "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    def jobs(self):
        out, cursor = [], 0
        while True:
            st, page = self.call("GET", "/v1/jobs?limit=1000&cursor=%d" % cursor)
            out += page["jobs"]
            cursor = page["next_cursor"]
            if not cursor:
                return out


def free_port(preferred):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", preferred))
        return preferred
    except OSError:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
    finally:
        s.close()


def start(args, logfile):
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=open(logfile, "w"))
    procs.append(p)
    return p


def stop_all():
    for p in reversed(procs):
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    end = time.time() + 10
    for p in reversed(procs):
        try:
            p.wait(timeout=max(0.1, end - time.time()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=5)


def cli(build, env, *args, capture=True):
    return subprocess.run([os.path.join(build, "allot")] + list(args), env=env,
                          capture_output=capture, text=True, timeout=60)


# (seconds after start, tenant, what, job) -- real short processes
def workload():
    def job(tenant, name, seconds, **kw):
        body = {"tenant": tenant, "name": name, "cpus": 0.1, "memory": 64,
                "command": ["sh", "-c", "echo %s starts on $ALLOT_NODE with GPUs "
                            "$CUDA_VISIBLE_DEVICES; sleep %d; echo %s done" % (name, seconds,
                                                                                 name)]}
        body.update(kw)
        return body
    return [
        (0, "research: a 2 x 2-GPU training gang (borrows 2 GPUs beyond its quota)",
         job("research", "llm-pretrain", 25, tasks=2, gpus=2, priority="training",
             gpu_models=["H100-80GB"])),
        (0, "interns: 4 notebooks on MIG slices, at most 2 at once (array 0-3%2)",
         job("interns", "notebook", 8, mig="1g.10gb", array="0-3%2")),
        (6, "product: inference on its 2 guaranteed GPUs: reclaims them from research's "
            "borrowed gang (SIGTERM, 5 s grace, requeued)",
         job("product", "serve", 15, gpus=2, priority="inference",
             gpu_models=["H100-80GB"])),
        (8, "research: a report that waits for the notebooks (dependency afterany)", None),
        (10, "research: an evaluation on a quarter of a GPU",
         job("research", "eval-small", 8, gpu_milli=250, gpu_memory=8192)),
    ]


def summary(api, build, env):
    """Jobs per tenant and state, then what allotd metered and what it costs."""
    by = {}
    for j in api.jobs():
        t = by.setdefault(j["tenant"], {})
        t[j["state"]] = t.get(j["state"], 0) + 1
    print("\n%-10s %5s  %s" % ("TENANT", "JOBS", "STATES"))
    for name in sorted(by):
        states = ", ".join("%s %d" % kv for kv in sorted(by[name].items()))
        print("%-10s %5d  %s" % (name, sum(by[name].values()), states))
    time.sleep(2.5)  # one more metering pass (meter-interval 2s)
    print("\n$ allot usage --by tenant")
    print(cli(build, env, "usage", "--by", "tenant").stdout)
    print("$ allot invoice")
    print(cli(build, env, "invoice").stdout, flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(SOURCE, "build"))
    ap.add_argument("--exit-when-done", action="store_true",
                    help="exit 0 once the workload has finished (after a summary)")
    ap.add_argument("--dir", help="demo folder (default: a new temporary one, removed at exit)")
    ap.add_argument("--timeout", type=int, default=240,
                    help="with --exit-when-done: give up after this many seconds")
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    d = a.dir or tempfile.mkdtemp(prefix="allot-demo-")
    os.makedirs(d, exist_ok=True)
    os.chmod(d, 0o755)  # the jobs' user reaches the emulated devices below it
    stopping = {"now": False}

    def on_signal(sig, frame):
        stopping["now"] = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    api = None
    rc = 1
    try:
        r = subprocess.run([os.path.join(build, "allotd"), "init", "--data-dir",
                            os.path.join(d, "allotd")], capture_output=True, text=True,
                           timeout=30)
        if r.returncode:
            sys.exit("demo: allotd init failed: " + r.stderr)
        admin = r.stdout.strip()
        port = free_port(7070)
        url = "http://127.0.0.1:%d" % port
        start([os.path.join(build, "allotd"), "--data-dir", os.path.join(d, "allotd"),
               "--listen", "127.0.0.1:%d" % port, "--cycle-interval", "500ms",
               "--preempt-grace", "5s", "--preempt-min-runtime", "2s",
               "--meter-interval", "2s", "--ui-dir", os.path.join(SOURCE, "web")],
              os.path.join(d, "allotd.log"))
        api = Api(url, admin)
        for _ in range(100):  # bounded: allotd is ready within a second or two
            try:
                if api.call("GET", "/readyz")[0] == 200:
                    break
            except OSError:
                pass
            time.sleep(0.1)
        env = dict(os.environ, ALLOT_SERVER=url, ALLOT_TOKEN=admin, HOME=d)
        r = cli(build, env, "apply", "-f", os.path.join(SOURCE, "etc", "demo-tenants.yaml"))
        if r.returncode:
            sys.exit("demo: apply failed: " + r.stderr)
        r = cli(build, env, "pricebook", "apply", "-f",
                os.path.join(SOURCE, "etc", "demo-pricebook.yaml"))
        if r.returncode or r.stderr.strip():
            sys.exit("demo: pricebook apply failed: " + r.stderr)
        agent_token = cli(build, env, "tokens", "create", "--role", "agent", "--name",
                          "demo-nodes").stdout.strip().splitlines()[-1]
        token_file = os.path.join(d, "join-token")  # not on the command line (docs/agent.md)
        fd = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.write(fd, (agent_token + "\n").encode())
        os.close(fd)
        for name, gpus, mode in (("gpu-1", "4xH100-80GB", "shared"),
                                 ("gpu-2", "2xA100-80GB", "mig")):
            sd = os.path.join(d, name)
            os.makedirs(sd, exist_ok=True)
            os.chmod(sd, 0o755)
            start([os.path.join(build, "allot-agent"), "--server", url,
                   "--token-file", token_file, "--name", name, "--emulate", gpus,
                   "--gpu-mode", mode, "--state-dir", sd,
                   "--cgroup-root", "allot-demo-" + name, "--listen", "127.0.0.1:0",
                   "--grace", "3s",
                   "--poll-wait", "1s", "--heartbeat", "500ms",
                   "--shim-lib", os.path.join(build, "liballot-cuda.so")],
                  os.path.join(d, name + ".log"))
        for _ in range(100):
            if len(api.call("GET", "/v1/nodes")[1]["nodes"]) == 2:
                break
            time.sleep(0.1)
        log("allotd at %s, admin token %s" % (url, admin))
        log("try: ALLOT_SERVER=%s ALLOT_TOKEN=%s %s/allot top" % (url, admin, build))
        log("dashboard: %s/ui/ (sign in with the admin token)" % url)
        log("files in %s; Ctrl-C stops everything" % d)
        t0 = time.time()
        pending = workload()
        ids = {}
        shown = 0.0
        done_at = None
        while not stopping["now"]:
            now = time.time() - t0
            while pending and pending[0][0] <= now:
                _, what, body = pending.pop(0)
                if body is None:  # the report waits for every notebook
                    body = {"tenant": "research", "name": "report", "cpus": 0.1, "memory": 64,
                            "dependency": "afterany:%d" % ids["notebook"],
                            "command": ["sh", "-c", "echo all notebooks ended; sleep 2"]}
                st, j = api.call("POST", "/v1/jobs", body)
                ids[body["name"]] = j.get("id") if st in (200, 201) else None
                log("t=%2ds %s -> job %s" % (now, what, j.get("id", j)))
            if time.time() - shown >= 2:
                shown = time.time()
                top = cli(build, env, "top", "--count", "1", "--queue", "8")
                if sys.stdout.isatty():
                    print("\033[2J\033[H", end="")
                print("t=%ds\n%s" % (now, top.stdout), flush=True)
            live = [j for j in api.jobs()
                    if j["state"] in ("pending", "starting", "running")]
            if not pending and not live and done_at is None:
                done_at = time.time()
                log("the workload has finished after %ds" % (done_at - t0))
                summary(api, build, env)
                if a.exit_when_done:
                    rc = 0
                    break
                log("still serving; Ctrl-C stops everything")
            if a.exit_when_done and time.time() - t0 > a.timeout:
                log("the workload did not finish within %ds" % a.timeout)
                summary(api, build, env)
                break
            time.sleep(0.5)
        else:
            rc = 0
    finally:
        if api:
            # agents leave running tasks alone when stopped: cancel them first
            try:
                for j in api.jobs():
                    if j["state"] in ("pending", "starting", "running"):
                        api.call("POST", "/v1/jobs/%d/cancel" % j["id"])
                time.sleep(1.5)
            except OSError:
                pass
        stop_all()
        # the agents' cgroup folders (a task that outlived its cancel is killed)
        left = cgroups.remove_tree("allot-demo-gpu-1") + cgroups.remove_tree("allot-demo-gpu-2")
        if left:
            print("demo: cgroups left over: %s" % left, file=sys.stderr)
        cgroups.unmount_below(d)  # the /tmp and /dev/shm of jobs the agents left running
        if not a.dir:
            shutil.rmtree(d, ignore_errors=True)
    sys.exit(rc)


if __name__ == "__main__":
    main()
