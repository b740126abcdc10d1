"""The scheduling loop of allotd end to end, with the test acting as the
agents: nodes register their inventory, jobs are submitted, the loop
places them (placement and pending reason visible in GET /v1/jobs/{id}),
heartbeats answer each node's desired state, job reports move jobs to
running and succeeded, cancel frees the GPUs, and a restart rebuilds the
core from the store."""

import functools
import re
import signal
import time

import allotd_fixture as fx
from allotd_fixture import TENANTS, Daemon, expect

dm = None
AG = None

N1 = {"name": "n1", "cpus": 64, "memory": 512000, "gpus": [{"model": "A100-80GB"}] * 4,
      "labels": {"rack": "r1"}}
N2 = {"name": "n2", "cpus": 32, "memory": 256000, "gpu_mode": "mig",
      "gpus": [{"model": "A100-80GB", "uuid": "GPU-0"}]}


def wait_job(jid, pred, timeout=10, d=None):
    """Job jid of daemon d (the shared one by default) once pred holds."""
    d = d or dm
    end = time.time() + timeout
    while time.time() < end:
        j = expect(d.req("GET", "/v1/jobs/%d" % jid, token=d.admin), 200)
        if pred(j):
            return j
        time.sleep(0.05)
    raise AssertionError("job %d: condition not met within %ss: %r" % (jid, timeout, j))


def submit_one(d, tenant, name):
    """Submits a 1-GPU job `name` of tenant to daemon d; its id."""
    return expect(d.req("POST", "/v1/jobs", {"name": name, "tenant": tenant, "gpus": 1},
                        token=d.admin), 201)["id"]


def job_states(d):
    """{name: state} of daemon d's first 100 jobs."""
    jobs = expect(d.req("GET", "/v1/jobs?limit=100", token=d.admin), 200)["jobs"]
    return {j["name"]: j["state"] for j in jobs}


def heartbeat(node, jobs=None, status=200):
    body = {} if jobs is None else {"jobs": jobs}
    return expect(dm.req("POST", "/v1/nodes/%s/heartbeat" % node, body, token=AG), status)


def test_register():
    expect(dm.req("POST", "/v1/nodes/register", N1, token=AG), 201)
    expect(dm.req("POST", "/v1/nodes/register", N2, token=AG), 201)
    expect(dm.req("POST", "/v1/nodes/register", N1, token=AG), 200)  # same inventory: no-op
    expect(dm.req("POST", "/v1/nodes/register", dict(N1, cpus=128), token=AG), 409)
    expect(dm.req("POST", "/v1/nodes/register", dict(N1, name="x", gpus=[{"model": "Z9"}]),
                  token=AG), 422)
    expect(dm.req("POST", "/v1/nodes/register",
                  dict(N1, name="x", gpus=[{"model": "A100-80GB"}, {"model": "T4"}]),
                  token=AG), 422)
    expect(dm.req("POST", "/v1/nodes/register", dict(N1, name="../etc"), token=AG), 422)
    expect(dm.req("POST", "/v1/nodes/register", dict(N1, name="x", disks=2), token=AG), 400)
    expect(dm.req("POST", "/v1/nodes/register", dict(N1, name="x", cpus="many"), token=AG), 400)
    heartbeat("ghost", status=404)
    nodes = expect(dm.req("GET", "/v1/nodes", token=dm.admin), 200)["nodes"]
    assert [n["name"] for n in nodes] == ["n1", "n2"], nodes
    assert heartbeat("n1")["jobs"] == []


def test_place_run_succeed():
    j = expect(dm.req("POST", "/v1/jobs", {"name": "gang", "tenant": "research/nlp", "tasks": 2,
                                           "gpus": 2, "cpus": 4, "memory": 8192,
                                           "command": ["train"]}, token=dm.admin), 201)
    j = wait_job(j["id"], lambda x: x["state"] == "starting")
    tasks = j["placement"]["tasks"]
    assert len(tasks) == 2 and all(t["node"] == "n1" and len(t["gpus"]) == 2 for t in tasks), j
    assert sorted(g for t in tasks for g in t["gpus"]) == [0, 1, 2, 3], j
    assert j["pending_reason"] is None and j["start_time"] > 0
    desired = heartbeat("n1")["jobs"]
    assert sorted((d["job"], d["task"]) for d in desired) == [(j["id"], 0), (j["id"], 1)], desired
    assert desired[0]["spec"]["command"] == ["train"]
    assert heartbeat("n2")["jobs"] == []
    # n1 is full: the next GPU job waits with a reason
    w = expect(dm.req("POST", "/v1/jobs", {"tenant": "research/nlp", "gpus": 1},
                      token=dm.admin), 201)
    w = wait_job(w["id"], lambda x: x["pending_reason"])
    assert w["state"] == "pending", w
    # another node cannot report on the gang
    heartbeat("n2", [{"id": j["id"], "state": "failed", "exit_code": 9}])
    assert expect(dm.req("GET", "/v1/jobs/%d" % j["id"], token=dm.admin), 200)["state"] == \
        "starting"
    # the agent reports the gang running, then done: the waiting job starts
    heartbeat("n1", [{"id": j["id"], "state": "running"}])
    assert expect(dm.req("GET", "/v1/jobs/%d" % j["id"], token=dm.admin), 200)["state"] == \
        "running"
    heartbeat("n1", [{"id": j["id"], "state": "succeeded", "exit_code": 0}])
    done = expect(dm.req("GET", "/v1/jobs/%d" % j["id"], token=dm.admin), 200)
    assert done["state"] == "succeeded" and done["exit_code"] == 0, done
    w = wait_job(w["id"], lambda x: x["state"] == "starting")
    kinds = [e["kind"] for e in expect(dm.req("GET", "/v1/jobs/%d/events" % j["id"],
                                              token=dm.admin), 200)["events"]]
    assert kinds == ["submitted", "placed", "running", "succeeded"], kinds
    # stale or malformed reports
    heartbeat("n1", [{"id": j["id"], "state": "failed"}])  # already ended: ignored
    heartbeat("n1", [{"id": "x", "state": "running"}], status=400)
    heartbeat("n1", [{"id": 1, "state": "sleeping"}], status=400)
    heartbeat("n1", [{"id": 1, "state": "running", "pid": 4}], status=400)


def test_mig_and_cancel_frees():
    m = expect(dm.req("POST", "/v1/jobs", {"tenant": "research/vision", "mig": "3g.40gb"},
                      token=dm.admin), 201)
    m = wait_job(m["id"], lambda x: x["state"] == "starting")
    t = m["placement"]["tasks"][0]
    assert t["node"] == "n2" and t["mig_profile"] == "3g.40gb", m
    assert [d["job"] for d in heartbeat("n2")["jobs"]] == [m["id"]]
    expect(dm.req("POST", "/v1/jobs/%d/cancel" % m["id"], token=dm.admin), 200)
    end = time.time() + 10
    while time.time() < end and heartbeat("n2")["jobs"]:
        time.sleep(0.05)
    assert heartbeat("n2")["jobs"] == []


def test_metrics_show_the_cluster():
    st, text = dm.req("GET", "/metrics", raw=True)
    assert "allot_nodes 2" in text and "allot_gpus 5" in text, text
    assert 'allot_model_gpus{model="A100-80GB"} 5' in text, text
    assert 'allot_tenant_gpus{tenant="research/nlp"}' in text, text
    assert 'allot_tenant_gpu_nominal{tenant="research/nlp"} 8.000' in text, text
    assert "allot_queue_wait_seconds_count" in text and "allot_store_commits_total" in text
    import re
    for line in text.splitlines():
        if line and not line.startswith("#"):
            assert re.match(r'^[a-z_]+(\{.*\})? [0-9.e+-]+$', line), line


def test_restart_rebuilds_from_store():
    global dm
    p = expect(dm.req("POST", "/v1/jobs", {"tenant": "research/nlp", "gpus": 4},
                      token=dm.admin), 201)
    p = wait_job(p["id"], lambda x: x["pending_reason"])
    running = [j for j in expect(dm.req("GET", "/v1/jobs?state=starting", token=dm.admin),
                                 200)["jobs"]]
    assert running
    admin = dm.admin
    assert dm.stop() == 0
    dm = Daemon(dm.dir)
    dm.admin = admin
    for j in running:
        j2 = wait_job(j["id"], lambda x: x["state"] == "starting")
        # adopted where it runs: the same placement, and not placed a second time
        assert j2["placement"] == j["placement"], (j, j2)
        ev = expect(dm.req("GET", "/v1/jobs/%d/events" % j["id"], token=dm.admin), 200)
        placed = [e for e in ev["events"] if e["kind"] == "placed"]
        assert len(placed) == 1, ev
    assert expect(dm.req("GET", "/v1/jobs/%d" % p["id"], token=dm.admin), 200)["state"] == \
        "pending"
    assert any(d["job"] == running[0]["id"] for d in heartbeat("n1")["jobs"])
    v = expect(dm.req("GET", "/v1/audit/verify", token=dm.admin), 200)
    assert v["ok"] is True, v


