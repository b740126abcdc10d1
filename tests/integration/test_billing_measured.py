"""`bill: measured` against a real allotd, the test acting as the node's agent: each job's
measured GPU time is scaled by its own measured utilisation, a fraction's taken over its
compute share (the agent measures a fraction as a share of the whole GPU) and capped at all
of it, and the time without a utilisation figure (before the first sample, -1, no samples)
is billed as allocated, also when the job shares an hourly usage row with measured jobs.
Each job here holds its GPU for `held` seconds, of which its two samples measure one."""

import time

import allotd_fixture as fx
from allotd_fixture import TENANTS, Daemon, expect

dm = None
AG = None
NODE = "mb-1"
RATE = 3600000  # minor units per GPU-hour: 1,000 per GPU-second

BOOK = {
    "currency": "EUR",
    "books": [{"effective": "2026-01-01", "gpu_hour": {"H100-80GB": RATE}, "bill": "measured"}],
}


def submit(tenant, **kw):
    body = dict({"tenant": tenant, "cpus": 1, "memory": 256, "command": ["true"]}, **kw)
    return expect(dm.req("POST", "/v1/jobs", body, token=dm.admin), 201)["id"]


def after(ms):
    """Sleeps until the store's clock (whole seconds) is past time ms (bounded by the
    caller's times: at most a few seconds)."""
    end = time.time() + 10
    while int(time.time()) <= ms // 1000 and time.time() < end:
        time.sleep(0.05)


def out_of_hour_edge():
    """The jobs below run for a few seconds: keep them inside one hour, so that each job's
    samples and allocation meet in one hourly row (waits at most 20 s)."""
    left = 3600 - int(time.time()) % 3600
    if left < 20:
        time.sleep(left + 1)


def run_measured(jobs):
    """Runs jobs {id: utilisations or None} together on NODE: running, then two samples
    1 s apart per job that has utilisations (gpu_util, -1 for none), then succeeded.
    Returns {id: seconds held}."""
    for jid in jobs:
        fx.wait_job(dm, jid, "starting")
    fx.beat(dm, AG, NODE, {"jobs": [{"id": j, "state": "running"} for j in jobs]})
    starts = {j: fx.job(dm, j)["start_time"] for j in jobs}
    at = (max(starts.values()) + 1) * 1000 + 100
    smp = []
    for jid, utils in jobs.items():
        for k, u in enumerate(utils or []):
            smp.append({"job": jid, "task": 0, "at": at + 1000 * k, "cpu_ns": k, "mem_bytes": 1,
                        "gpu_util": u, "gpu_mem_bytes": -1, "energy_mj": -1,
                        "interval_ms": 1000})
    if smp:
        fx.beat(dm, AG, NODE, {"usage": {"samples": smp}})
    after(at + 1000 * max([1] + [len(u or []) - 1 for u in jobs.values()]))
    fx.beat(dm, AG, NODE, {"jobs": [{"id": j, "state": "succeeded", "exit_code": 0}
                                    for j in jobs]})
    held = {}
    for jid in jobs:
        j = fx.wait_job(dm, jid, "succeeded")
        held[jid] = j["end_time"] - j["start_time"]
        assert held[jid] >= 2, j
    last = max(fx.job(dm, j)["end_time"] for j in jobs)
    end = time.time() + 15
    while time.time() < end:  # a roll-up pass that began after the jobs ended
        if expect(dm.req("GET", "/v1/usage?by=tenant", token=dm.admin), 200)["as_of"] > last:
            return held
        time.sleep(0.1)
    raise AssertionError("no metering roll-up after %d" % last)


def gpu_line(tenant, kind):
    period = time.strftime("%Y-%m", time.gmtime())
    inv = expect(dm.req("GET", "/v1/invoices?period=" + period, token=dm.admin), 200)
    lines = [x for t in inv["tenants"] if t["tenant"] == tenant for x in t["lines"]
             if x["item"] == "gpu" and x["kind"] == kind]
    assert len(lines) == 1, inv
    return lines[0]


def check_line(line, billed_gpu_s):
    assert abs(line["hours"] - billed_gpu_s / 3600) < 2e-6, (line, billed_gpu_s)
    assert line["amount_minor"] == int(billed_gpu_s * RATE / 3600 + 0.5), (line, billed_gpu_s)


