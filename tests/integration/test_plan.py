"""`allot plan` against a real allotd, the test acting as the node's agent:
a small recorded history (four 2-GPU jobs queued on one 2-GPU node, run one
after the other) replayed on the current cluster and on one with two more
nodes shows the waits go away; a quota change and a removed node show in
the changed cluster; the price book gives a cost; the forecast reports; bad
options give clear errors and exit status 1."""

import time

import allotd_fixture as fx
from allotd_fixture import TENANTS, Daemon, expect
from cli_fixture import cli, fails, ok

dm = None
AG = None

BOOK = {"currency": "EUR",
        "books": [{"effective": "2026-01-01", "gpu_hour": {"H100-80GB": 400}}]}


def node(name, gpus=2):
    return {"name": name, "cpus": 16, "memory": 65536, "gpus": [{"model": "H100-80GB"}] * gpus}


def beat(name, body=None):
    return expect(dm.req("POST", "/v1/nodes/%s/heartbeat" % name, body or {}, token=AG), 200)


def get(jid):
    return expect(dm.req("GET", "/v1/jobs/%d" % jid, token=dm.admin), 200)


def wait_state(jid, state, timeout=15):
    end = time.time() + timeout
    while time.time() < end:
        j = get(jid)
        if j["state"] == state:
            return j
        beat("p-1")
        time.sleep(0.05)
    raise AssertionError("job %d not %s: %r" % (jid, state, j))


def submit(**kw):
    body = dict({"tenant": "research/nlp", "cpus": 2, "memory": 1024, "gpus": 2,
                 "command": ["true"]}, **kw)
    return expect(dm.req("POST", "/v1/jobs", body, token=dm.admin), 201)["id"]


def record_history():
    """Four 2-GPU jobs submitted together on the one 2-GPU node: each
    waits for the one before (about 2 s each), then runs 2 s."""
    left = [submit(tenant="research/nlp" if i % 2 else "research/vision") for i in range(4)]
    end = time.time() + 40
    while left and time.time() < end:
        started = [j for j in (get(x) for x in left) if j["state"] == "starting"]
        if not started:
            beat("p-1")
            time.sleep(0.05)
            continue
        jid = started[0]["id"]
        beat("p-1", {"jobs": [{"id": jid, "state": "running"}]})
        time.sleep(2)
        beat("p-1", {"jobs": [{"id": jid, "state": "succeeded", "exit_code": 0}]})
        wait_state(jid, "succeeded")
        left.remove(jid)
    assert not left, left
    # one job that has not started: its node is cordoned
    ok(cli(dm, "cordon", "p-1"))
    submit()


def test_add_nodes_cuts_the_wait():
    r = ok(cli(dm, "plan", "--add", "2xH100-80GB:8:64:512"))
    assert "history: 4 jobs replayed" in r.out and "1 pending" in r.out, r
    assert r.err == "", r  # no price book is not an error
    assert "mean wait (s)" in r.out and "changed" in r.out, r
    js = ok(cli(dm, "-o", "json", "plan", "--add", "2xH100-80GB:8:64:512")).json()
    cur, chg = js["current"], js["changed"]
    assert cur["gpus"] == 2 and chg["gpus"] == 18, js
    assert cur["jobs"] == 4 and cur["unfinished"] == 0 and chg["unfinished"] == 0, js
    assert cur["mean_wait_s"] >= 1.5, js  # each job waited for the one before
    assert chg["mean_wait_s"] < cur["mean_wait_s"] and chg["p95_wait_s"] == 0, js
    assert cur["utilization"] > chg["utilization"] > 0, js
    assert js["changes"] == [{"add": "2xH100-80GB:8:64:512"}], js
    assert set(cur["tenants"]) == {"research/nlp", "research/vision", "product/search"}, js
    assert cur["tenants"]["research/nlp"]["jobs"] == 2, js
    # GPU-hours are what the jobs held (the replay's, drain included): the
    # same finished work in both, each job's 2 GPUs for its recorded run
    ran = [j for j in dm_jobs() if j["state"] == "succeeded"]
    held = sum(2 * (j["end_time"] - j["start_time"]) for j in ran) / 3600.0
    assert len(ran) == 4 and abs(cur["gpu_hours"] - held) < 1e-6, (held, js)
    assert abs(chg["gpu_hours"] - held) < 1e-6, (held, js)
    assert js["history"]["recorded_mean_wait_s"] > 1, js
    assert js["history"]["recorded_p95_wait_s"] >= js["history"]["recorded_mean_wait_s"], js
    assert cur["capacity_cost_minor"] is None, js  # no price book yet