def test_cycle_work_goes_on():
    """With --cycle-work 1 each cycle makes one decision; the loop goes on
    with the next at once, not at the next --cycle-interval (a minute
    here), so one submission of an array still starts all its jobs."""
    d = Daemon(args=["--cycle-work", "1", "--cycle-interval", "60s"])
    try:
        expect(d.req("PUT", "/v1/tenants", TENANTS, token=d.admin), 200)
        ag = d.token("agent", "", "agents")
        expect(d.req("POST", "/v1/nodes/register", N1, token=ag), 201)
        a = expect(d.req("POST", "/v1/jobs", {"name": "sweep", "tenant": "research/nlp",
                                              "gpus": 1, "array": "0-3"}, token=d.admin), 201)
        ids = [j["id"] for j in a["jobs"]] if "jobs" in a else [a["id"]]
        end = time.time() + 10
        while time.time() < end:
            jobs = expect(d.req("GET", "/v1/jobs?state=starting", token=d.admin), 200)["jobs"]
            if len(jobs) == 4:
                break
            time.sleep(0.05)
        assert len(jobs) == 4, (ids, jobs)
        assert sorted(g for j in jobs for t in j["placement"]["tasks"] for g in t["gpus"]) == \
            [0, 1, 2, 3], jobs
        st, text = d.req("GET", "/metrics", raw=True)
        cut = [int(x.split()[1]) for x in text.splitlines()
               if x.startswith("allot_sched_cycles_cut_total ")]
        assert cut and cut[0] >= 4, cut  # a build and four starts, one per cycle
    finally:
        d.stop()


def test_reserve_gangs():
    """Reservations are on by default: with --large-gang-gpus 8 an 8-GPU
    gang that finds no room holds a reservation: a job that may not be
    preempted waits behind it with a reason, a preemptible one starts as
    its backfill, and once the gang's room can be had the backfill is
    preempted for it and the gang starts."""
    d = Daemon(args=["--large-gang-gpus", "8", "--preempt-grace", "0s",
                     "--preempt-min-runtime", "0s"])
    try:
        expect(d.req("PUT", "/v1/tenants", TENANTS, token=d.admin), 200)
        st, b = d.req("PUT", "/v1/priority-classes/pinned", {"value": 0, "preemptible": False},
                      token=d.admin)
        assert st in (200, 201), (st, b)
        ag = d.token("agent", "", "agents")
        for name in ("g1", "g2", "g3"):
            expect(d.req("POST", "/v1/nodes/register", dict(N1, name=name), token=ag), 201)

        def sub(body):
            return expect(d.req("POST", "/v1/jobs", body, token=d.admin), 201)["id"]

        def job(jid):
            return expect(d.req("GET", "/v1/jobs/%d" % jid, token=d.admin), 200)

        def until(jid, pred):
            return wait_job(jid, pred, d=d)

        # one GPU on each of two nodes (v1 takes its node's CPUs): one node is whole
        v1 = until(sub({"tenant": "research/vision", "gpus": 1, "cpus": 64}),
                   lambda j: j["state"] == "starting")
        n1 = until(sub({"tenant": "research/nlp", "gpus": 1}), lambda j: j["state"] == "starting")
        gang = until(sub({"name": "gang", "tenant": "research/nlp", "tasks": 2, "gpus": 4}),
                     lambda j: j["pending_reason"])
        assert gang["state"] == "pending", gang
        pin = until(sub({"tenant": "research/nlp", "gpus": 1, "priority": "pinned"}),
                    lambda j: j["pending_reason"])
        assert ("held back: GPUs reserved for job %d (gang)" % gang["id"]) in \
            pin["pending_reason"], pin
        bf = until(sub({"name": "bf", "tenant": "research/nlp", "gpus": 4}),
                   lambda j: j["state"] == "starting")
        assert job(pin["id"])["state"] == "pending"
        # v1 ends: its node is whole; the other one the gang needs is the backfill's
        node = v1["placement"]["tasks"][0]["node"]
        for state in ("running", "succeeded"):
            expect(d.req("POST", "/v1/nodes/%s/heartbeat" % node,
                         {"jobs": [{"id": v1["id"], "state": state}]}, token=ag), 200)
        until(gang["id"], lambda j: j["state"] == "starting")
        ev = expect(d.req("GET", "/v1/jobs/%d/events" % bf["id"], token=d.admin), 200)["events"]
        pre = [e for e in ev if e["kind"] == "preempted"]
        assert pre and ("backfill preempted for the reservation of job %d (gang)" % gang["id"]
                        in pre[0]["detail"]), ev
        assert job(n1["id"])["state"] == "starting"  # in the tenant's nominal: never a victim
    finally:
        d.stop()


def lab_world(d):
    """Daemon d with tenants lab/a, lab/b and lab/c (8 GPUs nominal each,
    8 more to borrow) and 5 nodes of 4 GPUs: while a and b ask for more
    and c asks for nothing, the fair share of a and b is 10 each. Returns
    an agent token."""
    q = {"gpu": {"nominal": 8, "borrow_limit": 8}}
    expect(d.req("PUT", "/v1/tenants", {"version": 1, "tenants": [
        {"path": "lab"}, {"path": "lab/a", "quotas": q}, {"path": "lab/b", "quotas": q},
        {"path": "lab/c", "quotas": q}]}, token=d.admin), 200)
    ag = d.token("agent", "", "agents")
    for i in range(5):
        expect(d.req("POST", "/v1/nodes/register", dict(N1, name="l%d" % i), token=ag), 201)
    return ag


def test_fair_reclaim():
    """With --fair-reclaim a tenant below its fair share of the GPUs takes
    another tenant's borrowed, little-run work while that tenant keeps at
    least its own share, and never goes above its own. 20 GPUs, lab/a and
    lab/b ask (8 nominal each; lab/c asks nothing): 10 each is fair."""
    d = Daemon(args=["--fair-reclaim", "1h", "--preempt-grace", "0s",
                     "--preempt-min-runtime", "0s"])
    try:
        ag = lab_world(d)

        sub = functools.partial(submit_one, d)
        states = functools.partial(job_states, d)

        def until(pred):
            end = time.time() + 10
            while time.time() < end:
                st = states()
                if pred(st):
                    return st
                time.sleep(0.05)
            raise AssertionError(st)

        vis = [sub("lab/b", "v%d" % i) for i in range(12)]  # 4 borrowed
        until(lambda st: sum(v == "starting" for v in st.values()) == 12)
        for i in range(8):
            sub("lab/a", "n%d" % i)
        until(lambda st: sum(v == "starting" for v in st.values()) == 20)
        for i in range(3):  # lab/a at 9, 10 (its share), then 11
            sub("lab/a", "extra%d" % i)
        st = until(lambda st: st.get("extra0") == "starting" and st.get("extra1") == "starting")
        time.sleep(0.3)  # a few more cycles: nothing else moves
        st = states()
        assert st["extra2"] == "pending", st
        assert sum(v == "starting" for k, v in st.items() if k.startswith("v")) == 10, st
        why = []
        for jid in vis:
            ev = expect(d.req("GET", "/v1/jobs/%d/events" % jid, token=d.admin), 200)["events"]
            why += [e["detail"] for e in ev if e["kind"] == "preempted"]
        assert len(why) == 2 and all(re.search(
            r"above its tenant's fair share reclaimed by job \d+ \(extra[01]\)", w)
            for w in why), why
    finally:
        d.stop()


