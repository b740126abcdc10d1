"""Metering and billing against a real allotd, the test acting as the node's
agent: allocated GPU, CPU and memory seconds are exact (known jobs, known
durations, also across an allotd restart), samples sent twice count once,
the price book is validated, invoices price every line to the cent and
reconcile with the cluster's cost, and members see only their tenant."""

import signal
import time

import json
import os

import allotd_fixture as fx
from allotd_fixture import TENANTS, Daemon, expect
from cli_fixture import cli, fails, ok

dm = None
AG = None
MEMBER = None
H100_MIB = None

BOOK = {
    "currency": "EUR",
    "books": [{
        "effective": "2026-01-01",
        # per hour; large so that seconds-long test jobs cost whole cents
        "gpu_hour": {"H100-80GB": 3600000},
        "cpu_core_hour": 36000,
        "memory_gib_hour": 3600,
        "reserved_discount_pct": 20,
        "borrowed_premium_pct": 10,
    }],
    "budgets": {"research/nlp": {"monthly_minor": 100000, "warn_pct": 80}},
}



def check_grouping(text):
    """The text format's rule: all lines of a metric form one group, its
    HELP and TYPE first; a histogram's _bucket, _sum and _count belong to it."""
    types, seen, current = {}, set(), None
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            types[name] = kind
        if not line or line.startswith("#"):
            name = line.split()[2] if line.startswith("# ") else None
        else:
            name = line.split("{")[0].split()[0]
            for suf in ("_bucket", "_sum", "_count"):
                if name.endswith(suf) and types.get(name[:-len(suf)]) == "histogram":
                    name = name[:-len(suf)]
        if name is None or name == current:
            continue
        assert name not in seen, "metric %s is split into two groups" % name
        if current:
            seen.add(current)
        current = name

def node(name, gpus=2):
    return {"name": name, "cpus": 16, "memory": 65536, "gpus": [{"model": "H100-80GB"}] * gpus}


def beat(name, body=None, status=200):
    return fx.beat(dm, AG, name, body, status)


def get(jid):
    return fx.job(dm, jid)


def wait_state(jid, state, timeout=10):
    return fx.wait_job(dm, jid, state, timeout)


def submit(**kw):
    body = dict({"tenant": "research/nlp", "cpus": 2, "memory": 1024, "command": ["true"]}, **kw)
    return expect(dm.req("POST", "/v1/jobs", body, token=dm.admin), 201)["id"]


def run_job(seconds, **kw):
    """A job the test runs as its agent: placed, running, then succeeded."""
    jid = submit(**kw)
    j = wait_state(jid, "starting")
    node_name = j["placement"]["tasks"][0]["node"]
    beat(node_name, {"jobs": [{"id": jid, "state": "running"}]})
    time.sleep(seconds)
    beat(node_name, {"jobs": [{"id": jid, "state": "succeeded", "exit_code": 0}]})
    return wait_state(jid, "succeeded")


def usage(query, token=None, status=200):
    return expect(dm.req("GET", "/v1/usage?" + query, token=token or dm.admin), status)


def wait_rollup(after):
    """Waits for a roll-up pass that began after time `after`."""
    end = time.time() + 15
    while time.time() < end:
        if usage("by=tenant")["as_of"] > after:
            return
        time.sleep(0.1)
    raise AssertionError("no metering roll-up after %d" % after)


def job_row(jid, t0):
    rows = usage("by=job&from=%d" % t0)["rows"]
    mine = [r for r in rows if r["key"] == str(jid)]
    assert len(mine) == 1, rows
    return mine[0]


def test_pricebook_validation():
    expect(dm.req("GET", "/v1/pricebook", token=dm.admin), 404)
    expect(dm.req("GET", "/v1/invoices", token=dm.admin), 409)
    bad = [
        ({"currency": "EUR", "books": []}, "books"),
        ({"currency": "EURO", "books": BOOK["books"]}, "currency"),
        ({"currency": "EUR", "books": [dict(BOOK["books"][0], colour=1)]}, "colour"),
        ({"currency": "EUR", "books": [dict(BOOK["books"][0], gpu_hour={"Z9": 1})]}, "Z9"),
        ({"currency": "EUR", "books": [dict(BOOK["books"][0], gpu_hour={"H100-80GB": -1})]},
         "gpu_hour"),
        ({"currency": "EUR", "books": [dict(BOOK["books"][0], reserved_discount_pct=101)]},
         "reserved_discount_pct"),
        ({"currency": "EUR", "books": [BOOK["books"][0], BOOK["books"][0]]}, "increase"),
        ({"currency": "EUR", "books": [dict(BOOK["books"][0], effective="soon")]}, "effective"),
        ({"currency": "EUR", "books": BOOK["books"], "budgets": {"x": {"monthly_minor": "a"}}},
         "budgets.x"),
        ({"currency": "EUR", "books": [dict(BOOK["books"][0], offpeak={
            "start_hour": 5, "end_hour": 5, "discount_pct": 30})]}, "no hour is off-peak"),
        # lower case, and a currency without hundredths, are refused, not misprinted
        ({"currency": "eur", "books": BOOK["books"]}, "capitals"),
        ({"currency": "JPY", "books": BOOK["books"]}, "JPY has no hundredths"),
        # "yes" is not true: the admin would believe borrowing is held
        ({"currency": "EUR", "books": BOOK["books"],
          "budgets": {"x": {"monthly_minor": 1, "hold_borrowed": "yes"}}},
         "budgets.x.hold_borrowed: true or false"),
        # no such day: it would read as March 3 and pass the order check
        ({"currency": "EUR", "books": [BOOK["books"][0],
                                       dict(BOOK["books"][0], effective="2099-02-31")]},
         "books[1].effective"),
        # September spelt with a sign or a space: it sorted before "2099-01-01" as text
        # and would never have applied
        ({"currency": "EUR", "books": [dict(BOOK["books"][0], effective="2099-+9-01"),
                                       dict(BOOK["books"][0], effective="2099-01-01")]},
         "books[0].effective"),
        ({"currency": "EUR", "books": [dict(BOOK["books"][0], effective=" 2099-9-01")]},
         "books[0].effective"),
        # ten digits of seconds are a time, not a date (it sorted first as text too)
        ({"currency": "EUR", "books": [dict(BOOK["books"][0], effective="2000000000"),
                                       dict(BOOK["books"][0], effective="2026-01-01")]},
         "books[0].effective"),
    ]
    for body, word in bad:
        b = expect(dm.req("PUT", "/v1/pricebook", body, token=dm.admin), 422, word)
        assert word in b["error"]["message"], (word, b)
    expect(dm.req("PUT", "/v1/pricebook", "{", token=dm.admin), 400)
    expect(dm.req("PUT", "/v1/pricebook", BOOK, token=MEMBER), 403)
    expect(dm.req("GET", "/v1/pricebook", token=dm.admin), 404)  # nothing stored by the above
    expect(dm.req("PUT", "/v1/pricebook", BOOK, token=dm.admin), 200)
    assert expect(dm.req("GET", "/v1/pricebook", token=dm.admin), 200) == BOOK
    # a closed version written out with its defaults prices every hour alike: no change;
    # a rate that does change is refused
    explicit = json.loads(json.dumps(BOOK))
    explicit["books"][0].update(bill="allocated", mig_hour={}, fraction_markup_pct=0,
                                offpeak={"start_hour": 22, "end_hour": 6, "discount_pct": 0})
    expect(dm.req("PUT", "/v1/pricebook", explicit, token=dm.admin), 200)
    changed = json.loads(json.dumps(BOOK))
    changed["books"][0]["cpu_core_hour"] = 1
    expect(dm.req("PUT", "/v1/pricebook", changed, token=dm.admin), 409)
    expect(dm.req("PUT", "/v1/pricebook", BOOK, token=dm.admin), 200)
    assert expect(dm.req("GET", "/v1/pricebook", token=dm.admin), 200) == BOOK
    # a member of research/vision sees the prices, not research/nlp's budget
    assert expect(dm.req("GET", "/v1/pricebook", token=MEMBER), 200) == dict(BOOK, budgets={})