def test_second_node():
    expect(dm.req("POST", "/v1/nodes/register", node("p-2"), token=AG), 201)


def dm_jobs():
    return expect(dm.req("GET", "/v1/jobs?limit=1000", token=dm.admin), 200)["jobs"]


def test_requeued_job_is_pending():
    """A job requeued after it started is pending again with its last run's
    start_time: plan counts it pending, not still running from that start.
    The history's last job starts on the new node, which is then cordoned
    so that it stays pending once requeued."""
    jid = max(j["id"] for j in dm_jobs())
    end = time.time() + 15
    while get(jid)["state"] != "starting" and time.time() < end:
        beat("p-2")
        time.sleep(0.05)
    ok(cli(dm, "cordon", "p-2"))
    expect(dm.req("POST", "/v1/jobs/%d/requeue" % jid, {}, token=dm.admin), 202)
    end = time.time() + 15
    while get(jid)["state"] != "pending" and time.time() < end:
        beat("p-2", {"jobs": []})  # its run is gone from the node
        time.sleep(0.05)
    j = get(jid)
    assert j["state"] == "pending" and j["start_time"] > 0, j
    r = ok(cli(dm, "plan"))
    assert "1 pending" in r.out and "0 still running" in r.out, r
    h = ok(cli(dm, "-o", "json", "plan")).json()["history"]
    assert h["pending"] == 1 and h["running"] == 0 and h["jobs"] == 4, h
    ok(cli(dm, "uncordon", "p-2"))


def test_scoped_token_refused():
    """plan replays the whole cluster: a token of one tenant (it sees that
    subtree's jobs only) is refused, exit 3; a viewer of the cluster may."""
    member = dm.token("member", "research/nlp", "plan-member")
    r = fails(cli(dm, "plan", token=member), 3, "denied")
    assert "sees those of research/nlp only" in r.err, r
    ok(cli(dm, "plan", token=dm.token("viewer", "", "plan-viewer")))


