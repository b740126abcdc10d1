"""`allot plan --forecast` on three weeks of history. A test cannot make a
real allotd record weeks of jobs, so a stand-in serves allotd's read API
(GET /v1/whoami, /v1/jobs, /v1/nodes, /v1/tenants, /v1/scheduler; /v1/pricebook answers 404 as allotd
does without a price book) with a synthetic history: research/nlp's demand
grows 4 % a day, research/vision's stays flat, both with a daily cycle, on
two nodes of 8 H100s. Holt-Winters finds a weekly season, a growing and a
flat trend, and the day the p95 wait target is missed comes later for a
looser target and not at all within a short horizon."""

import json
import math
import random
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import allotd_fixture as fx
from cli_fixture import cli, fails, ok

NOW = int(time.time())


def history():
    rnd = random.Random(7)
    start = NOW // 3600 * 3600 - 21 * 86400
    jobs = []
    for h in range(21 * 24):
        for tenant, base, growth in (("research/nlp", 4.0, 0.04), ("research/vision", 3.0, 0)):
            demand = base * (1 + growth * h / 24) * (1 + 0.5 * math.sin(2 * math.pi * (h % 24 - 8) / 24))
            n = int(demand // 2) + (1 if rnd.random() < (demand / 2) % 1 else 0)
            for _ in range(n):
                sub = start + h * 3600 + rnd.randint(0, 3599)
                jobs.append({"id": len(jobs) + 1, "tenant": tenant, "state": "succeeded",
                             "spec": {"tenant": tenant, "gpus": 2, "cpus": 4, "memory": 4096},
                             "placement": {"tasks": [{"task": 0, "node": "f-1"}]},
                             "submit_time": sub, "start_time": sub + 5,
                             "end_time": min(sub + 3605, NOW)})
    return jobs


REPLIES = {
    "/v1/whoami": {"token_id": 1, "name": "stand-in", "role": "admin", "tenant": ""},
    "/v1/jobs": {"jobs": history(), "next_cursor": 0},
    "/v1/nodes": {"nodes": [{"name": n, "state": "ready",
                             "inventory": {"name": n, "cpus": 64, "memory": 524288,
                                           "gpus": [{"model": "H100-80GB"}] * 8}}
                            for n in ("f-1", "f-2")]},
    "/v1/tenants": {"version": 1, "tenants": [
        {"path": "research", "quotas": {"gpu": {"nominal": 16}}},
        {"path": "research/nlp", "quotas": {"gpu": 8}},
        {"path": "research/vision", "quotas": {"gpu": 8, "memory": "8Ti"}}]},
    "/v1/scheduler": {"order": "fair", "placement": "allot", "preempt_grace_s": 30,
                      "preempt_min_runtime_s": 600, "fair_reclaim_s": 300,
                      "fair_cap_percent": 150, "reserve_gangs": True, "large_gang_gpus": 16,
                      "aging_s": 0, "las_threshold_gpu_s": 28800, "lending_hold_s": 0},
}


class Api(BaseHTTPRequestHandler):
    def do_GET(self):
        body = REPLIES.get(self.path.split("?")[0])
        status = 200 if body is not None else 404
        if body is None:
            body = {"error": {"code": "not_found", "message": "no price book is set"}}
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


class Server:
    """What cli() needs of a Daemon: the port and a token."""
    def __init__(self):
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Api)
        self.port = self.httpd.server_address[1]
        self.admin = "stand-in"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


srv = None


def forecast(*args):
    return ok(cli(srv, "-o", "json", "plan", "--forecast", *args)).json()["forecast"]


def test_seasons_and_trends():
    fc = forecast()
    assert fc["history_hours"] >= 503 and fc["season_hours"] == 168, fc
    trend = {s["tenant"]: s for s in fc["series"]}
    assert set(trend) == {"research/nlp", "research/vision"}, fc
    assert all(s["model"] == "H100-80GB" for s in fc["series"]), fc
    # nlp grows 0.16 GPUs a day on average (4 GPUs x 4 %)
    assert 0.05 < trend["research/nlp"]["trend_gpus_per_day"] < 0.3, fc
    assert abs(trend["research/vision"]["trend_gpus_per_day"]) < 0.05, fc
    assert trend["research/nlp"]["horizon_end_gpus"] > trend["research/nlp"]["next_day_gpus"], fc