def test_allocated_seconds_exact():
    t0 = int(time.time()) - 1
    a = run_job(2.2, gpus=1)
    b = run_job(1.2, gpu_milli=250)
    wait_rollup(b["end_time"])
    ra, rb = job_row(a["id"], t0), job_row(b["id"], t0)
    da, db = a["end_time"] - a["start_time"], b["end_time"] - b["start_time"]
    assert da >= 2 and db >= 1, (a, b)
    assert ra["gpu_seconds"] == da and ra["cpu_core_seconds"] == 2 * da, (ra, a)
    assert ra["memory_gib_seconds"] == da and ra["jobs"] == 1, ra
    assert rb["gpu_seconds"] == 0.25 * db, (rb, b)
    # the roll-ups say the same, grouped
    t = [r for r in usage("by=tenant&from=%d" % t0)["rows"] if r["key"] == "research/nlp"][0]
    assert t["gpu_seconds"] == da + 0.25 * db and t["jobs"] == 2, t
    rows = usage("by=item&from=%d" % t0)["rows"]
    items = {r["key"]: r for r in rows}
    assert items["gpu"]["gpu_seconds"] == da and items["fraction"]["gpu_seconds"] == 0.25 * db
    keys = [r["key"] for r in rows]
    assert keys == sorted(keys), keys  # rows in key order, whatever order they were met in
    jobs = [int(r["key"]) for r in usage("by=job")["rows"]]
    assert jobs == sorted(jobs), jobs  # job ids by value: 9 before 10
    day = usage("by=day&from=%d" % t0)["rows"]
    assert sum(r["gpu_seconds"] for r in day) == da + 0.25 * db, day


def test_users_of_two_tenants_stay_apart():
    """by=user keys rows by the jobs' tenant and the submitting token's name: tokens named
    alike in two tenants are two users, each with its own figures."""
    t0 = int(time.time()) - 1
    sams = {t: dm.token("member", t, "sam") for t in ("research/nlp", "product/search")}
    ids = {}
    for tenant, tok in sams.items():
        # CPU only: the invoice test below prices research/nlp's whole GPUs against by=item
        body = {"tenant": tenant, "cpus": 2, "memory": 1024, "command": ["true"]}
        ids[tenant] = expect(dm.req("POST", "/v1/jobs", body, token=tok), 201)["id"]
    for tenant, jid in ids.items():
        j = wait_state(jid, "starting")
        beat(j["placement"]["tasks"][0]["node"], {"jobs": [{"id": jid, "state": "running"}]})
    time.sleep(1.1)
    runs = {}
    for tenant, jid in ids.items():
        beat(get(jid)["placement"]["tasks"][0]["node"],
             {"jobs": [{"id": jid, "state": "succeeded", "exit_code": 0}]})
        j = wait_state(jid, "succeeded")
        runs[tenant] = j["end_time"] - j["start_time"]
    wait_rollup(max(get(jid)["end_time"] for jid in ids.values()))
    rows = {r["key"]: r for r in usage("by=user&from=%d" % t0)["rows"]}
    for tenant in ids:
        r = rows.get(tenant + ":sam")
        assert r, rows
        assert r["tenant"] == tenant and r["jobs"] == 1, r
        assert r["cpu_core_seconds"] == 2 * runs[tenant], (r, runs)
    assert "sam" not in rows, rows
    # the jobs the admin submitted are the admin's in their tenant
    assert "research/nlp:admin" in rows, rows
    # a member of one tenant sees its own user only
    mine = usage("by=user&from=%d" % t0, token=sams["product/search"])["rows"]
    assert [r["key"] for r in mine] == ["product/search:sam"], mine


def test_samples_count_once():
    t0 = int(time.time()) - 1
    jid = submit(gpus=1)
    j = wait_state(jid, "starting")
    name = j["placement"]["tasks"][0]["node"]
    beat(name, {"jobs": [{"id": jid, "state": "running"}]})
    now = int(time.time() * 1000)
    smp = [{"job": jid, "task": 0, "at": now + k * 500, "cpu_ns": k * 500000000,
            "mem_bytes": 1 << 20, "gpu_util": 50 + 20 * k, "gpu_mem_bytes": (k + 1) << 30,
            "energy_mj": 1000 * k} for k in range(3)]
    body = {"usage": {"samples": smp}}
    beat(name, body)
    beat(name, body)  # an agent resending what it buffered: stored once
    # bad samples are refused whole and store nothing
    bad = {"usage": {"samples": [dict(smp[0], at=now + 99, gpu_util=101)]}}
    e = beat(name, bad, 400)
    assert "gpu_util" in e["error"]["message"], e
    e = beat(name, {"usage": {"samples": [dict(smp[0], extra=1)]}}, 400)
    assert "extra" in e["error"]["message"], e
    # another node's samples of this job (its task does not run there) are not stored
    expect(dm.req("POST", "/v1/nodes/register", node("m-spy"), token=AG), 201)
    expect(dm.req("POST", "/v1/nodes/m-spy/cordon", token=dm.admin), 200)
    beat("m-spy", {"usage": {"samples": [dict(smp[1], at=now + 250, cpu_ns=10 ** 15,
                                                gpu_util=3)]}})
    time.sleep(1.1)
    beat(name, {"jobs": [{"id": jid, "state": "succeeded", "exit_code": 0}]})
    j = wait_state(jid, "succeeded")
    wait_rollup(j["end_time"])
    r = job_row(jid, t0)
    assert r["cpu_used_seconds"] == 1.0, r
    assert r["sm_util_avg"] == 80.0, r  # (70 x 0.5 s + 90 x 0.5 s) / 1 s
    assert r["gpu_memory_peak_bytes"] == 3 << 30 and r["energy_joules"] == 2.0, r