def test_quota_change_reclaims():
    """A tenants change that shrinks lab/a's nominal (6 -> 2) and grows lab/b's (2 -> 6)
    while lab/a runs 6 jobs: lab/a's 4 newest count as borrowed from then on, and lab/b's
    jobs inside its new nominal take them back. (They stayed in-quota for their run, and
    lab/b waited with "cluster quota exhausted".)"""
    d = Daemon(args=["--preempt-grace", "0s", "--preempt-min-runtime", "0s", "--fair-cap", "0"])

    def tree(a, b):
        expect(d.req("PUT", "/v1/tenants", {"version": 1, "tenants": [
            {"path": "lab"}, {"path": "lab/a", "quotas": {"gpu": {"nominal": a}}},
            {"path": "lab/b", "quotas": {"gpu": {"nominal": b}}}]}, token=d.admin), 200)

    sub = functools.partial(submit_one, d)
    states = functools.partial(job_states, d)

    try:
        tree(6, 2)
        ag = d.token("agent", "", "agents")
        for i in range(2):
            expect(d.req("POST", "/v1/nodes/register", dict(N1, name="q%d" % i), token=ag), 201)
        a = []
        for i in range(6):  # one at a time: they start in this order
            a.append(sub("lab/a", "a%d" % i))
            wait_job(a[-1], lambda x: x["state"] == "starting", d=d)
        tree(2, 6)
        for i in range(6):
            sub("lab/b", "b%d" % i)
        end = time.time() + 15
        st = states()
        while time.time() < end and sum(st.get("b%d" % i) == "starting" for i in range(6)) < 6:
            time.sleep(0.1)
            st = states()
        assert sum(st["b%d" % i] == "starting" for i in range(6)) == 6, (st, d.log()[-3000:])
        assert [st["a%d" % i] for i in range(6)] == ["starting"] * 2 + ["pending"] * 4, st
        assert "running jobs count as borrowed or inside their tenant's nominal anew" in \
            d.log(), d.log()[-2000:]
    finally:
        d.stop()


def test_fair_cap():
    """With --fair-cap a tenant beyond its nominal does not fill a hole past
    the cap while another tenant's gang waits; once the gang is gone it
    does. With --fair-cap 0 it fills the hole at once. 20 GPUs (5 nodes of
    4), lab/a and lab/b ask (8 nominal each; lab/c asks nothing): 10 each is
    fair, and 110 % of it is 11."""
    for cap in ("110", "0"):
        fair_cap_run(cap)


def fair_cap_run(cap):
    d = Daemon(args=["--fair-cap", cap])
    try:
        ag = lab_world(d)

        def sub(tenant, name, gpus=1, tasks=1):
            return expect(d.req("POST", "/v1/jobs", {"name": name, "tenant": tenant, "gpus": gpus,
                                                     "tasks": tasks}, token=d.admin), 201)["id"]

        def job(jid):
            return expect(d.req("GET", "/v1/jobs/%d" % jid, token=d.admin), 200)

        def until(jid, pred):
            return wait_job(jid, pred, d=d)

        bs = [sub("lab/b", "b%d" % i) for i in range(12)]  # 4 borrowed, on 3 nodes
        for jid in bs:
            until(jid, lambda j: j["state"] == "starting")
        until(sub("lab/a", "ga", 4, 2), lambda j: j["state"] == "starting")  # the 2 whole nodes
        gang = until(sub("lab/a", "gb", 4), lambda j: j["pending_reason"])  # no whole node
        late = until(sub("lab/b", "late"), lambda j: j["pending_reason"])
        assert late["state"] == "pending", late
        # b0 ends: a one-GPU hole; lab/b at 11 + 1 would pass 110 % of 10
        b0 = job(bs[0])
        node = b0["placement"]["tasks"][0]["node"]
        for state in ("running", "succeeded"):
            expect(d.req("POST", "/v1/nodes/%s/heartbeat" % node,
                         {"jobs": [{"id": b0["id"], "state": state}]}, token=ag), 200)
        until(bs[0], lambda j: j["state"] == "succeeded")
        if cap == "0":
            until(late["id"], lambda j: j["state"] == "starting")
            return
        want = ("tenant lab/b holds 11 GPUs (nominal 8); while other tenants wait it may "
                "borrow up to 1.1 times its fair share of 10 GPUs")
        late = until(late["id"], lambda j: j["pending_reason"] == want)
        assert late["state"] == "pending", late
        # the gang gives up: no one else waits, so lab/b may take the hole
        expect(d.req("POST", "/v1/jobs/%d/cancel" % gang["id"], token=d.admin), 200)
        until(late["id"], lambda j: j["state"] == "starting")
    finally:
        d.stop()


def test_aging():
    """With --aging a job that has waited that long goes ahead of the fair
    order; without, the tenant using less goes first. lab/a holds 12 of 20
    GPUs, lab/b 8; a's job waits first, b's later; one of b's jobs ends."""
    for aging, first in ((None, "new"), ("1s", "old")):
        args = ["--preempt-min-runtime", "1h"] + (["--aging", aging] if aging else [])
        d = Daemon(args=args)
        try:
            ag = lab_world(d)

            sub = functools.partial(submit_one, d)

            def running(jid):
                return wait_job(jid, lambda j: j["state"] == "starting", d=d)

            for i in range(12):
                running(sub("lab/a", "a%d" % i))
            bs = [running(sub("lab/b", "b%d" % i)) for i in range(8)]
            old = wait_job(sub("lab/a", "old"), lambda j: j["pending_reason"], d=d)
            time.sleep(1.3)  # old ages
            new = wait_job(sub("lab/b", "new"), lambda j: j["pending_reason"], d=d)
            node = bs[0]["placement"]["tasks"][0]["node"]
            for state in ("running", "succeeded"):
                expect(d.req("POST", "/v1/nodes/%s/heartbeat" % node,
                             {"jobs": [{"id": bs[0]["id"], "state": state}]}, token=ag), 200)
            jobs = {"old": old["id"], "new": new["id"]}
            wait_job(jobs[first], lambda j: j["state"] == "starting", d=d)
            other = [k for k in jobs if k != first][0]
            time.sleep(0.3)  # a few more cycles: the other keeps waiting
            j = expect(d.req("GET", "/v1/jobs/%d" % jobs[other], token=d.admin), 200)
            assert j["state"] == "pending", (aging, j)
        finally:
            d.stop()


def test_large_gang_gpus():
    """--large-gang-gpus 4 makes a 4-GPU job a large gang: with
    reservations (the default) it reserves when it finds no room, and a job
    that may not be preempted waits behind it; with the default (16), or
    with --no-reserve-gangs, it does not."""
    for args, held in (([], False), (["--large-gang-gpus", "4"], True),
                       (["--large-gang-gpus", "4", "--no-reserve-gangs"], False)):
        d = Daemon(args=args)
        try:
            lab_world(d)
            st, b = d.req("PUT", "/v1/priority-classes/pinned", {"value": 0, "preemptible": False},
                          token=d.admin)
            assert st in (200, 201), (st, b)

            def sub(body):
                return expect(d.req("POST", "/v1/jobs", body, token=d.admin), 201)["id"]

            # one GPU and 60 of 64 cores taken on each of the 5 nodes: no 4 GPUs free on one
            for i in range(5):
                wait_job(sub({"tenant": "lab/b", "gpus": 1, "cpus": 60}),
                         lambda j: j["state"] == "starting", d=d)
            g4 = wait_job(sub({"name": "g4", "tenant": "lab/a", "gpus": 4, "cpus": 1}),
                          lambda j: j["pending_reason"], d=d)
            assert g4["state"] == "pending", g4
            pin = sub({"tenant": "lab/a", "gpus": 1, "cpus": 1, "priority": "pinned"})
            if held:
                j = wait_job(pin, lambda j: j["pending_reason"], d=d)
                assert ("held back: GPUs reserved for job %d (g4)" % g4["id"]) in \
                    j["pending_reason"], j
            else:
                wait_job(pin, lambda j: j["state"] == "starting", d=d)
        finally:
            d.stop()


def test_las_threshold():
    """--las-threshold: inside a tenant a job with less GPU service than the
    threshold preempts one of the tenant's jobs that has had more; with
    --las-threshold 0s it waits. lab/a holds its 16 GPUs (8 nominal, 8
    borrowed) of 20; each has had over 1 GPU-second when "new" comes."""
    for las, preempts in (("1s", True), ("0s", False)):
        d = Daemon(args=["--las-threshold", las, "--preempt-grace", "0s",
                         "--preempt-min-runtime", "0s", "--fair-reclaim", "0s"])
        try:
            lab_world(d)

            def sub(name):
                return expect(d.req("POST", "/v1/jobs", {"name": name, "tenant": "lab/a",
                                                         "gpus": 1}, token=d.admin), 201)["id"]

            old = [sub("a%d" % i) for i in range(16)]
            for jid in old:
                wait_job(jid, lambda j: j["state"] == "starting", d=d)
            time.sleep(1.5)  # every old job passes 1 GPU-second of service
            new = sub("new")
            if preempts:
                wait_job(new, lambda j: j["state"] == "starting", d=d)
                why = []
                for jid in old:
                    ev = expect(d.req("GET", "/v1/jobs/%d/events" % jid, token=d.admin),
                                200)["events"]
                    why += [e["detail"] for e in ev if e["kind"] == "preempted"]
                assert why == ["preempted (over the LAS service threshold) for less-served "
                               "job %d (new)" % new], why
            else:
                j = wait_job(new, lambda j: j["pending_reason"], d=d)
                time.sleep(0.3)  # a few more cycles: it keeps waiting
                j = expect(d.req("GET", "/v1/jobs/%d" % new, token=d.admin), 200)
                assert j["state"] == "pending" and "borrowing limit reached" in \
                    j["pending_reason"], j
        finally:
            d.stop()


