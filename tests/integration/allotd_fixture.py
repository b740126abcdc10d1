"""Shared fixture of the allotd integration tests.

Starts the real allotd in a temporary folder on 127.0.0.1:0, finds its
port from the `listening on ADDR:PORT` line on stderr, waits for /readyz,
and talks raw HTTP/1.1 with http.client (standard library only). Every
daemon started is stopped by its pid at exit, also when a test fails.
Every wait is bounded in time.
"""

import atexit
import http.client
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "scripts"))
import cgroups  # noqa: E402 - scripts/cgroups.py, shared with the demo and bench/agent.py

ALLOTD = sys.argv[1] if len(sys.argv) > 1 else "build/allotd"
SOURCE = sys.argv[2] if len(sys.argv) > 2 else "."

_procs = []
_dirs = []
_logs = []


AGENT = os.path.join(os.path.dirname(os.path.abspath(ALLOTD)), "allot-agent")
# the cgroups of this run's tasks: one folder per hierarchy, removed at exit
CGROUP_ROOT = "allot-test-%d" % os.getpid()


def remove_stale_cgroups():
    """Removes the task cgroups of test runs killed before their exit (a test's time
    limit), whose atexit cleanup never ran. Returns the roots removed."""
    stale = cgroups.stale_roots("allot-test-")
    for name in stale:
        cgroups.remove_tree(name)
    return stale


remove_stale_cgroups()


def _cleanup_cgroups():
    """Kills what is left in this run's task cgroups (by pid) and removes them: CGROUP_ROOT
    and the roots CGROUP_ROOT-NAME of agents given one of their own."""
    left = []
    for name in [CGROUP_ROOT] + cgroups.roots(CGROUP_ROOT + "-"):
        left += cgroups.remove_tree(name)
    if left:
        print("allotd_fixture: cgroups left over: %s" % left, file=sys.stderr)


def _cleanup():
    for p in _procs:
        if p.poll() is None:
            os.kill(p.pid, signal.SIGKILL)
            p.wait(timeout=10)
    _cleanup_cgroups()
    for d in _dirs:
        cgroups.unmount_below(d)
        shutil.rmtree(d, ignore_errors=True)


atexit.register(_cleanup)


def tempdir():
    d = tempfile.mkdtemp(prefix="allotd-test-")
    _dirs.append(d)
    return d


def init(data_dir):
    """Runs `allotd init`; returns the admin token (its only stdout line)."""
    r = subprocess.run([ALLOTD, "init", "--data-dir", data_dir], capture_output=True,
                       text=True, timeout=20)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 1, r.stdout
    return lines[0]


class Daemon:
    def __init__(self, data_dir=None, args=(), ready=True, log_dir=None):
        self.dir = data_dir or tempdir()
        if data_dir is None:
            self.admin = init(self.dir)
        self.stderr_path = os.path.join(log_dir or self.dir, "stderr.log")
        self.err = open(self.stderr_path, "w+")
        _logs.append(self.stderr_path)
        self.proc = subprocess.Popen(
            [ALLOTD, "--data-dir", self.dir, "--listen", "127.0.0.1:0",
             "--cycle-interval", "200ms"] + list(args),
            stdout=subprocess.DEVNULL, stderr=self.err)
        _procs.append(self.proc)
        self.port = self._find_port(10)
        if ready:
            self.wait_ready(10)

    def _find_port(self, timeout):
        end = time.time() + timeout
        while time.time() < end:
            with open(self.stderr_path) as f:
                for line in f:
                    if line.startswith("listening on 127.0.0.1:"):
                        return int(line.strip().rsplit(":", 1)[1])
            if self.proc.poll() is not None:
                raise AssertionError("allotd exited: " + open(self.stderr_path).read())
            time.sleep(0.02)
        raise AssertionError("no `listening on` line within %ss" % timeout)

    def wait_ready(self, timeout):
        end = time.time() + timeout
        while time.time() < end:
            st, _ = self.req("GET", "/readyz")
            if st == 200:
                return
            time.sleep(0.05)
        raise AssertionError("not ready within %ss" % timeout)

    def conn(self):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)

    def req(self, method, path, body=None, token=None, headers=None, raw=False):
        """Returns (status, parsed JSON or text)."""
        h = dict(headers or {})
        # a job needs a command; tests about scheduling leave it out (a
        # command-less job is sent as text, e.g. json.dumps(body))
        if method == "POST" and path.split("?")[0] == "/v1/jobs" and \
                isinstance(body, dict) and "command" not in body:
            body = dict(body, command=["true"])
        if token:
            h["Authorization"] = "Bearer " + token
        if body is not None and not isinstance(body, (bytes, str)):
            body = json.dumps(body)
        if isinstance(body, str):
            body = body.encode()
        c = self.conn()
        try:
            c.request(method, path, body=body, headers=h)
            r = c.getresponse()
            data = r.read()
        finally:
            c.close()
        if raw or not data:
            return r.status, data.decode(errors="replace")
        try:
            return r.status, json.loads(data)
        except ValueError:
            return r.status, data.decode(errors="replace")

    def audit(self, page=1000):
        """Every audit entry, following the pages (bounded: 100 of them)."""
        entries, after = [], 0
        for _ in range(100):
            b = expect(self.req("GET", "/v1/audit?limit=%d&after=%d" % (page, after),
                                token=self.admin), 200)
            entries += b["entries"]
            after = b["next_after"]
            if not after:
                break
        return entries

    def token(self, role, tenant="", name="t", as_token=None):
        st, b = self.req("POST", "/v1/tokens", {"role": role, "tenant": tenant, "name": name},
                         token=as_token or self.admin)
        assert st == 201, (st, b)
        return b["token"]

    def stop(self, sig=signal.SIGTERM, timeout=15):
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
            raise AssertionError("allotd did not stop within %ss" % timeout)
        self.err.close()
        log = self.log()
        assert "runtime error" not in log and "Sanitizer" not in log, log[-4000:]
        return rc

    def log(self):
        with open(self.stderr_path) as f:
            return f.read()