def after(ms):
    """Sleeps until the store's clock (whole seconds) is past time ms (bounded: a few s)."""
    end = time.time() + 10
    while int(time.time()) <= ms // 1000 and time.time() < end:
        time.sleep(0.05)


def running_job():
    """A 1-GPU job placed and reported running by its node: (id, job, node, the first
    sample time: just after the second its run began, runs being whole seconds)."""
    jid = submit(gpus=1)
    j = wait_state(jid, "starting")
    name = j["placement"]["tasks"][0]["node"]
    beat(name, {"jobs": [{"id": jid, "state": "running"}]})
    return jid, j, name, (j["start_time"] + 1) * 1000 + 100


def test_counters_stay_within_a_run():
    """A job evicted from one node and started again on another has two runs; the cumulative
    counters (CPU time, GPU energy) of the second node are never differenced against the
    first's, a counter that goes back is not counted, and the time between the runs (queued)
    is not measured time."""
    t0 = int(time.time()) - 1
    expect(dm.req("POST", "/v1/nodes/register", node("m-again"), token=AG), 201)
    expect(dm.req("POST", "/v1/nodes/m-again/cordon", token=dm.admin), 200)
    jid = submit(gpus=1)
    j = wait_state(jid, "starting")
    assert j["placement"]["tasks"][0]["node"] == "m-1", j
    beat("m-1", {"jobs": [{"id": jid, "state": "running"}]})

    def smp(at, cpu_ns, energy_mj):
        return {"job": jid, "task": 0, "at": at, "cpu_ns": cpu_ns, "mem_bytes": 1 << 20,
                "gpu_util": 90, "gpu_mem_bytes": 1 << 30, "energy_mj": energy_mj,
                "interval_ms": 15000}

    # 1 s of CPU and 1 J on m-1, after the second the run began (runs are whole seconds)
    at = (j["start_time"] + 1) * 1000 + 100
    beat("m-1", {"usage": {"samples": [smp(at, 0, 1000000), smp(at + 1000, 10 ** 9, 1001000)]}})
    after(at + 1000)
    expect(dm.req("POST", "/v1/nodes/m-again/uncordon", token=dm.admin), 200)
    expect(dm.req("POST", "/v1/nodes/m-1/drain?evict=1", token=dm.admin), 200)
    end = time.time() + 10
    while time.time() < end:
        j = get(jid)
        if j["state"] == "starting" and j["placement"]["tasks"][0]["node"] == "m-again":
            break
        time.sleep(0.05)
    assert j["state"] == "starting" and j["placement"]["tasks"][0]["node"] == "m-again", j
    beat("m-1", {"jobs": []})
    expect(dm.req("POST", "/v1/nodes/m-1/uncordon", token=dm.admin), 200)
    beat("m-again", {"jobs": [{"id": jid, "state": "running"}]})
    # m-again's GPU counter stands at 900,000 J and its cgroup's CPU counter starts again at 0:
    # 1 J and 1 s, then the energy counter goes back (not counted), then 2 J and 1 s more
    at = (j["start_time"] + 1) * 1000 + 100
    beat("m-again", {"usage": {"samples": [
        smp(at, 0, 900000000), smp(at + 1000, 10 ** 9, 900001000),
        smp(at + 2000, 15 * 10 ** 8, 5000), smp(at + 3000, 2 * 10 ** 9, 7000)]}})
    after(at + 3000)
    beat("m-again", {"jobs": [{"id": jid, "state": "succeeded", "exit_code": 0}]})
    j = wait_state(jid, "succeeded")
    expect(dm.req("POST", "/v1/nodes/m-again/cordon", token=dm.admin), 200)
    wait_rollup(j["end_time"])
    r = job_row(jid, t0)
    assert r["energy_joules"] == 4.0, r  # 1 J + 1 J + 2 J
    assert r["cpu_used_seconds"] == 3.0, r  # 1 s + 2 s
    assert r["measured_seconds"] == 4.0, r  # 1 s + 3 s: the time it was queued is not


def test_samples_after_a_requeue():
    """An agent's samples of a run that a requeue took away (sent with its next heartbeat,
    or later from its buffer) count, also once the job's next run is placed on another
    node: the run their time falls in put the task on the sending node. They were refused
    since the job no longer named the node."""
    t0 = int(time.time()) - 1
    jid, j, name, at = running_job()
    after(at + 1000)
    expect(dm.req("POST", "/v1/nodes/%s/cordon" % name, token=dm.admin), 200)
    expect(dm.req("POST", "/v1/nodes/m-again/uncordon", token=dm.admin), 200)
    expect(dm.req("POST", "/v1/jobs/%d/requeue" % jid, {}, token=dm.admin), 202)
    beat(name, {"jobs": []})  # its processes are gone: the next run may start
    j = wait_state(jid, "starting")
    assert j["placement"]["tasks"][0]["node"] == "m-again", j
    expect(dm.req("POST", "/v1/nodes/m-again/cordon", token=dm.admin), 200)
    beat(name, {"usage": {"samples": [
        {"job": jid, "task": 0, "at": at + k * 1000, "cpu_ns": k * 10 ** 9, "mem_bytes": 1,
         "gpu_util": 60, "gpu_mem_bytes": -1, "energy_mj": -1, "interval_ms": 1000}
        for k in range(2)]}})
    expect(dm.req("POST", "/v1/jobs/%d/cancel" % jid, token=dm.admin), 200)
    expect(dm.req("POST", "/v1/nodes/%s/uncordon" % name, token=dm.admin), 200)
    wait_rollup(int(time.time()))
    r = job_row(jid, t0)
    assert r["measured_seconds"] == 1.0 and r["sm_util_avg"] == 60.0, r
    assert r["cpu_used_seconds"] == 1.0, r