def test_lending_hold():
    """With --lending-hold, of its nominal, what a tenant used lately is not
    lent out, so another tenant does not borrow it at once after the jobs
    end; by default (off) it does. Two tenants of 4 nominal GPUs each (4
    more to borrow) on 2 nodes of 4 GPUs."""
    q = {"gpu": {"nominal": 4, "borrow_limit": 4}}
    for hold, lent in (("2h", False), (None, True)):
        d = Daemon(args=["--lending-hold", hold] if hold else [])
        try:
            expect(d.req("PUT", "/v1/tenants", {"version": 1, "tenants": [
                {"path": "lab"}, {"path": "lab/a", "quotas": q},
                {"path": "lab/b", "quotas": q}]}, token=d.admin), 200)
            ag = d.token("agent", "", "agents")
            for i in range(2):
                expect(d.req("POST", "/v1/nodes/register", dict(N1, name="h%d" % i), token=ag),
                       201)

            sub = functools.partial(submit_one, d)

            on = {}
            for i in range(4):  # lab/a uses its nominal, then its jobs end
                j = wait_job(sub("lab/a", "a%d" % i), lambda j: j["state"] == "starting", d=d)
                on.setdefault(j["placement"]["tasks"][0]["node"], []).append(j["id"])
            for state in ("running", "succeeded"):
                for node, ids in on.items():
                    expect(d.req("POST", "/v1/nodes/%s/heartbeat" % node,
                                 {"jobs": [{"id": i, "state": state} for i in ids]}, token=ag),
                           200)
            for jobs in on.values():
                for jid in jobs:
                    wait_job(jid, lambda j: j["state"] == "succeeded", d=d)
            bs = [sub("lab/b", "b%d" % i) for i in range(8)]
            for jid in bs[:4]:
                wait_job(jid, lambda j: j["state"] == "starting", d=d)
            if lent:
                for jid in bs[4:]:
                    wait_job(jid, lambda j: j["state"] == "starting", d=d)
            else:
                j = wait_job(bs[4], lambda j: j["pending_reason"], d=d)
                time.sleep(0.3)  # a few more cycles: the held GPUs stay free
                j = expect(d.req("GET", "/v1/jobs/%d" % bs[4], token=d.admin), 200)
                assert j["state"] == "pending", j
                # the hold decays from the moment a's jobs end: 4 GPUs, or a
                # hair under 4 (3999 milli print as 4.00)
                assert re.fullmatch(
                    r"cluster quota exhausted \(4/8 GPU in use, the job asks for 1; other "
                    r"tenants keep "
                    r"(4|4\.00|3\.9\d) unlent: lend limit or lending hold\)",
                    j["pending_reason"]), j
        finally:
            d.stop()


CKPT_ARGS = ["--defrag-interval", "1s", "--defrag-loss", "5s", "--preempt-grace", "0s",
             "--preempt-min-runtime", "0s", "--fair-reclaim", "0s"]


def _two_left(d, extra=None):
    """Two 4-GPU nodes; lab/b (nominal 8) runs four checkpointable 2-GPU
    jobs (with the fields `extra`) and one per node ends. Returns the two
    left (one per node), the two ended, the latest start, and each job's
    node."""
    expect(d.req("PUT", "/v1/tenants", {"version": 1, "tenants": [
        {"path": "lab"}, {"path": "lab/a", "quotas": {"gpu": {"nominal": 4}}},
        {"path": "lab/b", "quotas": {"gpu": {"nominal": 8}}}]},
        token=d.admin), 200)
    ag = d.token("agent", "", "agents")
    for i in range(2):
        expect(d.req("POST", "/v1/nodes/register", dict(N1, name="d%d" % i), token=ag), 201)
    body = dict({"tenant": "lab/b", "gpus": 2, "checkpointable": True}, **(extra or {}))
    bs = [expect(d.req("POST", "/v1/jobs", dict(body, name="b%d" % i), token=d.admin),
                 201)["id"] for i in range(4)]
    jobs = [wait_job(jid, lambda j: j["state"] == "starting", d=d) for jid in bs]
    node = {j["id"]: j["placement"]["tasks"][0]["node"] for j in jobs}
    ended = [next(jid for jid in bs if node[jid] == n) for n in ("d0", "d1")]
    for jid in ended:
        expect(d.req("POST", "/v1/jobs/%d/cancel" % jid, token=d.admin), 200)
    left = [jid for jid in bs if jid not in ended]
    return left, ended, max(j["start_time"] for j in jobs), node


def _moved_for_a0(d, left, mover):
    """lab/a asks for 4 GPUs: `mover` of left moves for it, the other stays."""
    a0 = expect(d.req("POST", "/v1/jobs", {"name": "a0", "tenant": "lab/a", "gpus": 4},
                      token=d.admin), 201)["id"]
    wait_job(a0, lambda j: j["state"] == "starting", d=d)
    for jid in left:
        ev = expect(d.req("GET", "/v1/jobs/%d/events" % jid, token=d.admin), 200)["events"]
        kinds = [e["kind"] for e in ev]
        assert ("preempted" in kinds) == (jid == mover), (jid, mover, ev)
        if jid == mover:  # moved after its save
            assert kinds.index("checkpoint") < kinds.index("preempted"), ev


def test_defrag():
    """A job that waits for a whole node while the cluster holds its GPUs
    free in pieces gets one: a checkpointable job that gives its checkpoint
    interval is moved to the other node (preempted, requeued, started
    again at once). Two nodes of 4 GPUs; lab/b runs four 2-GPU jobs inside
    its nominal (so none is reclaimed), two of them (one per node) end;
    lab/a asks for 4 GPUs."""
    d = Daemon(args=["--defrag-interval", "1s", "--defrag-loss", "1h", "--preempt-grace", "0s",
                     "--preempt-min-runtime", "0s", "--fair-reclaim", "0s"])
    try:
        left, ended, _, node = _two_left(d, {"checkpoint_interval": 3600})
        # the job fields: an interval needs checkpointable, and is a whole number
        body = {"name": "x", "tenant": "lab/b", "gpus": 2, "checkpoint_interval": 3600}
        err = expect(d.req("POST", "/v1/jobs", body, token=d.admin), 422)
        assert "needs \"checkpointable\": true" in err["error"]["message"], err
        err = expect(d.req("POST", "/v1/jobs", dict(body, checkpointable=True,
                                                    checkpoint_interval="1h"),
                           token=d.admin), 400)
        assert "checkpoint_interval" in err["error"]["message"], err
        for jid in ended:
            wait_job(jid, lambda j: j["state"] == "cancelled", d=d)
        a0 = expect(d.req("POST", "/v1/jobs", {"name": "a0", "tenant": "lab/a", "gpus": 4},
                          token=d.admin), 201)["id"]
        a0 = wait_job(a0, lambda j: j["state"] == "starting", d=d)
        moved = []
        for jid in left:
            ev = expect(d.req("GET", "/v1/jobs/%d/events" % jid, token=d.admin), 200)["events"]
            if any(e["kind"] == "preempted" for e in ev):
                moved.append(jid)
                assert [e["detail"] for e in ev if e["kind"] == "preempted"] == [
                    "moved at its checkpoint (defragmentation) to make room for job %d (a0)"
                    % a0["id"]], ev
        assert len(moved) == 1, moved
        j = wait_job(moved[0], lambda j: j["state"] == "starting", d=d)
        here = a0["placement"]["tasks"][0]["node"]
        assert j["placement"]["tasks"][0]["node"] != here, (j, a0)
        assert node[moved[0]] == here, (node, a0)
        st, text = d.req("GET", "/metrics", raw=True)
        assert st == 200, st
        assert 'allot_sched_preemptions_total{reason="move"} 1\n' in text, text
        assert 'allot_sched_preemptions_total{reason="other"} 0\n' in text, text
    finally:
        d.stop()