def test_wait_target_dates():
    tight = forecast("--wait-target", "2h", "--horizon", "60")
    loose = forecast("--wait-target", "10h", "--horizon", "60")
    assert tight["missed"] == "on" and loose["missed"] == "on", (tight, loose)
    assert tight["missed_on"] < loose["missed_on"], (tight, loose)
    assert 1 < tight["growth_at_target"] < loose["growth_at_target"] <= loose["max_growth"]
    short = forecast("--wait-target", "10h", "--horizon", "3")
    assert short["missed"] is None, short
    r = ok(cli(srv, "plan", "--forecast", "--wait-target", "10h", "--horizon", "60"))
    assert "season 168 h" in r.out and "missed from %s" % loose["missed_on"] in r.out, r


def test_demand_of_one_job():
    """The history's mean demand is the GPUs its jobs held over its span,
    from the first submission until now: one 1-GPU job of 2,631 s a little
    over three hours ago is about 0.24 GPUs (it was once its GPU-seconds
    over its one-second span of submissions: 2,631 GPUs)."""
    good = REPLIES["/v1/jobs"]
    t0 = NOW // 3600 * 3600 - 3 * 3600
    REPLIES["/v1/jobs"] = {"next_cursor": 0, "jobs": [
        {"id": 1, "tenant": "research/nlp", "state": "succeeded",
         "spec": {"tenant": "research/nlp", "gpus": 1, "cpus": 4, "memory": 4096},
         "placement": {"tasks": [{"task": 0, "node": "f-1"}]},
         "submit_time": t0, "start_time": t0, "end_time": t0 + 2631}]}
    try:
        fc = forecast()
        assert fc["history_hours"] == 3, fc
        span = int(time.time()) - t0  # the plan's now lies between NOW and this
        d = fc["replay_mean_demand_gpus"]  # printed to 15 digits: compared so
        assert 2631 / span * (1 - 1e-9) <= d <= 2631 / (NOW - t0) * (1 + 1e-9), fc
    finally:
        REPLIES["/v1/jobs"] = good


def test_cursor_that_stands_still():
    """A server whose next_cursor does not move would have its pages read
    again (its jobs replayed twice): the list stops with a server error."""
    good = REPLIES["/v1/jobs"]
    REPLIES["/v1/jobs"] = dict(good, next_cursor=5)
    try:
        r = fails(cli(srv, "plan"), 5, "server")
        assert "page cursor did not move on (5 after 5)" in r.err and r.out == "", r
    finally:
        REPLIES["/v1/jobs"] = good


def test_bad_scheduler_reply():
    """A scheduler reply with a field missing or of the wrong type is the
    server's fault: exit status 5, naming the field; nothing is replayed.
    (The defragmentation fields may be missing: a server from before them
    replays with defragmentation off, as the reply above.)"""
    good = REPLIES["/v1/scheduler"]
    try:
        for k, v in (("fair_cap_percent", None), ("lending_hold_s", "1h"),
                     ("aging_s", -5), ("reserve_gangs", 1), ("order", 7),
                     ("defrag_s", "5m"), ("defrag_loss_s", -1)):
            REPLIES["/v1/scheduler"] = dict(good, **{k: v}) if v is not None else \
                {x: y for x, y in good.items() if x != k}
            r = fails(cli(srv, "plan"), 5, "server", k)
            assert k in r.err and r.out == "", (k, r)
    finally:
        REPLIES["/v1/scheduler"] = good


if __name__ == "__main__":
    srv = Server()
    fx.run([test_seasons_and_trends, test_wait_target_dates, test_demand_of_one_job,
            test_cursor_that_stands_still, test_bad_scheduler_reply])