def test_huge_counters_are_counted():
    """A counter's growth near 2^63 is counted as it is (it was lost: the split over hours
    multiplied it by milliseconds in 64 bits); a huge memory figure (a job can write the
    shim region some come from) is taken, not refused with the node's whole heartbeat."""
    t0 = int(time.time()) - 1
    jid, j, name, at = running_job()

    def smp(at, energy_mj, mem=1 << 20):
        return {"job": jid, "task": 0, "at": at, "cpu_ns": 0, "mem_bytes": mem, "gpu_util": 50,
                "gpu_mem_bytes": 1 << 30, "energy_mj": energy_mj, "interval_ms": 15000}
    beat(name, {"usage": {"samples": [smp(at, 0, 1 << 62), smp(at + 1000, 9 * 10 ** 18)]}})
    while int(time.time()) <= (at + 1000) // 1000:
        time.sleep(0.05)
    beat(name, {"jobs": [{"id": jid, "state": "succeeded", "exit_code": 0}]})
    j = wait_state(jid, "succeeded")
    wait_rollup(j["end_time"])
    r = job_row(jid, t0)
    assert r["energy_joules"] == 9 * 10 ** 15, r


def test_restart_keeps_runs_exact():
    global dm
    t0 = int(time.time()) - 1
    jid = submit(gpus=2)
    j = wait_state(jid, "starting")
    name = j["placement"]["tasks"][0]["node"]
    beat(name, {"jobs": [{"id": jid, "state": "running"}]})
    time.sleep(1.1)
    port, admin = dm.port, dm.admin
    dm.stop(signal.SIGKILL)
    dm = Daemon(dm.dir, args=["--listen", "127.0.0.1:%d" % port, "--meter-interval", "200ms",
                              "--idle-window", "2s", "--idle-threshold", "10",
                              "--idle-class-windows", "inference=0", "--idle-action", "preempt",
                      "--anomaly-window", "4s"])
    dm.admin = admin
    time.sleep(1.1)
    beat(name, {"jobs": [{"id": jid, "state": "succeeded", "exit_code": 0}]})
    j = wait_state(jid, "succeeded")
    wait_rollup(j["end_time"])
    r = job_row(jid, t0)
    assert r["gpu_seconds"] == 2 * (j["end_time"] - j["start_time"]), (r, j)


def test_invoice_prices_and_reconciles():
    period = time.strftime("%Y-%m", time.gmtime())
    inv = expect(dm.req("GET", "/v1/invoices?period=" + period, token=dm.admin), 200)
    assert inv["currency"] == "EUR" and inv["price_book"] == "2026-01-01", inv
    total = sum(t["total_minor"] for t in inv["tenants"])
    assert total == inv["billed_minor"], inv
    assert total + inv["unbilled"]["amount_minor"] == inv["cluster"]["amount_minor"], inv
    u = inv["unbilled"]
    assert u["amount_minor"] == u["idle_minor"] + u["adjustments_minor"], u
    assert u["idle_minor"] >= 0 and u["adjustments_minor"] > 0, u  # reserved work: a discount
    nlp = [t for t in inv["tenants"] if t["tenant"] == "research/nlp"][0]
    assert nlp["budget_minor"] == 100000, nlp
    # each subtree's total: research is research/nlp plus its other children
    assert inv["subtrees"]["research"] == sum(
        t["total_minor"] for t in inv["tenants"] if t["tenant"].startswith("research/")), inv
    assert inv["subtrees"]["research/nlp"] == nlp["total_minor"], inv
    # an invoice of part of research holds no "research" total made of that part alone
    part = expect(dm.req("GET", "/v1/invoices?period=%s&tenant=research/nlp" % period,
                         token=dm.admin), 200)
    assert part["subtrees"] == {"research/nlp": nlp["total_minor"]}, part["subtrees"]
    by_item = usage("by=item&from=" + period)["rows"]
    gpu_s = [r for r in by_item if r["key"] == "gpu"][0]["gpu_seconds"]
    whole = [x for x in nlp["lines"] if x["item"] == "gpu" and x["kind"] == "whole"]
    assert len(whole) == 1 and whole[0]["capacity"] == "reserved", nlp
    # 3,600,000 per GPU-hour, 20 % off inside the quota, rounded once, half up
    want = int(gpu_s * 3600000 * 80 / 100 / 3600 + 0.5)
    assert whole[0]["amount_minor"] == want, (whole, gpu_s)
    assert abs(whole[0]["hours"] - gpu_s / 3600) < 1e-6, whole
    cpu = [x for x in nlp["lines"] if x["item"] == "cpu"]
    assert len(cpu) == 1 and cpu[0]["amount_minor"] >= 0, nlp
    # CSV and HTML carry the same totals
    st, csv = dm.req("GET", "/v1/invoices?format=csv&period=" + period, token=dm.admin, raw=True)
    assert st == 200 and csv.startswith("tenant,item,"), csv
    assert "research/nlp,total,,,,,,,,%d," % nlp["total_minor"] in csv, csv
    st, html = dm.req("GET", "/v1/invoices?format=html&period=" + period, token=dm.admin,
                      raw=True)
    assert st == 200 and "<h2>research/nlp</h2>" in html, html
    expect(dm.req("GET", "/v1/invoices?period=2026-13", token=dm.admin), 400)
    for day in ("2026-11-31", "2026-02-29", "2026-04-31"):  # days those months lack
        expect(dm.req("GET", "/v1/usage?from=" + day, token=dm.admin), 400, day)
    expect(dm.req("GET", "/v1/usage?from=2024-02-29&to=2024-03-01", token=dm.admin), 200)  # leap
    expect(dm.req("GET", "/v1/invoices?format=pdf", token=dm.admin), 400)
    # per job every sample of the window is read: a month at most, the roll-ups 400 days
    b = expect(dm.req("GET", "/v1/usage?by=job&from=2026-01-01&to=2026-03-01", token=dm.admin),
               400)
    assert "by=job: at most 32 days" in b["error"]["message"], b
    expect(dm.req("GET", "/v1/usage?by=job&from=2026-01&to=2026-02", token=dm.admin), 200)
    expect(dm.req("GET", "/v1/usage?by=tenant&from=2026-01-01&to=2026-03-01", token=dm.admin),
           200)


def whole_gpu_amount(tenant="research/nlp"):
    period = time.strftime("%Y-%m", time.gmtime())
    inv = expect(dm.req("GET", "/v1/invoices?period=" + period, token=dm.admin), 200)
    t = [t for t in inv["tenants"] if t["tenant"] == tenant][0]
    return sum(x["amount_minor"] for x in t["lines"] if x["item"] == "gpu")