def test_checkpoint_report():
    """POST /v1/jobs/{id}/checkpoint: a save the job reports counts. Both
    remaining lab/b jobs ran longer than --defrag-loss 5s allows, so
    neither may move for a0; the one that reports a save moves. Bad
    reports are refused, naming the problem."""
    d = Daemon(args=CKPT_ARGS)
    try:
        left, ended, start, _ = _two_left(d)
        viewer = d.token("viewer", "lab/b", "v")
        # bad reports: each refused with its reason, nothing counted
        path = "/v1/jobs/%d/checkpoint" % left[0]
        err = expect(d.req("POST", path, {"at": "now"}, token=d.admin), 400)
        assert "\"at\" must be an integer" in err["error"]["message"], err
        err = expect(d.req("POST", path, {"when": 1}, token=d.admin), 400)
        assert "unknown field \"when\"" in err["error"]["message"], err
        err = expect(d.req("POST", path, "[1]", token=d.admin), 400)
        err = expect(d.req("POST", path, {"at": start - 10}, token=d.admin), 422)
        assert "outside the job's current run" in err["error"]["message"], err
        err = expect(d.req("POST", path, {"at": int(time.time()) + 3600}, token=d.admin), 422)
        assert "outside the job's current run" in err["error"]["message"], err
        expect(d.req("POST", path, token=viewer), 403)
        expect(d.req("POST", "/v1/jobs/999999/checkpoint", token=d.admin), 404)
        err = expect(d.req("POST", "/v1/jobs/%d/checkpoint" % ended[0], token=d.admin), 409)
        assert "does not run (cancelled)" in err["error"]["message"], err
        plain = expect(d.req("POST", "/v1/jobs", {"name": "p", "tenant": "lab/b", "gpus": 1},
                             token=d.admin), 201)["id"]
        err = expect(d.req("POST", "/v1/jobs/%d/checkpoint" % plain, token=d.admin), 422)
        assert "not checkpointable" in err["error"]["message"], err
        expect(d.req("POST", "/v1/jobs/%d/cancel" % plain, token=d.admin), 200)
        # both ran more than 5 s since their start: neither may move
        time.sleep(max(0.0, start + 7 - time.time()))
        a0 = expect(d.req("POST", "/v1/jobs", {"name": "a0", "tenant": "lab/a", "gpus": 4},
                          token=d.admin), 201)["id"]
        time.sleep(2.5)  # two passes or more
        assert wait_job(a0, lambda j: True, d=d)["state"] == "pending"
        for jid in left:
            ev = expect(d.req("GET", "/v1/jobs/%d/events" % jid, token=d.admin), 200)["events"]
            assert not any(e["kind"] == "preempted" for e in ev), ev
        # the second one saves now: it moves, the first stays
        assert "last_checkpoint" not in expect(d.req("GET", "/v1/jobs/%d" % left[1],
                                                     token=d.admin), 200)
        r = expect(d.req("POST", "/v1/jobs/%d/checkpoint" % left[1], token=d.admin), 200)
        assert r["id"] == left[1] and abs(r["saved_at"] - time.time()) < 5, r
        j = expect(d.req("GET", "/v1/jobs/%d" % left[1], token=d.admin), 200)
        assert j["last_checkpoint"] == r["saved_at"], j
        # reported again within the minute: answered, not stored again (one event below)
        r2 = expect(d.req("POST", "/v1/jobs/%d/checkpoint" % left[1], token=d.admin), 200)
        assert r2["saved_at"] >= r["saved_at"], r2
        wait_job(a0, lambda j: j["state"] == "starting", d=d)
        ev = expect(d.req("GET", "/v1/jobs/%d/events" % left[1], token=d.admin), 200)["events"]
        assert [e["kind"] for e in ev if e["kind"] in ("checkpoint", "preempted")] == [
            "checkpoint", "preempted"], ev
        ev = expect(d.req("GET", "/v1/jobs/%d/events" % left[0], token=d.admin), 200)["events"]
        assert not any(e["kind"] == "preempted" for e in ev), ev
        # audited: the report taken, and the refusals
        au = [(e["target"], e["result"]) for e in expect(d.req(
            "GET", "/v1/audit?limit=1000", token=d.admin), 200)["entries"]
            if e["action"] == "job.checkpoint"]
        assert ("job/%d" % left[1], "ok") in au and ("/v1/jobs/999999/checkpoint",
                                                     "error 404") in au, au
    finally:
        d.stop()


def test_checkpoint_survives_restart():
    """A reported save is read back when allotd restarts (as when another
    allotd takes the lead): the job that saved moves right after, the other
    (whose run is older than --defrag-loss) does not. An older save
    reported later changes nothing."""
    # a loss bound that leaves a slow restart time enough after the save
    args = CKPT_ARGS[:2] + ["--defrag-loss", "15s"] + CKPT_ARGS[4:]
    d = Daemon(args=args)
    try:
        left, _, start, _ = _two_left(d)
        time.sleep(max(0.0, start + 17 - time.time()))
        path = "/v1/jobs/%d/checkpoint" % left[1]
        saved = expect(d.req("POST", path, token=d.admin), 200)["saved_at"]
        expect(d.req("POST", path, {"at": start + 1}, token=d.admin), 200)
        got = expect(d.req("GET", "/v1/jobs/%d" % left[1], token=d.admin), 200)
        assert got["last_checkpoint"] == saved, (got, saved)
        admin = d.admin
        assert d.stop() == 0
        d = Daemon(d.dir, args=args)
        d.admin = admin
        _moved_for_a0(d, left, left[1])
    finally:
        d.stop()


def _desired(d, node, jid):
    """Job jid's entry in node's desired state (a heartbeat, as an admin)."""
    jobs = expect(d.req("POST", "/v1/nodes/%s/heartbeat" % node, {}, token=d.admin),
                  200)["jobs"]
    return next(x for x in jobs if x["job"] == jid)


def test_job_credential():
    """A checkpointable job's desired state carries its own credential: good
    for its checkpoint reports during that run, on that job alone, and across
    a restart (the key is in the store); refused for anything else, once the
    run has ended, and when forged."""
    d = Daemon(args=["--metrics-auth"])
    try:
        left, _, _, node = _two_left(d)
        got = [_desired(d, node[jid], jid) for jid in left]
        runs = [expect(d.req("GET", "/v1/jobs/%d" % jid, token=d.admin), 200)["start_time"]
                for jid in left]
        for jid, x, run in zip(left, got, runs):
            assert x["run"] == run and x["job_token"].startswith(
                "allotjob_%d_%d_" % (jid, run)), x
        tok = got[0]["job_token"]
        path = "/v1/jobs/%d/checkpoint" % left[0]
        r = expect(d.req("POST", path, token=tok), 200)
        assert r["id"] == left[0], r
        # that job alone, that route alone
        expect(d.req("POST", "/v1/jobs/%d/checkpoint" % left[1], token=tok), 404)
        err = expect(d.req("GET", "/v1/jobs/%d" % left[0], token=tok), 403)
        assert "role job may not GET /v1/jobs/{id}" in err["error"]["message"], err
        expect(d.req("POST", "/v1/jobs", {"tenant": "lab/b", "gpus": 1}, token=tok), 403)
        expect(d.req("POST", "/v1/tokens", {"role": "admin", "name": "x"}, token=tok), 403)
        err = expect(d.req("GET", "/metrics", token=tok), 403)
        assert "role job may not GET /metrics" in err["error"]["message"], err
        err = expect(d.req("POST", "/v1/tokens", {"role": "job", "tenant": "lab/b", "name": "x"},
                           token=d.admin), 422)
        assert "unknown role \"job\"" in err["error"]["message"], err
        # forged or mangled: refused
        for bad in (tok[:-1] + ("0" if tok[-1] != "0" else "1"),
                    tok.replace("allotjob_%d_" % left[0], "allotjob_%d_" % left[1]),
                    tok[:-2], tok + "00", "allotjob_%d_%d_" % (left[0], runs[0]),
                    "allotjob_-1_1_" + "0" * 64, "allotjob_",
                    tok.replace("allotjob_", "allotjob_0"),  # one spelling only
                    tok[:-64] + tok[-64:].upper(), " " + tok):
            expect(d.req("POST", path, token=bad), 401)
        # no credential for a job that does not checkpoint
        plain = expect(d.req("POST", "/v1/jobs", {"name": "p", "tenant": "lab/b", "gpus": 1},
                             token=d.admin), 201)["id"]
        pj = wait_job(plain, lambda j: j["state"] == "starting", d=d)
        assert "job_token" not in _desired(d, pj["placement"]["tasks"][0]["node"], plain)
        # audited under the token that submitted the job
        me = expect(d.req("GET", "/v1/whoami", token=d.admin), 200)["token_id"]
        au = [e for e in expect(d.req("GET", "/v1/audit?limit=1000", token=d.admin),
                                200)["entries"] if e["action"] == "job.checkpoint"]
        assert [(e["target"], e["result"], e["token_id"]) for e in au] == [
            ("job/%d" % left[0], "ok (job credential)", me),
            ("/v1/jobs/%d/checkpoint" % left[1], "error 404 (job credential)", me)], au
        # the key is in the store: good after a restart; not once the run ended
        admin = d.admin
        assert d.stop() == 0
        d = Daemon(d.dir)
        d.admin = admin
        expect(d.req("POST", "/v1/jobs/%d/checkpoint" % left[1], token=got[1]["job_token"]), 200)
        expect(d.req("POST", "/v1/jobs/%d/cancel" % left[0], token=d.admin), 200)
        expect(d.req("POST", path, token=tok), 401)
    finally:
        d.stop()