def test_fractions_over_their_share():
    """Fractions of one tenant, one hourly row: one using half of its 20 % share (the agent
    reads 10 % of the GPU) is billed half its time; one using more than its 25 % (a soft
    share: 40 %) all of it, not more; one whose shim had no figure (-1) all of it."""
    out_of_hour_edge()
    half = submit("research/nlp", gpu_milli=200)
    over = submit("research/nlp", gpu_milli=250)
    none = submit("research/nlp", gpu_milli=250)
    held = run_measured({half: [10, 10], over: [40, 40], none: [-1, -1]})
    rows = expect(dm.req("GET", "/v1/usage?by=item&tenant=research/nlp", token=dm.admin),
                  200)["rows"]
    frac = [r for r in rows if r["key"] == "fraction"][0]
    # allocated: the shares, whole; the utilisation reported stays the GPU's (10, 40: 25 %)
    assert frac["gpu_seconds"] == 0.2 * held[half] + 0.25 * (held[over] + held[none]), frac
    assert frac["sm_util_avg"] == 25.0, frac
    # one second measured, the rest of each job's time whole
    billed = 0.2 * (0.5 + held[half] - 1) + 0.25 * held[over] + 0.25 * held[none]
    check_line(gpu_line("research/nlp", "fraction"), billed)


def test_jobs_of_one_row_by_their_own_measure():
    """Two whole-GPU jobs in one hourly row (one tenant, user, model, hour): the one
    measured at 50 % is billed half its time, the one with no samples all of it (not the
    row's 50 % mean)."""
    out_of_hour_edge()
    busy = submit("research/vision", gpus=1)
    unmeasured = submit("research/vision", gpus=1)
    held = run_measured({busy: [50, 50], unmeasured: None})
    check_line(gpu_line("research/vision", "whole"), 0.5 + held[busy] - 1 + held[unmeasured])


def test_unmeasured_time_billed_whole():
    """A fraction whose shim had no figure (-1) for most of its time and measured it idle
    (0 %) for one second is billed all of its time but that second: a mean over the
    measured second alone would bill it nothing (an idle context opened for one sample an
    hour would make a fraction free)."""
    out_of_hour_edge()
    jid = submit("product/search", gpu_milli=500)
    held = run_measured({jid: [-1, -1, 0]})
    assert held[jid] >= 3, held
    check_line(gpu_line("product/search", "fraction"), 0.5 * (held[jid] - 1))


def restarted_with(statements):
    """Stops allotd, runs the SQL statements [(sql, args)] on its store, starts it again on
    its port and waits for a roll-up pass that began after the start (bounded)."""
    global dm
    import sqlite3
    port, admin = dm.port, dm.admin
    dm.stop()
    db = sqlite3.connect(dm.dir + "/allot.db")
    for sql, args in statements:
        db.execute(sql, args)
    db.commit()
    db.close()
    started = int(time.time())
    dm = Daemon(dm.dir, args=["--listen", "127.0.0.1:%d" % port, "--meter-interval", "200ms"])
    dm.admin = admin
    end = time.time() + 15
    while time.time() < end and expect(dm.req("GET", "/v1/usage?by=tenant", token=admin),
                                       200)["as_of"] <= started:
        time.sleep(0.1)


def test_samples_split_at_the_hour():
    """A sample speaks for the time since the one before: the interval that ends on the
    hour belongs to the hour before, and one across the hour is shared by both hours (it
    was all the later hour's, so an idle job's first minutes of an off-peak hour read as
    busy). The job's run is moved to begin 30 s before this hour by editing the store with
    allotd stopped; samples at -20, -10, 0 and +10 s around the hour, busy until the hour,
    idle after."""
    jid = submit("product/search", gpus=1)
    fx.wait_job(dm, jid, "starting")
    fx.beat(dm, AG, NODE, {"jobs": [{"id": jid, "state": "running"}]})
    fx.wait_job(dm, jid, "running")
    hour = int(time.time()) // 3600 * 3600
    restarted_with([("UPDATE jobs SET start_time = ? WHERE id = ?", (hour - 30, jid)),
                    ("UPDATE runs SET start_time = ? WHERE job_id = ? AND end_time IS NULL",
                     (hour - 30, jid))])
    smp = [{"job": jid, "task": 0, "at": (hour + d) * 1000, "cpu_ns": (30 + d) * 10 ** 9,
            "mem_bytes": 1, "gpu_util": 100 if d <= 0 else 0, "gpu_mem_bytes": -1,
            "energy_mj": -1, "interval_ms": 10000} for d in (-20, -10, 0, 10)]
    fx.beat(dm, AG, NODE, {"usage": {"samples": smp}})
    rows = {}
    end = time.time() + 15
    while time.time() < end:
        got = expect(dm.req("GET", "/v1/usage?by=hour&tenant=product/search&from=%d&to=%d"
                            % (hour - 3600, hour + 3600), token=dm.admin), 200)["rows"]
        rows = {r["key"]: r for r in got}
        if len(rows) == 2 and all(r["measured_seconds"] for r in rows.values()):
            break
        time.sleep(0.1)
    before = time.strftime("%Y-%m-%dT%H", time.gmtime(hour - 3600))
    this = time.strftime("%Y-%m-%dT%H", time.gmtime(hour))
    assert rows[before]["measured_seconds"] == 20.0 and rows[before]["sm_util_avg"] == 100.0, rows
    assert rows[this]["measured_seconds"] == 10.0 and rows[this]["sm_util_avg"] == 0.0, rows
    # one CPU busy since the run began: 30 s before the hour (10 s of them before the first
    # sample, which the task's counter holds), 10 s after
    assert rows[before]["cpu_used_seconds"] == 30.0, rows
    assert rows[this]["cpu_used_seconds"] == 10.0, rows
    fx.beat(dm, AG, NODE, {"jobs": [{"id": jid, "state": "succeeded", "exit_code": 0}]})
    fx.wait_job(dm, jid, "succeeded")