def test_pricebook_model_aliases():
    """gpu_hour may name a model by any of its catalog names (an alias, any case): the book is
    stored under the canonical name, so it prices that model's usage; a book naming one model
    (or MIG profile) twice is refused, naming both keys."""
    want = whole_gpu_amount()
    assert want > 0
    by_alias = dict(BOOK, books=[dict(BOOK["books"][0], gpu_hour={"h100": 3600000})])
    assert expect(dm.req("PUT", "/v1/pricebook", by_alias, token=dm.admin), 200) == BOOK
    assert expect(dm.req("GET", "/v1/pricebook", token=dm.admin), 200) == BOOK
    assert whole_gpu_amount() == want
    for field, keys in (("gpu_hour", ("H100-80GB", "H100-SXM5-80GB")),
                        ("gpu_hour", ("H100", "h100")),
                        ("mig_hour", ("1g.10gb", "1G.10GB"))):
        twice = dict(BOOK, books=[dict(BOOK["books"][0], **{field: {k: 1 for k in keys}})])
        e = expect(dm.req("PUT", "/v1/pricebook", twice, token=dm.admin), 422, keys)
        msg = e["error"]["message"]
        assert all('"%s"' % k in msg for k in keys) and field in msg, (keys, e)
    assert expect(dm.req("GET", "/v1/pricebook", token=dm.admin), 200) == BOOK


def metrics():
    st, text = dm.req("GET", "/metrics", raw=True)
    assert st == 200, text
    return text