def _victim_and_preemptor(d, node, low, report_running=True):
    """On daemon d with TENANTS and one node of 4 GPUs: a 4-GPU training job
    (low: its extra fields), reported running when asked, then a 4-GPU
    inference job that preempts it. Returns (agent token, low id, high id)."""
    expect(d.req("PUT", "/v1/tenants", TENANTS, token=d.admin), 200)
    ag = d.token("agent", "", "agents")
    expect(d.req("POST", "/v1/nodes/register", dict(N1, name=node), token=ag), 201)
    lid = expect(d.req("POST", "/v1/jobs", dict({"tenant": "research/nlp", "gpus": 4,
                                                 "priority": "training"}, **low),
                       token=d.admin), 201)["id"]
    run = wait_job(lid, lambda j: j["state"] == "starting", d=d)["start_time"]
    if report_running:
        expect(d.req("POST", "/v1/nodes/%s/heartbeat" % node,
                     {"jobs": [{"id": lid, "run": run, "state": "running"}]}, token=ag), 200)
        wait_job(lid, lambda j: j["state"] == "running", d=d)
    hid = expect(d.req("POST", "/v1/jobs", {"tenant": "research/nlp", "gpus": 4,
                                            "priority": "inference"}, token=d.admin), 201)["id"]
    return ag, lid, hid


def _preempt_then_restart(once):
    """A checkpointable job preempted, then allotd restarted in its grace."""
    d = Daemon(args=["--preempt-grace", "60s", "--preempt-min-runtime", "0s"])
    try:
        ag, low, high = _victim_and_preemptor(d, "pr-1", {"checkpointable": True,
                                                         "requeue": not once})

        def stopping():
            jobs = expect(d.req("POST", "/v1/nodes/pr-1/heartbeat", {}, token=ag), 200)["jobs"]
            return any(x["job"] == low and x.get("stopping") for x in jobs)
        end = time.time() + 10
        while time.time() < end and not stopping():
            time.sleep(0.05)
        assert stopping(), "job %d was not preempted" % low
        # its reason says so while it runs out its grace (allot show, allot ls)
        j = wait_job(low, lambda j: j["pending_reason"], d=d)
        assert j["state"] == "running" and j["pending_reason"].startswith(
            "stopping: preempted for job %d" % high), j
        admin = d.admin
        assert d.stop() == 0
        d = Daemon(d.dir, args=["--preempt-grace", "60s", "--preempt-min-runtime", "600s"])
        d.admin = admin
        if once:  # it ends, as it would have when its grace ended
            j = wait_job(low, lambda j: j["state"] == "cancelled", d=d)
            assert "runs once" in j["pending_reason"], j
        else:
            j = wait_job(low, lambda j: j["state"] == "pending", d=d)
            assert j["placement"] is None, j
            # the run's end is in its trail: requeued at the restart, after preempted
            ev = [e for e in expect(d.req("GET", "/v1/jobs/%d/events" % low, token=d.admin),
                                    200)["events"] if e["kind"] in ("preempted", "requeued")]
            assert [e["kind"] for e in ev] == ["preempted", "requeued"], ev
            assert "queued again at allotd's restart: it was preempted" in ev[1]["detail"], ev
        wait_job(high, lambda j: j["state"] == "starting", d=d)
        # nothing of the old run is wanted on the node any more
        jobs = expect(d.req("POST", "/v1/nodes/pr-1/heartbeat", {}, token=ag), 200)["jobs"]
        assert [x["job"] for x in jobs] == [high], jobs
        if not once:
            # placed again, its new run waits until the node says the run allotd did
            # not adopt is gone
            expect(d.req("POST", "/v1/jobs/%d/cancel" % high, token=d.admin), 200)
            wait_job(low, lambda j: j["state"] == "starting", d=d)

            def beat(body):
                return expect(d.req("POST", "/v1/nodes/pr-1/heartbeat", body, token=ag), 200)
            h = beat({"known": "-"})
            assert [x["run"] for x in h["jobs"] if x["job"] == low] == [0], h
            beat({"known": h["version"], "stopping": []})
            end = time.time() + 5
            while time.time() < end and \
                    [x["run"] for x in beat({"known": "-"})["jobs"] if x["job"] == low] == [0]:
                time.sleep(0.05)
            run = [x["run"] for x in beat({"known": "-"})["jobs"] if x["job"] == low]
            assert run and run[0] > 0, run
    finally:
        d.stop()


def test_preempted_job_survives_restart():
    """A checkpointable job preempted in its grace period when allotd restarts
    is queued again, not adopted as running: its grace was in allotd's memory
    only, and its agent stops it. Adopted, it would hold its GPUs with nothing
    running, for good (here the restart raises --preempt-min-runtime, so
    nothing preempts it a second time). One that runs once ends instead."""
    _preempt_then_restart(False)
    _preempt_then_restart(True)


def test_restart_keeps_runs_apart():
    """Across an allotd restart a job's next run still waits for its last: one requeued
    before the restart (pending then, placed after) waits for the node of its last run
    (from the store); one held when allotd stopped (placed, its run shown with run 0)
    is adopted as starting and held with "hold": true (its run number stays, so that an
    agent that started it keeps it) until every node has answered once."""
    d = Daemon()
    try:
        expect(d.req("PUT", "/v1/tenants", TENANTS, token=d.admin), 200)
        ag = d.token("agent", "", "agents")

        def beat(node, body):
            return expect(d.req("POST", "/v1/nodes/%s/heartbeat" % node, body, token=ag), 200)

        def entry(node, jid):  # the job's entry in node's desired state, or None
            got = [x for x in beat(node, {"known": "-"})["jobs"] if x["job"] == jid]
            return got[0] if got else None

        def ack(node):  # the node had the desired state and stops nothing
            beat(node, {"known": beat(node, {"known": "-"})["version"], "stopping": []})

        for n in ("ra-1", "ra-2"):
            expect(d.req("POST", "/v1/nodes/register", dict(N1, name=n), token=ag), 201)
        a = expect(d.req("POST", "/v1/jobs", {"tenant": "research/nlp", "gpus": 4},
                         token=d.admin), 201)["id"]
        ja = wait_job(a, lambda j: j["state"] == "starting", d=d)
        old = ja["placement"]["tasks"][0]["node"]
        other = "ra-2" if old == "ra-1" else "ra-1"
        beat(old, {"jobs": [{"id": a, "run": ja["start_time"], "state": "running"}]})
        wait_job(a, lambda j: j["state"] == "running", d=d)
        for n in (old, other):
            expect(d.req("POST", "/v1/nodes/%s/cordon" % n, token=d.admin), 200)
        expect(d.req("POST", "/v1/jobs/%d/requeue" % a, token=d.admin), 202)
        wait_job(a, lambda j: j["state"] == "pending", d=d)
        admin = d.admin
        assert d.stop() == 0
        d = Daemon(d.dir)
        d.admin = admin
        expect(d.req("POST", "/v1/nodes/%s/uncordon" % other, token=d.admin), 200)
        ja = wait_job(a, lambda j: j["state"] == "starting", d=d)
        assert ja["placement"]["tasks"][0]["node"] == other, ja
        end = time.time() + 5
        while time.time() < end and entry(other, a) is None:
            time.sleep(0.05)
        assert entry(other, a)["run"] == 0  # its last run's node has not answered
        ack(other)
        time.sleep(0.3)
        assert entry(other, a)["run"] == 0
        ack(old)
        end = time.time() + 5
        while time.time() < end and entry(other, a)["run"] == 0:
            time.sleep(0.05)
        assert entry(other, a)["run"] == ja["start_time"], entry(other, a)
        # now it is held when allotd stops: placed on `old`, waiting for `other`
        beat(other, {"jobs": [{"id": a, "run": ja["start_time"], "state": "running"}]})
        wait_job(a, lambda j: j["state"] == "running", d=d)
        expect(d.req("POST", "/v1/nodes/%s/uncordon" % old, token=d.admin), 200)
        expect(d.req("POST", "/v1/nodes/%s/cordon" % other, token=d.admin), 200)
        expect(d.req("POST", "/v1/jobs/%d/requeue" % a, token=d.admin), 202)
        jb = wait_job(a, lambda j: j["state"] == "starting" and
                      j["start_time"] > ja["start_time"], d=d)
        end = time.time() + 5
        while time.time() < end and entry(old, a) is None:
            time.sleep(0.05)
        assert entry(old, a)["run"] == 0
        assert d.stop() == 0
        d = Daemon(d.dir)
        d.admin = admin
        end = time.time() + 5
        while time.time() < end and entry(old, a) is None:
            time.sleep(0.05)
        e = entry(old, a)
        assert e["run"] == jb["start_time"] and e.get("hold") is True, e
        ack(old)
        time.sleep(0.3)
        assert entry(old, a).get("hold") is True
        ack(other)
        end = time.time() + 5
        while time.time() < end and entry(old, a).get("hold"):
            time.sleep(0.05)
        e = entry(old, a)
        assert e["run"] == jb["start_time"] and "hold" not in e, e
    finally:
        d.stop()