class Agent:
    """A real allot-agent for node `name` with emulated GPUs, talking to dm."""

    def __init__(self, dm, token, name, emulate="2xL4", args=(), state_dir=None, server=None,
                 env=None):
        self.dir = state_dir or tempdir()
        os.chmod(self.dir, 0o755)  # jobs (as nobody) reach the emulated devices in it
        self.name = name
        self.env = env
        self.args = ["--server", server or "http://127.0.0.1:%d" % dm.port, "--token", token,
                     "--name", name, "--emulate", emulate, "--state-dir", self.dir,
                     "--cgroup-root", CGROUP_ROOT, "--grace", "2s", "--poll-wait", "500ms",
                     "--heartbeat", "200ms", "--listen", "127.0.0.1:0"] + list(args)
        self.log_path = os.path.join(self.dir, "agent.log")
        _logs.append(self.log_path)
        self.start()

    def start(self):
        self.err = open(self.log_path, "a")
        self.proc = subprocess.Popen([AGENT] + self.args, stdout=subprocess.DEVNULL,
                                     stderr=self.err,
                                     env=dict(os.environ, **self.env) if self.env else None)
        _procs.append(self.proc)

    def stop(self, sig=signal.SIGTERM, timeout=15):
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
        rc = self.proc.wait(timeout=timeout)
        self.err.close()
        return rc

    def task_log(self, job, task=0):
        with open(os.path.join(self.dir, "logs", str(job), "task-%d.log" % task),
                  errors="replace") as f:
            return f.read()

    def log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()


def expect(got, want_status, what=""):
    st, body = got
    assert st == want_status, "%s: want %d, got %d %r" % (what, want_status, st, body)
    if want_status >= 400:
        assert isinstance(body, dict) and "error" in body, body
        assert set(body["error"]) == {"code", "message"}, body
    return body


def beat(dm, token, name, body=None, status=200):
    """A heartbeat of node `name` as its agent (token) sends it; the reply."""
    return expect(dm.req("POST", "/v1/nodes/%s/heartbeat" % name, body or {}, token=token),
                  status)


def job(dm, jid):
    return expect(dm.req("GET", "/v1/jobs/%d" % jid, token=dm.admin), 200)


def poll(fn, timeout=10):
    """Calls fn until it returns a true value (returned), every 50 ms,
    bounded by timeout seconds."""
    end = time.time() + timeout
    while time.time() < end:
        v = fn()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError("condition not met within %ss" % timeout)


def wait_job(dm, jid, state, timeout=10):
    """Polls job jid until it is in `state` (bounded by timeout seconds)."""
    end = time.time() + timeout
    while time.time() < end:
        j = job(dm, jid)
        if j["state"] == state:
            return j
        time.sleep(0.05)
    raise AssertionError("job %d not %s: %r" % (jid, state, j))


TENANTS = {
    "version": 1,
    "priority_classes": [
        {"name": "inference", "value": 1000, "preemptible": False},
        {"name": "training", "value": 100, "preemptible": True},
    ],
    "tenants": [
        {"path": "research", "weight": 2, "quotas": {"gpu": {"nominal": 16, "borrow_limit": 8}}},
        {"path": "research/nlp", "quotas": {"gpu": {"nominal": 8, "borrow_limit": 8}}},
        {"path": "research/vision", "quotas": {"gpu": 8, "cpu": 1024, "memory": "8Ti"}},
        {"path": "product/search", "isolation": "exclusive-gpu",
         "quotas": {"gpu": {"nominal": 8, "borrow_limit": 0, "lend_limit": 0}}},
    ],
}


def run(tests):
    """Runs each test function in order; prints and exits non-zero on failure."""
    failed = 0
    for t in tests:
        t0 = time.time()
        try:
            t()
            print("ok   %-40s %.2fs" % (t.__name__, time.time() - t0))
        except Exception:  # noqa: BLE001 - report every failure, keep going
            failed += 1
            import traceback
            traceback.print_exc()
            print("FAIL %s" % t.__name__)
            for path in _logs:
                with open(path, errors="replace") as f:
                    print("---- %s (last 40 lines)\n%s" % (path, "".join(f.readlines()[-40:])))
    sys.exit(1 if failed else 0)