def test_metrics_and_budgets():
    # the node's readings and health, as an agent sends them
    beat("m-1", {"usage": {"gpus": [{"index": 0, "util_gpu": 42, "util_mem": 10,
                                     "mem_used_mib": 2048, "energy_mj": 123456, "temp_c": 51,
                                     "processes": 1}]},
                 # listed out of order: readings go with the GPU of their index
                 "health": {"gpus": [{"index": 1, "uuid": "GPU-m1-1", "model": "H100-80GB",
                                      "health": "healthy", "text": "ok", "mig": []},
                                     {"index": 0, "uuid": "GPU-m1-0", "model": "H100-80GB",
                                      "health": "degraded", "text": "Xid 13", "mig": []}]}})
    # a budget nlp has spent already: crossed once, recorded once
    # and one on the parent, which counts its subtree (nlp's cost)
    book = dict(BOOK, budgets={"research/nlp": {"monthly_minor": 1},
                               "research": {"monthly_minor": 2}})
    expect(dm.req("PUT", "/v1/pricebook", book, token=dm.admin), 200)
    end = time.time() + 15
    while time.time() < end:
        m = metrics()
        if 'allot_tenant_budget_minor{tenant="research/nlp"} 1\n' in m:
            break
        time.sleep(0.1)
    assert 'allot_tenant_budget_minor{tenant="research/nlp"} 1\n' in m, m
    assert 'allot_tenant_gpu_seconds_total{tenant="research/nlp",model="H100-80GB"}' in m, m
    assert 'allot_tenant_month_cost_minor{tenant="research/nlp"}' in m, m
    ratio = [l for l in m.splitlines()
             if l.startswith('allot_tenant_budget_used_ratio{tenant="research/nlp"}')]
    assert ratio and float(ratio[0].split()[1]) > 1, ratio
    parent = [l for l in m.splitlines()
              if l.startswith('allot_tenant_budget_used_ratio{tenant="research"}')]
    assert parent and float(parent[0].split()[1]) > 0.5, parent
    assert ('DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-m1-0",Hostname="m-1",'
            'modelName="H100-80GB"} 42\n') in m, m
    assert 'DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-m1-0",Hostname="m-1",' in m, m
    assert 'allot_gpu_health{node="m-1",gpu="0",uuid="GPU-m1-0",model="H100-80GB"} 1\n' in m, m
    assert 'allot_gpu_health{node="m-1",gpu="1",uuid="GPU-m1-1",model="H100-80GB"} 0\n' in m, m
    assert 'allot_node_state{node="m-1",state="ready"} 1\n' in m, m
    assert 'allot_node_fenced{node="m-1"} 0\n' in m, m
    check_grouping(m)
    time.sleep(0.5)  # more passes: still one entry
    entries = expect(dm.req("GET", "/v1/audit?limit=1000", token=dm.admin), 200)["entries"]
    crossed = [e for e in entries if e["target"] == "tenant/research/nlp"
               and e["action"].startswith("budget.")]
    assert len(crossed) == 1 and crossed[0]["action"] == "budget.exhausted", crossed
    assert [e["action"] for e in entries if e["target"] == "tenant/research"] == \
        ["budget.exhausted"], entries[-5:]
    assert expect(dm.req("GET", "/v1/audit/verify", token=dm.admin), 200)["ok"], "chain"
    # a new budget within the month is told when it is crossed too: raised to about 1.5
    # times what nlp spent, with a warning at half, it warns again (once)
    cost = [l for l in m.splitlines()
            if l.startswith('allot_tenant_month_cost_minor{tenant="research/nlp"}')]
    cost = int(float(cost[0].split()[1]))
    book = dict(BOOK, budgets={"research/nlp": {"monthly_minor": cost * 3 // 2 + 1,
                                                "warn_pct": 50}})
    expect(dm.req("PUT", "/v1/pricebook", book, token=dm.admin), 200)
    end = time.time() + 15
    warned = []
    while time.time() < end and not warned:
        entries = expect(dm.req("GET", "/v1/audit?limit=1000", token=dm.admin), 200)["entries"]
        warned = [e for e in entries if e["target"] == "tenant/research/nlp"
                  and e["action"] == "budget.warning"]
        time.sleep(0.1)
    assert len(warned) == 1 and "of %d minor units" % (cost * 3 // 2 + 1) in warned[0]["result"], \
        warned
    assert 'allot_tenant_budget_warn_ratio{tenant="research/nlp"} 0.500000\n' in metrics()
    expect(dm.req("PUT", "/v1/pricebook", BOOK, token=dm.admin), 200)


def test_pricebook_warnings():
    """A book that prices none of a registered node's GPUs, or budgets a tenant that does
    not exist, is stored, and the reply (and the CLI) say so; GET shows no warnings."""
    book = json.loads(json.dumps(BOOK))
    now = time.gmtime()  # a version of this month (past months' are closed)
    book["books"].append(dict(book["books"][0], gpu_hour={"A100-80GB": 100},
                              effective="%04d-%02d-01" % (now.tm_year, now.tm_mon)))
    book["budgets"]["reserch/nlp"] = {"monthly_minor": 5}
    r = expect(dm.req("PUT", "/v1/pricebook", book, token=dm.admin), 200)
    assert any(w.startswith("gpu_hour has no rate for H100-80GB (node m-1")
               for w in r["warnings"]), r
    assert any(w.startswith("budgets.reserch/nlp: no such tenant") for w in r["warnings"]), r
    assert len(r["warnings"]) == 2, r
    assert "warnings" not in expect(dm.req("GET", "/v1/pricebook", token=dm.admin), 200)
    path = os.path.join(fx.tempdir(), "book.json")
    with open(path, "w") as f:
        json.dump(book, f)
    out = ok(cli(dm, "pricebook", "apply", "-f", path))
    assert "allot: warning: gpu_hour has no rate for H100-80GB" in out.err, out
    r = expect(dm.req("PUT", "/v1/pricebook", BOOK, token=dm.admin), 200)
    assert "warnings" not in r, r


def test_invoice_names_its_price_books():
    """An invoice names the price book versions that priced its month: with one taking
    effect today, both (the header says so); a month before any version, none."""
    now = time.gmtime()
    today = "%04d-%02d-%02d" % (now.tm_year, now.tm_mon, now.tm_mday)
    book = json.loads(json.dumps(BOOK))
    book["books"].append(dict(book["books"][0], effective=today))
    expect(dm.req("PUT", "/v1/pricebook", book, token=dm.admin), 200)
    try:
        inv = expect(dm.req("GET", "/v1/invoices", token=dm.admin), 200)
        want = [today] if now.tm_mday == 1 else ["2026-01-01", today]
        assert inv["price_books"] == want and inv["price_book"] == today, inv
        out = ok(cli(dm, "invoice")).out.splitlines()[0]
        assert out.endswith("price book%s of %s)" % ("s" if len(want) > 1 else "",
                                                    ", ".join(want))), out
        old = expect(dm.req("GET", "/v1/invoices?period=2025-12", token=dm.admin), 200)
        assert old["price_book"] is None and old["price_books"] == [], old
        assert "no price book in force" in ok(cli(dm, "invoice", "--period", "2025-12")).out
    finally:
        expect(dm.req("PUT", "/v1/pricebook", BOOK, token=dm.admin), 200)


def test_parent_budget_on_the_invoice():
    """An organisation's budget, which covers its teams and has no lines of its own, is on
    the invoice beside its subtree's total (JSON, table, HTML); a member of another team
    does not see it."""
    book = json.loads(json.dumps(BOOK))
    book["budgets"]["research"] = {"monthly_minor": 200000}
    expect(dm.req("PUT", "/v1/pricebook", book, token=dm.admin), 200)
    try:
        inv = expect(dm.req("GET", "/v1/invoices", token=dm.admin), 200)
        assert inv["budgets"] == {"research": 200000, "research/nlp": 100000}, inv["budgets"]
        assert "research" in inv["subtrees"], inv["subtrees"]
        out = ok(cli(dm, "invoice")).out
        line = [l for l in out.splitlines() if l.startswith("  research ")]
        assert line and "of budget 2000.00 (" in line[0], out
        html = ok(cli(dm, "-o", "html", "invoice")).out
        assert "<h2>Subtree totals</h2>" in html and "2000.00" in html, html
        mine = expect(dm.req("GET", "/v1/invoices", token=MEMBER), 200)
        assert mine["budgets"] == {}, mine["budgets"]
    finally:
        expect(dm.req("PUT", "/v1/pricebook", BOOK, token=dm.admin), 200)


def requeued_idle(jid):
    ev = expect(dm.req("GET", "/v1/jobs/%d/events" % jid, token=dm.admin), 200)["events"]
    return any(e["kind"] == "requeued" and "idle" in (e.get("detail") or "") for e in ev)


def test_idle_detection():
    """Jobs under 10 % for their window (2 s here) are flagged; a preemptible one is sent back
    to the queue, a default-class one only reported; inference (window 0) never."""
    ids = {}
    expect(dm.req("POST", "/v1/nodes/register", node("m-2"), token=AG), 201)
    for cls in ("training", None, "inference"):
        kw = {"gpus": 1, "priority": cls} if cls else {"gpus": 1}
        jid = submit(**kw)
        j = wait_state(jid, "starting")
        beat(j["placement"]["tasks"][0]["node"], {"jobs": [{"id": jid, "state": "running"}]})
        ids[cls] = jid
    end = time.time() + 20
    seen, m, out, x = set(), "", "", None
    while time.time() < end:
        now = int(time.time() * 1000)
        beat("m-1", {"usage": {"samples": [
            {"job": jid, "task": 0, "at": now, "cpu_ns": 0, "mem_bytes": 0, "gpu_util": 3,
             "gpu_mem_bytes": 0, "energy_mj": -1} for jid in ids.values()]}})
        beat("m-2")
        idle = expect(dm.req("GET", "/v1/idle", token=dm.admin), 200)["jobs"]
        seen |= {i["job"] for i in idle}
        now_idle = [i for i in idle if i["job"] == ids[None]]
        if now_idle and x is None:  # what the reports say while it is idle
            x, m, out = now_idle[0], metrics(), ok(cli(dm, "idle")).out
        if x is not None and requeued_idle(ids["training"]):
            break
        time.sleep(0.25)
    assert x is not None and ids["inference"] not in seen, (seen, ids)
    assert requeued_idle(ids["training"]), ids  # sent back to the queue (and placed again)
    assert get(ids[None])["state"] == "running"
    assert x["tenant"] == "research/nlp" and x["gpus"] == 1 and x["util_avg"] == 3, x
    assert x["wasted_gpu_hours"] > 0 and not x["preemptible"], x
    assert 'allot_idle_jobs{tenant="research/nlp"} ' in m, m
    assert str(ids[None]) in out and "WASTED-GPU-H" in out, out
    assert expect(dm.req("GET", "/v1/idle", token=MEMBER), 200)["jobs"] == []
    me = expect(dm.req("GET", "/v1/whoami", token=MEMBER), 200)
    assert me["role"] == "member" and me["tenant"] == "research/vision", me
    assert me["name"] == "vision-member", me
    expect(dm.req("GET", "/v1/whoami"), 401)
    entries = expect(dm.req("GET", "/v1/audit?limit=1000", token=dm.admin), 200)["entries"]
    flagged = {e["target"] for e in entries if e["action"] == "job.idle"}
    assert "job/%d" % ids[None] in flagged and "job/%d" % ids["training"] in flagged, flagged
    for jid in ids.values():
        expect(dm.req("POST", "/v1/jobs/%d/cancel" % jid, token=dm.admin), 200)


def test_idle_counts_measured_time():
    """A job is idle for time that was measured only: one whose first
    samples come long after its start is flagged once the samples cover its
    whole window (2 s), and is idle since its first sample, not its start."""
    jid = submit(gpus=1)
    j = wait_state(jid, "starting")
    node_name = j["placement"]["tasks"][0]["node"]
    beat(node_name, {"jobs": [{"id": jid, "state": "running"}]})
    time.sleep(3)  # running for more than its window, not measured at all
    t0 = time.time()
    x = None
    while time.time() < t0 + 10 and x is None:
        now = int(time.time() * 1000)
        beat(node_name, {"usage": {"samples": [
            {"job": jid, "task": 0, "at": now, "cpu_ns": 0, "mem_bytes": 0, "gpu_util": 3,
             "gpu_mem_bytes": 0, "energy_mj": -1}]}})
        idle = expect(dm.req("GET", "/v1/idle", token=dm.admin), 200)["jobs"]
        x = next((i for i in idle if i["job"] == jid), None)
        if x is None:
            time.sleep(0.2)
    assert x is not None, jid
    assert time.time() - t0 >= 1.7, time.time() - t0
    assert x["idle_since"] >= int(t0), (x, t0)
    expect(dm.req("POST", "/v1/jobs/%d/cancel" % jid, token=dm.admin), 200)


def health(name, bad=()):
    return {"health": {"gpus": [
        {"index": g, "uuid": "GPU-%s-%d" % (name, g), "model": "H100-80GB",
         "health": "unhealthy" if g in bad else "healthy",
         "text": "Xid 79 (fallen off the bus)" if g in bad else "ok", "mig": []}
        for g in range(2)]}}


def test_unhealthy_gpu_fences_its_node():
    beat("m-1", health("m-1", bad=(1,)))
    beat("m-2", health("m-2", bad=(0,)))
    nodes = {n["name"]: n for n in
             expect(dm.req("GET", "/v1/nodes", token=dm.admin), 200)["nodes"]}
    assert nodes["m-1"]["fenced"] == "GPU 1 unhealthy: Xid 79 (fallen off the bus)", nodes
    assert nodes["m-1"]["state"] == "ready", nodes  # the admin's state is unchanged
    r = ok(cli(dm, "nodes"))
    assert "ready,fenced" in r.out, r.out
    jid = submit(gpus=1)
    time.sleep(0.6)  # a few cycles: nowhere to go
    j = get(jid)
    assert j["state"] == "pending", j
    beat("m-2", health("m-2"))  # healthy again: the fence lifts
    j = wait_state(jid, "starting")
    assert j["placement"]["tasks"][0]["node"] == "m-2", j
    nodes = {n["name"]: n for n in
             expect(dm.req("GET", "/v1/nodes", token=dm.admin), 200)["nodes"]}
    assert nodes["m-2"]["fenced"] is None and nodes["m-1"]["fenced"], nodes
    # an admin's cordon outlives the fence
    expect(dm.req("POST", "/v1/nodes/m-1/cordon", token=dm.admin), 200)
    beat("m-1", health("m-1"))
    jid2 = submit(gpus=2)
    time.sleep(0.6)
    assert get(jid2)["state"] == "pending", get(jid2)
    expect(dm.req("POST", "/v1/nodes/m-1/uncordon", token=dm.admin), 200)
    j2 = wait_state(jid2, "starting")
    assert j2["placement"]["tasks"][0]["node"] == "m-1", j2
    for x in (jid, jid2):
        expect(dm.req("POST", "/v1/jobs/%d/cancel" % x, token=dm.admin), 200)


def test_job_pattern_anomaly():
    """A job busy at 90 % that falls to 5 % in the last quarter of the window (4 s here) is
    reported once (an audit entry), with both means."""
    jid = submit(gpus=1)
    j = wait_state(jid, "starting")
    name = j["placement"]["tasks"][0]["node"]
    beat(name, {"jobs": [{"id": jid, "state": "running"}]})
    t0, found = time.time(), None
    while time.time() < t0 + 20 and not found:
        now = int(time.time() * 1000)
        util = 90 if time.time() < t0 + 3.5 else 5
        beat(name, {"usage": {"samples": [
            {"job": jid, "task": 0, "at": now, "cpu_ns": 0, "mem_bytes": 0, "gpu_util": util,
             "gpu_mem_bytes": 1 << 30, "energy_mj": -1}]}})
        an = expect(dm.req("GET", "/v1/anomalies", token=dm.admin), 200)["anomalies"]
        found = [a for a in an if a["job"] == jid]
        time.sleep(0.2)
    assert found and found[0]["kind"] == "job-pattern", found
    assert "went from 90% to" in found[0]["detail"] and found[0]["score"] <= -40, found
    assert found[0]["tenant"] == "research/nlp", found
    assert 'allot_anomalies{kind="job-pattern",tenant="research/nlp"}' in metrics()
    r = ok(cli(dm, "anomalies"))
    assert "job-pattern" in r.out and str(jid) in r.out, r.out
    assert expect(dm.req("GET", "/v1/anomalies", token=MEMBER), 200)["anomalies"] == []
    time.sleep(0.5)
    entries = expect(dm.req("GET", "/v1/audit?limit=1000", token=dm.admin), 200)["entries"]
    got = [e for e in entries if e["action"] == "anomaly.job-pattern"
           and e["target"] == "job/%d" % jid]
    assert len(got) == 1, got
    expect(dm.req("POST", "/v1/jobs/%d/cancel" % jid, token=dm.admin), 200)


def test_budget_holds_borrowing():
    """A tenant with hold_borrowed that spent its budget borrows nothing more: its job above
    nominal waits, one inside runs; a larger budget lets the first start."""
    doc = expect(dm.req("GET", "/v1/tenants", token=dm.admin), 200)
    doc["tenants"].append({"path": "tiny",
                           "quotas": {"gpu": {"nominal": 1, "borrow_limit": 4}}})
    expect(dm.req("PUT", "/v1/tenants", doc, token=dm.admin), 200)
    run_job(1.1, gpus=1, tenant="tiny")  # spends more than 1 minor unit
    book = dict(BOOK, budgets={"tiny": {"monthly_minor": 1, "hold_borrowed": True}})
    expect(dm.req("PUT", "/v1/pricebook", book, token=dm.admin), 200)
    end = time.time() + 15
    while time.time() < end and 'allot_tenant_budget_used_ratio{tenant="tiny"}' \
            not in metrics():
        time.sleep(0.1)
    time.sleep(0.5)  # the tenants are applied again without borrowing
    big = submit(gpus=2, tenant="tiny")
    end = time.time() + 10
    j = get(big)
    while time.time() < end and "budget" not in (j["pending_reason"] or "") and \
            j["state"] == "pending":
        time.sleep(0.05)  # bounded: until a cycle has given it a reason
        j = get(big)
    assert j["state"] == "pending" and "borrow" in (j["pending_reason"] or ""), j
    # and it says why borrowing stopped
    assert j["pending_reason"].endswith(
        "(the budget of tiny is spent this month: hold_borrowed)"), j
    small = submit(gpus=1, tenant="tiny")
    wait_state(small, "starting")
    expect(dm.req("POST", "/v1/jobs/%d/cancel" % small, token=dm.admin), 200)
    book["budgets"]["tiny"]["monthly_minor"] = 10 ** 12
    expect(dm.req("PUT", "/v1/pricebook", book, token=dm.admin), 200)
    wait_state(big, "starting")
    expect(dm.req("POST", "/v1/jobs/%d/cancel" % big, token=dm.admin), 200)
    expect(dm.req("PUT", "/v1/pricebook", BOOK, token=dm.admin), 200)


def test_members_see_their_tenant_only():
    period = time.strftime("%Y-%m", time.gmtime())
    rows = usage("by=tenant&from=" + period, token=MEMBER)["rows"]
    assert rows == [] or {r["key"] for r in rows} == {"research/vision"}, rows
    assert usage("by=job&from=" + period, token=MEMBER)["rows"] == []
    inv = expect(dm.req("GET", "/v1/invoices?period=" + period, token=MEMBER), 200)
    assert inv["tenants"] == [] and "cluster" not in inv and "unbilled" not in inv, inv
    usage("tenant=research/nlp", token=MEMBER, status=404)
    expect(dm.req("GET", "/v1/invoices?tenant=research/nlp", token=MEMBER), 404)
    # the price book's prices are everyone's, another tenant's budget is not
    assert "research/nlp" in expect(dm.req("GET", "/v1/pricebook", token=dm.admin),
                                    200)["budgets"]
    pb = expect(dm.req("GET", "/v1/pricebook", token=MEMBER), 200)
    assert pb["books"] and "research/nlp" not in pb.get("budgets", {}), pb


def test_cli():
    period = time.strftime("%Y-%m", time.gmtime())
    r = ok(cli(dm, "usage", "--by", "tenant", "--from", period))
    assert r.out.splitlines()[0].split() == ["KEY", "GPU-HOURS", "CPU-CORE-HOURS",
                                             "MEM-GIB-HOURS", "SM-UTIL%", "JOBS"], r.out
    assert "research/nlp" in r.out and "(total)" in r.out, r.out
    r = ok(cli(dm, "-o", "csv", "usage", "--by", "item", "--from", period))
    assert r.out.startswith("key,gpu_hours,") and '"fraction",' in r.out, r.out
    js = ok(cli(dm, "-o", "json", "usage", "--by", "job")).json()
    assert js["by"] == "job" and js["rows"], js
    fails(cli(dm, "usage", "--by", "colour"), 6, "bad_request")
    # a tenant that is not in the tree and has no usage is a typo, not a quiet tenant
    r = fails(cli(dm, "usage", "-t", "research/nosuch"), 2, "not_found")
    assert "research/nosuch" in r.err, r
    fails(cli(dm, "invoice", "-t", "research/nosuch"), 2, "not_found")
    r = ok(cli(dm, "-o", "json", "usage", "-t", "product/search", "--from", "2020-01-01",
               "--to", "2020-01-02"))
    assert r.json()["rows"] == [], r
    r = ok(cli(dm, "-o", "json", "invoice", "-t", "product/search", "--period", "2020-01"))
    assert r.json()["tenants"] == [], r
    fails(cli(dm, "-o", "csv", "ls"), 1)
    r = ok(cli(dm, "invoice", "--period", period))
    assert "research/nlp" in r.out and "= cluster" in r.out, r.out
    assert "subtree totals:" in r.out and "  research " in r.out, r.out
    r = ok(cli(dm, "-o", "csv", "invoice", "--period", period))
    assert r.out.startswith("tenant,item,"), r.out
    r = ok(cli(dm, "-o", "html", "invoice"))
    assert r.out.startswith("<!doctype html>"), r.out
    fails(cli(dm, "pricebook", "apply", "-f", "/nonexistent.yaml"), 1)
    example = os.path.join(fx.SOURCE, "etc", "pricebook.example.yaml")
    fails(cli(dm, "pricebook", "apply", "-f", example, token=MEMBER), 3)
    # the example's 2026-01-01 prices are not the ones that priced this allotd's past months
    # (test_billing.py applies it to an allotd without a price book)
    r = fails(cli(dm, "pricebook", "apply", "-f", example), 4, "conflict")
    assert "version 2026-01-01" in r.err, r
    ok(cli(dm, "pricebook", "apply", "-f", "-", stdin=json.dumps(BOOK)))
    assert ok(cli(dm, "-o", "json", "pricebook")).json() == BOOK


def test_first_pass_at_start():
    """The first roll-up runs as soon as allotd is ready, not one --meter-interval after its
    start: a restarted allotd, or a standby that took over, has usage as of then."""
    d = Daemon(args=["--meter-interval", "1h"])
    try:
        end = time.time() + 10
        as_of = 0
        while time.time() < end and not as_of:
            as_of = expect(d.req("GET", "/v1/usage?by=tenant", token=d.admin), 200)["as_of"]
            time.sleep(0.1)
        assert as_of > 0, d.log()[-2000:]
    finally:
        assert d.stop() == 0


def test_bad_queries():
    for q, word in [("by=colour", "by"), ("from=yesterday", "from"), ("to=2026-02-30x", "to"),
                    ("from=2026-+1-01", "from"), ("from=%202026-11", "from"), ("to=+1700000000", "to"),
                    ("from=2026-11-02&to=2026-11-01", "after"), ("split=user", "split"),
                    ("from=2020-01&to=2026-01", "400 days"), ("from=2099-01-01", "future")]:
        e = usage(q, status=400)
        assert word in e["error"]["message"], (q, e)


if __name__ == "__main__":
    dm = Daemon(args=["--meter-interval", "200ms", "--idle-window", "2s", "--idle-threshold", "10",
                      "--idle-class-windows", "inference=0", "--idle-action", "preempt",
                      "--anomaly-window", "4s"])
    try:
        expect(dm.req("PUT", "/v1/tenants", TENANTS, token=dm.admin), 200)
        AG = dm.token("agent", "", "agents")
        MEMBER = dm.token("member", "research/vision", "vision-member")
        expect(dm.req("POST", "/v1/nodes/register", node("m-1"), token=AG), 201)
        fx.run([test_pricebook_validation, test_allocated_seconds_exact,
                test_users_of_two_tenants_stay_apart, test_samples_count_once,
                test_counters_stay_within_a_run, test_samples_after_a_requeue,
                test_huge_counters_are_counted,
                test_restart_keeps_runs_exact, test_invoice_prices_and_reconciles,
                test_pricebook_model_aliases, test_pricebook_warnings,
                test_invoice_names_its_price_books, test_parent_budget_on_the_invoice,
                test_metrics_and_budgets, test_idle_detection, test_idle_counts_measured_time,
                test_unhealthy_gpu_fences_its_node,
                test_job_pattern_anomaly, test_budget_holds_borrowing,
                test_members_see_their_tenant_only, test_cli, test_first_pass_at_start,
                test_bad_queries])
    finally:
        dm.stop()