def test_cpu_before_the_first_sample():
    """A task's CPU counter starts at 0 with the task: the first sample's reading is the
    CPU the task used since its start, which counts too (it was dropped, a whole sample
    interval of CPU per run)."""
    out_of_hour_edge()
    jid = submit("research/vision", gpus=1)
    fx.wait_job(dm, jid, "starting")
    fx.beat(dm, AG, NODE, {"jobs": [{"id": jid, "state": "running"}]})
    start = fx.job(dm, jid)["start_time"]
    at = (start + 1) * 1000 + 100
    smp = [{"job": jid, "task": 0, "at": at + 1000 * k, "cpu_ns": (11 + 10 * k) * 10 ** 8,
            "mem_bytes": 1, "gpu_util": 50, "gpu_mem_bytes": -1, "energy_mj": -1,
            "interval_ms": 1000} for k in range(2)]
    fx.beat(dm, AG, NODE, {"usage": {"samples": smp}})
    after(at + 1000)
    fx.beat(dm, AG, NODE, {"jobs": [{"id": jid, "state": "succeeded", "exit_code": 0}]})
    fx.wait_job(dm, jid, "succeeded")
    end = time.time() + 15
    row = None
    while time.time() < end:
        rows = expect(dm.req("GET", "/v1/usage?by=job&tenant=research/vision&from=%d"
                             % (start - 1), token=dm.admin), 200)["rows"]
        row = ([r for r in rows if r["key"] == str(jid)] or [None])[0]
        if row and row["cpu_used_seconds"]:
            break
        time.sleep(0.1)
    # 1.1 s to the first sample, 1.0 s between the two
    assert row and row["cpu_used_seconds"] == 2.1, row


def test_clock_went_back():
    """A roll-up pass ran while the clock was hours ahead: the usage mark (meta meter_final)
    is after the current hour and a row of a future hour was written (here: put there with
    allotd stopped). allotd, started again, rolls the hours up again from where the mark is
    due and drops the future rows, which no longer count; it says why in its log. A future
    row goes also when the mark is where it belongs."""
    import sqlite3
    hour = int(time.time()) // 3600 * 3600
    future = time.strftime("%Y-%m-%dT%H", time.gmtime(hour + 2 * 3600))
    row = ("INSERT INTO usage_hourly VALUES (?, 'product/search', 'u', 'H100-80GB', 'whole',"
           " 0, ?, 0, 0, 0, 0, -1, -1, 0, -1)", (hour + 2 * 3600, 7200 * 10 ** 6))

    def hours():
        return [r["key"] for r in expect(dm.req(
            "GET", "/v1/usage?by=hour&tenant=product/search&from=%d&to=%d"
            % (hour, hour + 4 * 3600), token=dm.admin), 200)["rows"]]
    restarted_with([("UPDATE meta SET value = ? WHERE key = 'meter_final'",
                     (str(hour + 3 * 3600),)), row])
    assert future not in hours(), hours()
    db = sqlite3.connect(dm.dir + "/allot.db")
    mark = int(db.execute("SELECT value FROM meta WHERE key = 'meter_final'").fetchone()[0])
    db.close()
    assert mark <= hour, (mark, hour)
    assert "the clock went back" in dm.log(), dm.log()[-2000:]
    # a row of an hour to come while the mark is where it belongs (samples stamped by the
    # agents' right clocks held it there while allotd's ran ahead): dropped all the same
    restarted_with([row])
    assert future not in hours(), hours()


if __name__ == "__main__":
    dm = Daemon(args=["--meter-interval", "200ms"])
    try:
        expect(dm.req("PUT", "/v1/tenants", TENANTS, token=dm.admin), 200)
        AG = dm.token("agent", "", "agents")
        expect(dm.req("POST", "/v1/nodes/register",
                      {"name": NODE, "cpus": 16, "memory": 65536,
                       "gpus": [{"model": "H100-80GB"}] * 4}, token=AG), 201)
        expect(dm.req("PUT", "/v1/pricebook", BOOK, token=dm.admin), 200)
        fx.run([test_fractions_over_their_share, test_jobs_of_one_row_by_their_own_measure,
                test_samples_split_at_the_hour, test_cpu_before_the_first_sample,
                test_unmeasured_time_billed_whole, test_clock_went_back])
    finally:
        dm.stop()
