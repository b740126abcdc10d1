"""allotd as a daemon: init, options (--help, config file, generated
example), readiness (503 while starting), structured logs, SIGHUP log
reopening and SIGTERM draining with exit status 0."""

import json
import os
import re
import socket
import signal
import subprocess
import time

import allotd_fixture as fx
from allotd_fixture import ALLOTD, SOURCE, Daemon, expect


def test_init_prints_one_token_once():
    d = fx.tempdir()
    tok = fx.init(d)
    assert tok.startswith("allot_") and len(tok) == 6 + 64, tok
    assert os.path.exists(os.path.join(d, "allot.db"))
    again = subprocess.run([ALLOTD, "init", "--data-dir", d], capture_output=True, text=True,
                           timeout=20)
    assert again.returncode == 1 and again.stdout == "", again
    assert "already initialised" in again.stderr
    # the secret itself is never stored
    with open(os.path.join(d, "allot.db"), "rb") as f:
        assert tok.encode() not in f.read()
    # only its owner reads the store (it holds the job-credential key); one made
    # readable before is said at start, not changed
    db = os.path.join(d, "allot.db")
    assert os.stat(db).st_mode & 0o077 == 0, oct(os.stat(db).st_mode)
    os.chmod(db, 0o644)
    dm = fx.Daemon(d)
    try:
        assert "may be read by others (mode 644)" in dm.log(), dm.log()
    finally:
        dm.stop()
    assert os.stat(db).st_mode & 0o777 == 0o644