def test_requeue_survives_a_crash():
    """A requeue allotd answered (202) is stored with the answer: killed right after it,
    allotd comes back with the job queued again, not running on as if never asked."""
    d = Daemon()
    try:
        expect(d.req("PUT", "/v1/tenants", TENANTS, token=d.admin), 200)
        ag = d.token("agent", "", "agents")
        expect(d.req("POST", "/v1/nodes/register", dict(N1, name="rc-1"), token=ag), 201)
        jid = expect(d.req("POST", "/v1/jobs", {"tenant": "research/nlp", "gpus": 4},
                           token=d.admin), 201)["id"]
        run = wait_job(jid, lambda j: j["state"] == "starting", d=d)["start_time"]
        expect(d.req("POST", "/v1/nodes/rc-1/heartbeat",
                     {"jobs": [{"id": jid, "run": run, "state": "running"}]}, token=ag), 200)
        wait_job(jid, lambda j: j["state"] == "running", d=d)
        expect(d.req("POST", "/v1/nodes/rc-1/cordon", token=d.admin), 200)  # not placed again
        expect(d.req("POST", "/v1/jobs/%d/requeue" % jid, token=d.admin), 202)
        admin = d.admin
        d.stop(signal.SIGKILL)
        d = Daemon(d.dir)
        d.admin = admin
        j = wait_job(jid, lambda j: j["state"] == "pending", d=d)
        ev = [e["kind"] for e in expect(d.req("GET", "/v1/jobs/%d/events" % jid,
                                              token=d.admin), 200)["events"]]
        assert ev.count("requeued") == 1, ev
    finally:
        d.stop()


def test_requeue_in_grace():
    """allot requeue of a job in its preemption grace requeues it now (the
    answer said "requeued" while nothing happened until the grace ended)."""
    d = Daemon(args=["--preempt-grace", "60s", "--preempt-min-runtime", "0s"])
    try:
        _, low, high = _victim_and_preemptor(d, "rg-1", {"checkpointable": True})
        wait_job(low, lambda j: (j["pending_reason"] or "").startswith("stopping"), d=d)
        expect(d.req("POST", "/v1/jobs/%d/requeue" % low, token=d.admin), 202)
        wait_job(low, lambda j: j["state"] == "pending", d=d)
        wait_job(high, lambda j: j["state"] == "starting", d=d)
        ev = expect(d.req("GET", "/v1/jobs/%d/events" % low, token=d.admin), 200)["events"]
        assert [e["detail"] for e in ev if e["kind"] == "requeued"] == ["requeued by admin"], ev
    finally:
        d.stop()


def test_once_job_never_runs_twice():
    """A job submitted with "requeue": false (its user said a second run
    would do harm) ends as cancelled when it is preempted, or evicted by
    drain --evict, instead of queueing to run again."""
    d = Daemon(args=["--preempt-grace", "0s", "--preempt-min-runtime", "0s"])
    try:
        _, low, high = _victim_and_preemptor(d, "once-1", {"requeue": False},
                                             report_running=False)
        j = wait_job(low, lambda j: j["state"] not in ("starting", "running"), d=d)
        assert j["state"] == "cancelled" and "runs once" in j["pending_reason"], j
        assert j["end_time"] > 0, j
        wait_job(high, lambda j: j["state"] == "starting", d=d)
        kinds = [e["kind"] for e in expect(d.req("GET", "/v1/jobs/%d/events" % low,
                                                 token=d.admin), 200)["events"]]
        assert kinds.count("placed") == 1 and "preempted" in kinds, kinds
        # without a grace period its trail says it stopped as it was preempted, then that
        # it ended, as a job its agent ended
        assert kinds[kinds.index("preempted") + 1] == "stopped", kinds
        assert kinds[-1] == "cancelled" and kinds.count("cancelled") == 1, kinds
        expect(d.req("POST", "/v1/jobs/%d/cancel" % high, token=d.admin), 200)
        # evicted from a draining node: ended, not queued again
        ev = expect(d.req("POST", "/v1/jobs", {"tenant": "research/nlp", "gpus": 1,
                                               "requeue": False}, token=d.admin), 201)["id"]
        wait_job(ev, lambda j: j["state"] == "starting", d=d)
        expect(d.req("POST", "/v1/nodes/once-1/drain?evict=true", token=d.admin), 200)
        j = wait_job(ev, lambda j: j["state"] not in ("starting", "running"), d=d)
        assert j["state"] == "cancelled" and "not run again" in j["pending_reason"], j
        kinds = [e["kind"] for e in expect(d.req("GET", "/v1/jobs/%d/events" % ev,
                                                 token=d.admin), 200)["events"]]
        assert kinds[-1] == "cancelled" and kinds.count("cancelled") == 1, kinds
    finally:
        d.stop()


def test_time_limit_counts_from_running():
    """A job's time limit counts from its agent's "running" report, not
    from its placement: a start that waits (for a victim's grace, an image)
    spends none of it; and it never ends before the limit has passed."""
    d = Daemon()
    try:
        expect(d.req("PUT", "/v1/tenants", TENANTS, token=d.admin), 200)
        ag = d.token("agent", "", "agents")
        expect(d.req("POST", "/v1/nodes/register", dict(N1, name="tl-1"), token=ag), 201)
        jid = expect(d.req("POST", "/v1/jobs", {"tenant": "research/nlp", "gpus": 1,
                                                "time_limit": 2}, token=d.admin), 201)["id"]
        run = wait_job(jid, lambda j: j["state"] == "starting", d=d)["start_time"]
        time.sleep(3.5)  # placed, not running yet: past its limit from placement
        assert expect(d.req("GET", "/v1/jobs/%d" % jid, token=d.admin), 200)["state"] == \
            "starting"
        expect(d.req("POST", "/v1/nodes/tl-1/heartbeat",
                     {"jobs": [{"id": jid, "run": run, "state": "running"}]}, token=ag), 200)
        t0 = time.time()
        j = wait_job(jid, lambda j: j["state"] == "failed", d=d)
        took = time.time() - t0
        assert "runtime limit (2 s)" in j["pending_reason"], j
        assert 1.9 < took < 5, took
        # its trail ends as an agent-reported end does: stopped, then failed, with why
        ev = expect(d.req("GET", "/v1/jobs/%d/events" % jid, token=d.admin), 200)["events"]
        assert [e["kind"] for e in ev][-2:] == ["stopped", "failed"], ev
        assert ev[-1]["detail"] == j["pending_reason"], ev
    finally:
        d.stop()