def test_pricebook_error_is_an_error():
    """No price book (404) leaves the costs empty; any other error reading
    it is reported with its exit status, not taken for none. A proxy
    answers 500 for the price book and passes the rest to allotd."""
    import http.server
    import threading
    import urllib.request
    import urllib.error

    class Proxy(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path.startswith("/v1/pricebook"):
                code, body = 500, b'{"error": {"code": "store", "message": "disk on fire"}}'
            else:
                rq = urllib.request.Request("http://127.0.0.1:%d%s" % (dm.port, self.path),
                                            headers={"Authorization":
                                                     self.headers["Authorization"]})
                try:
                    with urllib.request.urlopen(rq, timeout=10) as f:
                        code, body = f.status, f.read()
                except urllib.error.HTTPError as e:
                    code, body = e.code, e.read()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass
    srv = http.server.HTTPServer(("127.0.0.1", 0), Proxy)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        url = "http://127.0.0.1:%d" % srv.server_address[1]
        r = fails(cli(dm, "plan", server=url), 5, "store")
        assert "disk on fire" in r.err, r
    finally:
        srv.shutdown()
        srv.server_close()


def test_quota_remove_and_cost():
    expect(dm.req("PUT", "/v1/pricebook", BOOK, token=dm.admin), 200)
    js = ok(cli(dm, "-o", "json", "plan", "--quota", "research/nlp=gpu:1", "--remove", "p-2",
                "--add", "H100")).json()
    assert js["changed"]["tenants"]["research/nlp"]["nominal_gpus"] == 1, js
    assert js["current"]["tenants"]["research/nlp"]["nominal_gpus"] == 8, js
    assert js["current"]["gpus"] == 4 and js["changed"]["gpus"] == 10, js  # -2 + 8
    assert js["currency"] == "EUR", js
    cur = js["current"]
    hours = cur["gpu_hours"]
    assert hours > 0 and cur["gpu_time_cost_minor"] == round(hours * 400), js
    assert cur["capacity_cost_minor"] >= cur["gpu_time_cost_minor"], js
    r = ok(cli(dm, "plan"))
    assert "EUR" in r.out and "changed" not in r.out.split("\n\n")[1], r


def test_forecast():
    r = ok(cli(dm, "plan", "--forecast", "--wait-target", "30m"))
    assert "forecast:" in r.out and "p95 wait target" not in r.out, r  # under two hours
    js = ok(cli(dm, "-o", "json", "plan", "--forecast")).json()
    assert "less than two whole hours" in js["forecast"]["error"], js


def test_bad_options():
    fails(cli(dm, "plan", "--add", "4xTPU"), 1, "usage")
    fails(cli(dm, "plan", "--add", "0xH100"), 1, "usage")
    fails(cli(dm, "plan", "--remove", "nosuch"), 1, "usage")
    fails(cli(dm, "plan", "--quota", "research/nlp=cpu:4"), 1, "usage")
    fails(cli(dm, "plan", "--quota", "research/nlp=gpu:-1"), 1, "usage")
    r = fails(cli(dm, "plan", "--quota", "nobody=gpu:4"), 1, "usage")
    assert "no tenant \"nobody\"" in r.err, r
    fails(cli(dm, "plan", "--wait-target", "1h"), 1, "usage")
    fails(cli(dm, "plan", "--forecast", "--horizon", "0"), 1, "usage")
    fails(cli(dm, "plan", "extra"), 1, "usage")
    fails(cli(dm, "-o", "csv", "plan"), 1, "usage")
    fails(cli(dm, "plan", "--remove", "p-1", "--remove", "p-2"), 1, "usage")
    r = fails(cli(dm, "plan", "--remove", "p-1", "--remove", "p-1"), 1, "usage")
    assert "--remove p-1 given twice" in r.err, r
    r = fails(cli(dm, "plan", "--quota", "research/nlp=gpu:0.0001"), 1, "usage")
    assert "at most 3 decimals" in r.err, r
    r = fails(cli(dm, "plan", "--quota", "nlp=gpu:1", "--quota", "research/nlp=gpu:2"), 1,
              "usage")
    assert "tenant research/nlp given twice (nlp and research/nlp)" in r.err, r
    fails(cli(dm, "plan", token="nope"), 3)


def test_scheduler_options():
    """plan replays with the queue options this allotd runs with (GET
    /v1/scheduler), not the defaults: restarted with other options, the
    plan's queue follows them."""
    global dm
    assert expect(dm.req("GET", "/v1/scheduler", token=dm.admin), 200) == {
        "order": "fair", "placement": "allot", "preempt_grace_s": 30,
        "preempt_min_runtime_s": 600, "fair_reclaim_s": 300, "fair_cap_percent": 150,
        "reserve_gangs": True, "large_gang_gpus": 16, "aging_s": 0,
        "las_threshold_gpu_s": 28800, "lending_hold_s": 0, "defrag_s": 300, "defrag_loss_s": 300}
    expect(dm.req("GET", "/v1/scheduler"), 401)
    q = ok(cli(dm, "-o", "json", "plan")).json()["scheduler"]
    assert q["fair_cap_percent"] == 150 and q["reserve_gangs"] and q["lending_hold_s"] == 0, q
    old = dm
    old.stop()
    dm = Daemon(data_dir=old.dir, args=["--order", "fifo", "--fair-cap", "250", "--lending-hold",
                                        "1h", "--no-reserve-gangs", "--las-threshold", "0s",
                                        "--preempt-min-runtime", "2m", "--defrag-interval", "0s"])
    dm.admin = old.admin
    got = expect(dm.req("GET", "/v1/scheduler", token=dm.admin), 200)
    assert got["order"] == "fifo" and got["fair_cap_percent"] == 250, got
    # what the plan replayed with (its queue options written back), not the reply echoed
    q = ok(cli(dm, "-o", "json", "plan")).json()["scheduler"]
    assert q == {"order": "fifo", "placement": "allot", "preempt_grace_s": 30,
                 "preempt_min_runtime_s": 120, "fair_reclaim_s": 300, "fair_cap_percent": 250,
                 "reserve_gangs": False, "large_gang_gpus": 16, "aging_s": 0,
                 "las_threshold_gpu_s": 0, "lending_hold_s": 3600, "defrag_s": 0,
                 "defrag_loss_s": 300}, q
    assert q == got, (q, got)
    r = ok(cli(dm, "plan"))
    assert "scheduling options of this allotd (allot scheduler" in r.out, r


if __name__ == "__main__":
    dm = Daemon()
    try:
        expect(dm.req("PUT", "/v1/tenants", TENANTS, token=dm.admin), 200)
        AG = dm.token("agent", "", "agents")
        expect(dm.req("POST", "/v1/nodes/register", node("p-1"), token=AG), 201)
        fx.run([record_history, test_add_nodes_cuts_the_wait, test_second_node,
                test_requeued_job_is_pending, test_scoped_token_refused,
                test_pricebook_error_is_an_error, test_quota_remove_and_cost, test_forecast, test_bad_options,
                test_scheduler_options])
    finally:
        dm.stop()