def test_usage_errors_and_help():
    r = subprocess.run([ALLOTD, "--help"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 0 and "--data-dir" in r.stdout and "--listen" in r.stdout
    r = subprocess.run([ALLOTD, "--no-such-option"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 2, r
    r = subprocess.run([ALLOTD, "--listen", "127.0.0.1:0"], capture_output=True, text=True,
                       timeout=10)
    assert r.returncode == 2 and "--data-dir" in r.stderr, r
    r = subprocess.run([ALLOTD, "--data-dir", fx.tempdir(), "--listen", "127.0.0.1:0"],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 1 and "allotd init" in r.stderr, r
    # a store that is there but cannot be opened: init is not the advice
    d = fx.tempdir()
    os.mkdir(os.path.join(d, "allot.db"))
    r = subprocess.run([ALLOTD, "--data-dir", d, "--listen", "127.0.0.1:0"],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 1 and "exists" in r.stderr and "allotd init" not in r.stderr, r
    # unknown policies are refused with the options, before allotd listens
    for opt, word in (("--placement", "placement"), ("--order", "order")):
        r = subprocess.run([ALLOTD, "--data-dir", fx.tempdir(), "--listen", "127.0.0.1:0", opt,
                            "nosuch"], capture_output=True, text=True, timeout=10)
        assert r.returncode == 2 and word + ': unknown policy "nosuch"' in r.stderr, r
        assert not any(l.startswith("listening on") for l in r.stderr.splitlines()), r
        # the error first, then the usage lines alone (--help lists the options)
        assert r.stderr.startswith("allotd: " + word) and "--help lists" in r.stderr, r
        assert "--fair-reclaim" not in r.stderr, r
    # a --listen that is not IPV4-ADDRESS:PORT is a bad value (2), before anything
    for bad, why in (("999.0.0.1:0", '"999.0.0.1" is not an IPv4 address'),
                     ("127.0.0.1", "expected IPv4-ADDRESS:PORT"),
                     ("127.0.0.1:70000", "expected IPv4-ADDRESS:PORT"),
                     ("127.0.0.1:-1", "expected IPv4-ADDRESS:PORT")):
        r = subprocess.run([ALLOTD, "--data-dir", fx.tempdir(), "--listen", bad],
                           capture_output=True, text=True, timeout=10)
        assert r.returncode == 2 and why in r.stderr, (bad, r)
    # a port in use: a runtime failure (1) that names the port and the reason
    d = fx.tempdir()
    subprocess.run([ALLOTD, "init", "--data-dir", d], capture_output=True, check=True,
                   timeout=10)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = subprocess.run([ALLOTD, "--data-dir", d, "--listen", "127.0.0.1:%d" % port],
                           capture_output=True, text=True, timeout=10)
    assert r.returncode == 1, r
    assert "cannot listen on 127.0.0.1:%d: Address already in use" % port in r.stderr, r
    assert "port 0" not in r.stderr, r
    # the scheduler counts these in whole seconds: a fraction would be cut off unseen
    for opt, val in (("--defrag-interval", "500ms"), ("--defrag-loss", "1500ms"),
                     ("--preempt-grace", "2500ms"), ("--preempt-min-runtime", "100ms"),
                     ("--fair-reclaim", "300500ms"), ("--aging", "1001ms"),
                     ("--las-threshold", "999ms")):
        r = subprocess.run([ALLOTD, "--data-dir", fx.tempdir(), "--listen", "127.0.0.1:0", opt,
                            val], capture_output=True, text=True, timeout=10)
        assert r.returncode == 2 and opt in r.stderr and "whole seconds" in r.stderr, r
        # the error first, then the usage lines, as for every usage error
        assert r.stderr.startswith("allotd: " + opt) and "\nusage: allotd" in r.stderr, r
    for args in (["--fair-cap", "50", "--data-dir", fx.tempdir()], ["--listen", "127.0.0.1:0"]):
        r = subprocess.run([ALLOTD] + args, capture_output=True, text=True, timeout=10)
        assert r.returncode == 2 and "\nusage: allotd" in r.stderr, r
    r = subprocess.run([ALLOTD, "--data-dir", fx.tempdir(), "--placement", "nope"],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 2 and "(random, " in r.stderr and "allot)" in r.stderr, r


def test_config_example_is_generated():
    """The committed examples of allotd's and allot-agent's config files are what the
    programs print."""
    for prog, name in ((ALLOTD, "allotd"), (fx.AGENT, "allot-agent")):
        r = subprocess.run([prog, "--print-config-example"], capture_output=True, text=True,
                           timeout=10)
        assert r.returncode == 0, r
        with open(os.path.join(SOURCE, "etc", name + ".conf.example")) as f:
            committed = f.read()
        assert committed == r.stdout, "etc/%s.conf.example is stale: regenerate it with " \
                                      "%s --print-config-example" % (name, name)


def test_config_file_and_json_logs():
    d = fx.tempdir()
    admin = fx.init(d)
    conf = os.path.join(d, "allotd.conf")
    logf = os.path.join(d, "allotd.log")
    with open(conf, "w") as f:
        f.write("# test config\nlog-format json\nlog-file = \"%s\"\nworkers 2\n" % logf)
    dm = Daemon(d, ["--config", conf])
    dm.admin = admin
    expect(dm.req("GET", "/v1/tenants", token=admin), 200)
    # a request libmicrohttpd itself refuses (a header line without a colon)
    # is logged by allotd in its own format, to its file
    with socket.create_connection(("127.0.0.1", dm.port), timeout=5) as sk:
        sk.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nBad Header Line\r\n\r\n")
        try:
            sk.recv(4096)
        except OSError:
            pass
    end = time.time() + 5
    while time.time() < end and '"subsys":"http"' not in open(logf).read():
        time.sleep(0.05)
    lines = open(logf).read().splitlines()
    assert lines, "nothing logged"
    for line in lines:
        o = json.loads(line)
        assert {"time", "level", "subsys", "msg"} <= set(o), o
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", o["time"]), o
    http = [json.loads(x) for x in lines if json.loads(x)["subsys"] == "http"]
    assert http and "400" in http[0]["msg"] and "<" not in http[0]["msg"], http
    assert "<html" not in open(dm.stderr_path).read()
    # SIGHUP reopens the log file: after a rotation the daemon writes a new one
    os.rename(logf, logf + ".1")
    os.kill(dm.proc.pid, signal.SIGHUP)
    end = time.time() + 5
    while time.time() < end and not os.path.exists(logf):
        time.sleep(0.05)
    assert os.path.exists(logf), "SIGHUP did not reopen the log"
    rc = dm.stop()
    assert rc == 0, "allotd exited %r after SIGTERM; its log:\n%s" % (rc, open(logf).read()[-3000:])
    assert "draining" in open(logf).read()
    # a bad config file is a usage error naming the line
    with open(conf, "w") as f:
        f.write("workers -1\n")
    r = subprocess.run([ALLOTD, "--data-dir", d, "--config", conf], capture_output=True,
                       text=True, timeout=10)
    assert r.returncode == 2 and "allotd.conf:1" in r.stderr, r


def test_starting_is_503_then_ready():
    dm = Daemon(args=["--debug-ready-delay", "3s"], ready=False)
    # the default thread per connection is not a pool of size 0: libmicrohttpd says nothing
    assert "thread pool" not in dm.log(), dm.log()
    st, _ = dm.req("GET", "/readyz")
    assert st == 503, st
    expect(dm.req("GET", "/healthz"), 200)
    expect(dm.req("GET", "/v1/jobs", token=dm.admin), 503)
    dm.wait_ready(10)
    expect(dm.req("GET", "/v1/jobs", token=dm.admin), 200)
    assert dm.stop() == 0


def test_sigterm_drains_and_exits_0():
    dm = Daemon()
    expect(dm.req("GET", "/healthz"), 200)
    t0 = time.time()
    assert dm.stop() == 0
    assert time.time() - t0 < 10
    assert "draining" in dm.log() and "stopped" in dm.log()


if __name__ == "__main__":
    fx.run([test_init_prints_one_token_once, test_usage_errors_and_help,
            test_config_example_is_generated, test_config_file_and_json_logs,
            test_starting_is_503_then_ready, test_sigterm_drains_and_exits_0])