def test_lost_task_requeues():
    """A job whose agent lost its task (its supervisor died: no exit status)
    queues again, as when its node is lost, unless it runs once."""
    d = Daemon()
    try:
        expect(d.req("PUT", "/v1/tenants", TENANTS, token=d.admin), 200)
        ag = d.token("agent", "", "agents")
        expect(d.req("POST", "/v1/nodes/register", dict(N1, name="lt-1"), token=ag), 201)
        again, once = [expect(d.req("POST", "/v1/jobs", dict({"tenant": "research/nlp",
                                                               "gpus": 1}, **extra),
                                    token=d.admin), 201)["id"]
                       for extra in ({}, {"requeue": False})]
        runs = [wait_job(j, lambda x: x["state"] == "starting", d=d)["start_time"]
                for j in (again, once)]
        lost = [{"id": j, "run": r, "state": "lost",
                 "detail": "its process vanished without an exit status"}
                for j, r in zip((again, once), runs)]
        expect(d.req("POST", "/v1/nodes/lt-1/heartbeat", {"jobs": lost}, token=ag), 200)
        # queued again, and placed again at once (a new run)
        wait_job(again, lambda x: x["state"] == "pending" or x["start_time"] != runs[0], d=d)
        ev = expect(d.req("GET", "/v1/jobs/%d/events" % again, token=d.admin), 200)["events"]
        req = [e["detail"] for e in ev if e["kind"] == "requeued"]
        assert req == ["lost on node lt-1: its process vanished without an exit status"], ev
        j = wait_job(once, lambda x: x["state"] == "lost", d=d)
        assert "vanished" in j["pending_reason"], j
    finally:
        d.stop()


def test_node_selector():
    """A job's node_selector keeps it to nodes carrying every label it names: it waits
    for room there although other nodes are free, says when no node has the labels, and
    runs on a node given them later (relabelled out of service); selectors outlive a
    restart of allotd."""
    d = Daemon()
    try:
        expect(d.req("PUT", "/v1/tenants", TENANTS, token=d.admin), 200)
        ag = d.token("agent", "", "agents")
        na = dict(N1, name="ns-a", labels={"zone": "a", "nvlink": ""})
        nc = dict(N1, name="ns-c", labels={})
        for n in (na, dict(N1, name="ns-b", labels={"zone": "b"}), nc):
            expect(d.req("POST", "/v1/nodes/register", n, token=ag), 201)

        def sub(sel, gpus=1):
            return expect(d.req("POST", "/v1/jobs", {"tenant": "research/nlp", "gpus": gpus,
                                                     "node_selector": sel},
                                token=d.admin), 201)["id"]

        def node_of(jid):
            j = wait_job(jid, lambda x: x["state"] == "starting", d=d)
            return {t["node"] for t in j["placement"]["tasks"]}

        zb = [sub({"zone": "b"}) for _ in range(3)]
        assert [node_of(j) for j in zb] == [{"ns-b"}] * 3
        assert node_of(sub({"nvlink": "", "zone": "a"})) == {"ns-a"}
        # ns-b has one GPU left: four wait, though ns-c has four free
        big = sub({"zone": "b"}, gpus=4)
        j = wait_job(big, lambda x: x["pending_reason"], d=d)
        assert j["state"] == "pending" and j["pending_reason"].startswith(
            "among the nodes with its labels: no node has 4 free GPUs"), j
        assert j["spec"]["node_selector"] == {"zone": "b"}, j
        zc = sub({"zone": "c"})
        j = wait_job(zc, lambda x: x["pending_reason"], d=d)
        assert j["pending_reason"] == "no node has the labels of its node selector", j
        # a ready node keeps its labels; cordoned and empty, it takes new ones
        nc["labels"] = {"zone": "c"}
        expect(d.req("POST", "/v1/nodes/register", nc, token=ag), 409)
        expect(d.req("POST", "/v1/nodes/ns-c/cordon", token=d.admin), 200)
        expect(d.req("POST", "/v1/nodes/register", nc, token=ag), 200)
        wait_job(zc, lambda x: "out of service" in (x["pending_reason"] or ""), d=d)
        admin = d.admin
        d.stop()
        d = Daemon(d.dir)
        d.admin = admin
        assert node_of(zb[0]) == {"ns-b"}
        j = wait_job(big, lambda x: x["pending_reason"], d=d)
        assert j["state"] == "pending", j
        expect(d.req("POST", "/v1/nodes/ns-c/uncordon", token=d.admin), 200)
        assert node_of(zc) == {"ns-c"}
        assert expect(d.req("GET", "/v1/jobs/%d" % big, token=d.admin), 200)["state"] == \
            "pending"
    finally:
        d.stop()


def test_priority_change():
    """POST /v1/jobs/{id}/priority (allot priority) gives a waiting job another class: it
    goes ahead of the jobs of its old class, also after a restart (the class is in its
    stored spec). A starting or running job keeps its class (409); an unknown class is
    422, an unknown field 400, a viewer 403; asking again changes nothing."""
    from cli_fixture import cli
    d = Daemon(args=["--preempt-min-runtime", "3600s"])  # nothing preempts the running one
    try:
        expect(d.req("PUT", "/v1/tenants", TENANTS, token=d.admin), 200)
        ag = d.token("agent", "", "agents")
        expect(d.req("POST", "/v1/nodes/register", dict(N1, name="pc-1"), token=ag), 201)

        def sub():
            return expect(d.req("POST", "/v1/jobs", {"tenant": "research/nlp", "gpus": 4,
                                                     "priority": "training"},
                                token=d.admin), 201)["id"]
        fill = sub()
        wait_job(fill, lambda j: j["state"] == "starting", d=d)
        first, second = sub(), sub()
        wait_job(second, lambda j: j["pending_reason"], d=d)
        path = "/v1/jobs/%d/priority" % second
        j = expect(d.req("POST", path, {"priority": "inference"}, token=d.admin), 200)
        assert j["spec"]["priority"] == "inference" and j["state"] == "pending", j
        expect(d.req("POST", path, {"priority": "inference"}, token=d.admin), 200)  # again
        ev = expect(d.req("GET", "/v1/jobs/%d/events" % second, token=d.admin), 200)["events"]
        pri = [e["detail"] for e in ev if e["kind"] == "priority"]
        assert len(pri) == 1 and pri[0].startswith("priority class training -> inference by"), ev
        for body, st, what in [({"priority": "urgent"}, 422, "no priority class urgent"),
                               ({"priority": "inference", "gpus": 1}, 400, "unknown field"),
                               ({"priority": 5}, 400, "class name"), ({}, 400, "class name")]:
            b = expect(d.req("POST", path, body, token=d.admin), st)
            assert what in b["error"]["message"], (body, b)
        b = expect(d.req("POST", "/v1/jobs/%d/priority" % fill, {"priority": "inference"},
                         token=d.admin), 409)
        assert "only while the job waits" in b["error"]["message"], b
        viewer = d.token("viewer", "research/nlp", "v")
        expect(d.req("POST", path, {"priority": "training"}, token=viewer), 403)
        # the CLI: the class first, then the ids
        r = cli(d, "priority", "inference", str(first))
        assert r.rc == 0 and r.out == "job %d: priority class inference\n" % first, r
        r = cli(d, "priority", "training", str(first))
        assert r.rc == 0, r
        # the second goes ahead of the first when room frees
        expect(d.req("POST", "/v1/jobs/%d/cancel" % fill, token=d.admin), 200)
        wait_job(second, lambda j: j["state"] == "starting", d=d)
        assert expect(d.req("GET", "/v1/jobs/%d" % first, token=d.admin), 200)["state"] == \
            "pending"
        # after a restart a changed class holds: a third goes ahead of the first
        third = sub()
        expect(d.req("POST", "/v1/jobs/%d/priority" % third, {"priority": "inference"},
                     token=d.admin), 200)
        admin = d.admin
        assert d.stop() == 0
        d = Daemon(d.dir, args=["--preempt-min-runtime", "3600s"])
        d.admin = admin
        expect(d.req("POST", "/v1/jobs/%d/cancel" % second, token=d.admin), 200)
        wait_job(third, lambda j: j["state"] == "starting", d=d)
        assert expect(d.req("GET", "/v1/jobs/%d" % first, token=d.admin), 200)["state"] == \
            "pending"
    finally:
        d.stop()


if __name__ == "__main__":
    dm = Daemon()
    try:
        expect(dm.req("PUT", "/v1/tenants", TENANTS, token=dm.admin), 200)
        AG = dm.token("agent", "", "agents")
        fx.run([test_register, test_place_run_succeed, test_mig_and_cancel_frees,
                test_metrics_show_the_cluster, test_restart_rebuilds_from_store,
                test_cycle_work_goes_on, test_reserve_gangs, test_fair_reclaim,
                test_quota_change_reclaims, test_fair_cap,
                test_aging, test_large_gang_gpus, test_las_threshold, test_lending_hold,
                test_defrag, test_checkpoint_report, test_checkpoint_survives_restart,
                test_job_credential, test_preempted_job_survives_restart,
                test_restart_keeps_runs_apart, test_requeue_survives_a_crash,
                test_requeue_in_grace,
                test_once_job_never_runs_twice, test_time_limit_counts_from_running,
                test_lost_task_requeues, test_node_selector, test_priority_change])
    finally:
        dm.stop()
