"""Held jobs end to end, with the test acting as the agent: `allot submit --hold`
(`"hold": true`), `allot hold` / `allot release` (POST /v1/jobs/{id}/hold and
/release), as Slurm's `sbatch -H` and `scontrol hold|release`. A held job stays
pending with a reason saying so and does not start, not even when room comes or its
dependencies hold; the jobs behind it start in its stead; released, it waits in its
old place. Only pending jobs are held, a viewer may not, arrays are held whole, every
change is an event and an audit entry, and a restart keeps holds. A job with a begin
time (`allot submit --begin`, sbatch --begin) waits in the same way until it comes."""

import time

import allotd_fixture as fx
from allotd_fixture import TENANTS, Daemon, expect
from cli_fixture import cli, fails, ok

dm = None
AG = None

# one node of 4 GPUs: the fifth 1-GPU job waits
N1 = {"name": "n1", "cpus": 64, "memory": 512000, "gpus": [{"model": "A100-80GB"}] * 4}


def get(jid):
    return expect(dm.req("GET", "/v1/jobs/%d" % jid, token=dm.admin), 200)


def wait_job(jid, pred, timeout=10):
    end = time.time() + timeout
    while time.time() < end:
        j = get(jid)
        if pred(j):
            return j
        time.sleep(0.05)
    raise AssertionError("job %d: condition not met within %ss: %r" % (jid, timeout, j))


def submit(body, status=201, token=None):
    body = dict({"tenant": "research/nlp", "gpus": 1}, **body)
    return expect(dm.req("POST", "/v1/jobs", body, token=token or dm.admin), status)["id"]


def report(jid, state, code=None):
    rep = {"id": jid, "state": state}
    if code is not None:
        rep["exit_code"] = code
    expect(dm.req("POST", "/v1/nodes/n1/heartbeat", {"jobs": [rep]}, token=AG), 200)


def finish(jid):
    wait_job(jid, lambda x: x["state"] in ("starting", "running"))
    report(jid, "running")
    report(jid, "succeeded", 0)
    wait_job(jid, lambda x: x["state"] == "succeeded")


def started(jid):
    return wait_job(jid, lambda x: x["state"] == "starting")


def stays_held(jid, seconds=0.6):
    """The job is pending and held, with the reason saying so, for a few cycles."""
    j = wait_job(jid, lambda x: (x["pending_reason"] or "").startswith("held"))
    time.sleep(seconds)
    j = get(jid)
    assert j["state"] == "pending" and j["held"] is True, j
    assert j["pending_reason"] == "held: `allot release %d` lets it start" % jid, j
    return j


def kinds(jid):
    return [e["kind"] for e in
            expect(dm.req("GET", "/v1/jobs/%d/events" % jid, token=dm.admin), 200)["events"]]


def test_register():
    expect(dm.req("POST", "/v1/nodes/register", N1, token=AG), 201)


def test_submit_held_then_release():
    r = ok(cli(dm, "submit", "-t", "research/nlp", "--gpus", "1", "--hold", "--", "true"))
    jid = int(r.out)
    assert get(jid)["held"] is True
    stays_held(jid)  # the node is empty: only the hold keeps it
    r = ok(cli(dm, "release", jid))
    assert r.out == "released job %d\n" % jid, r
    j = started(jid)
    assert j["held"] is False, j
    assert kinds(jid)[:3] == ["submitted", "held", "released"], kinds(jid)
    ev = expect(dm.req("GET", "/v1/jobs/%d/events" % jid, token=dm.admin), 200)["events"]
    assert ev[1]["detail"] == "submitted held by admin", ev
    finish(jid)
    st, body = dm.req("POST", "/v1/jobs", {"tenant": "research/nlp", "gpus": 1, "hold": "yes"},
                      token=dm.admin)
    assert st == 400 and '"hold" must be a boolean' in body["error"]["message"], (st, body)


def test_hold_a_waiting_job():
    """A job waiting in the queue is held: room that comes goes to the job behind it;
    released, it starts at the next room, before jobs submitted after it."""
    running = [submit({"name": "fill%d" % i}) for i in range(4)]
    for jid in running:
        started(jid)
    first = submit({"name": "first"})
    second = submit({"name": "second"})
    r = ok(cli(dm, "hold", first))
    assert r.out == "held job %d\n" % first, r
    ev = expect(dm.req("GET", "/v1/jobs/%d/events" % first, token=dm.admin), 200)["events"]
    assert [e["detail"] for e in ev if e["kind"] == "held"] == ["held by admin"], ev
    finish(running[0])
    started(second)
    stays_held(first)
    third = submit({"name": "third"})
    ok(cli(dm, "release", first))
    finish(running[1])
    started(first)
    time.sleep(0.3)
    assert get(third)["state"] == "pending"
    for jid in running[2:] + [second, first]:
        finish(jid)
    finish(third)


def test_conflicts_and_roles():
    jid = submit({"gpus": 0})
    started(jid)
    r = fails(cli(dm, "hold", jid), 4, "conflict")
    assert "job %d is starting: only a pending job is held" % jid in r.err, r
    finish(jid)
    fails(cli(dm, "release", jid), 4, "conflict")
    fails(cli(dm, "hold", 999999), 2, "not_found")
    waiting = submit({"gpus": 4, "hold": True})
    viewer = dm.token("viewer", "research/nlp", "v-hold")
    st, body = dm.req("POST", "/v1/jobs/%d/release" % waiting, token=viewer)
    assert st == 403 and body["error"]["code"] == "forbidden", (st, body)
    # another tenant's job reads as missing
    other = dm.token("member", "research/vision", "m-vision")
    st, body = dm.req("POST", "/v1/jobs/%d/release" % waiting, token=other)
    assert st == 404, (st, body)
    # holding a held job changes nothing: no second event, still 200
    before = kinds(waiting).count("held")
    for _ in range(2):
        expect(dm.req("POST", "/v1/jobs/%d/hold" % waiting, token=dm.admin), 200)
    assert kinds(waiting).count("held") == before
    member = dm.token("member", "research/nlp", "m-hold")
    j = expect(dm.req("POST", "/v1/jobs/%d/release" % waiting, token=member), 200)
    assert j["held"] is False, j
    finish(waiting)
    entries = expect(dm.req("GET", "/v1/audit?limit=1000", token=dm.admin), 200)["entries"]
    acts = [(e["action"], e["target"]) for e in entries]
    assert ("job.release", "job/%d" % waiting) in acts, acts[-10:]


def test_dependency_and_hold():
    """A held job whose dependency holds stays held; released, it starts."""
    a = submit({"name": "a", "gpus": 0})
    b = submit({"name": "b", "gpus": 0, "dependency": "afterok:%d" % a, "hold": True})
    stays_held(b, 0.2)
    finish(a)
    stays_held(b)
    expect(dm.req("POST", "/v1/jobs/%d/release" % b, token=dm.admin), 200)
    finish(b)
    # released before its dependency holds: it waits for the dependency
    c = submit({"name": "c", "gpus": 0})
    d = submit({"name": "d", "gpus": 0, "dependency": "afterok:%d" % c})
    expect(dm.req("POST", "/v1/jobs/%d/hold" % d, token=dm.admin), 200)
    stays_held(d, 0.2)
    expect(dm.req("POST", "/v1/jobs/%d/release" % d, token=dm.admin), 200)
    j = wait_job(d, lambda x: "waiting for job %d" % c in (x["pending_reason"] or ""))
    assert j["state"] == "pending", j
    finish(c)
    finish(d)
    # held or not, a job whose dependency can never hold ends cancelled
    e = submit({"name": "e", "gpus": 0})
    f = submit({"name": "f", "gpus": 0, "dependency": "afterok:%d" % e, "hold": True})
    started(e)
    report(e, "running")
    report(e, "failed", 3)
    j = wait_job(f, lambda x: x["state"] == "cancelled")
    assert "dependency can never be satisfied" in (j["pending_reason"] or "") or \
        any("dependency can never" in (ev.get("detail") or "") for ev in
            expect(dm.req("GET", "/v1/jobs/%d/events" % f, token=dm.admin), 200)["events"]), j


def test_array_held_whole():
    r = ok(cli(dm, "submit", "-t", "research/nlp", "--gpus", "4", "--array", "0-2", "--",
               "true"))
    aid = int(r.out)
    ids = [m["id"] for m in expect(dm.req("GET", "/v1/jobs?array=%d" % aid,
                                          token=dm.admin), 200)["jobs"]]
    started(ids[0])
    r = ok(cli(dm, "hold", aid))
    assert r.out == "held 2 jobs of array %d\n" % aid, r
    finish(ids[0])
    for jid in ids[1:]:
        stays_held(jid, 0.1)
    r = ok(cli(dm, "release", "%d_1" % aid))  # one member
    assert r.out == "released job %d_1\n" % aid, r
    finish(ids[1])
    stays_held(ids[2], 0.1)
    r = ok(cli(dm, "release", aid))
    assert r.out == "released 1 jobs of array %d\n" % aid, r
    finish(ids[2])
    fails(cli(dm, "hold", aid), 4, "conflict")  # no member pending


def test_hold_in_a_throttled_array():
    """A held member gives its slot of the array's throttle to the next member; released,
    it waits in its old place in the gate (submission order), so the throttle still counts
    right and it goes in before the members after it."""
    def ids_of(aid):
        return [m["id"] for m in expect(dm.req("GET", "/v1/jobs?array=%d" % aid,
                                               token=dm.admin), 200)["jobs"]]

    def throttled(x):
        return "array throttle" in (x["pending_reason"] or "")

    a = ids_of(submit({"gpus": 4, "array": "0-3%2"}))
    b = ids_of(submit({"gpus": 4, "array": "0-3%2"}))
    started(a[0])
    wait_job(a[2], throttled)
    wait_job(b[2], throttled)
    expect(dm.req("POST", "/v1/jobs/%d/hold" % a[1], token=dm.admin), 200)
    stays_held(a[1], 0.2)
    wait_job(a[2], lambda x: not throttled(x))  # a[1]'s slot
    assert throttled(get(a[3])), get(a[3])
    expect(dm.req("POST", "/v1/jobs/%d/release" % a[1], token=dm.admin), 200)
    wait_job(a[1], throttled)  # a[0] and a[2] hold the two slots
    finish(a[0])
    # a[1] goes in before a[3], and the throttle holds: a[1] and a[2] in the queue only
    started(a[1])
    time.sleep(0.3)
    assert throttled(get(a[3])), get(a[3])
    for jid in a[1:] + b:
        finish(jid)


def begin_reason(t):
    return "waiting for its begin time, " + time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def test_begin_time():
    """sbatch --begin: a job waits, pending with its reason, until its begin time, then
    starts without anything else happening; one whose time has passed starts at once; a
    user's hold comes first, and a dependency that can never hold cancels it before its
    time."""
    t0 = time.time()
    r = ok(cli(dm, "submit", "-t", "research/nlp", "--gpus", "0", "--begin", "now+3", "-o",
               "json", "--", "true"))
    job = fx.json.loads(r.out)
    jid, begin = job["id"], job["spec"]["begin_time"]
    assert int(t0) + 3 <= begin <= int(time.time()) + 3, (t0, job)
    j = wait_job(jid, lambda x: x["pending_reason"] == begin_reason(begin))
    assert j["state"] == "pending", j
    r = ok(cli(dm, "show", jid))
    iso = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(begin))
    assert "%-13s %s\n" % ("begin:", iso) in r.out, r.out
    assert "%-13s %s\n" % ("reason:", begin_reason(begin)) in r.out, r.out
    later = submit({"gpus": 0, "begin_time": int(time.time()) + 3600})  # waits on
    past = submit({"gpus": 0, "begin_time": int(time.time()) - 60})
    started(past)
    assert time.time() < begin, "the test was too slow to see the job wait"
    j = wait_job(jid, lambda x: x["state"] == "starting", timeout=15)
    assert time.time() >= begin, (time.time(), j)
    assert get(later)["state"] == "pending"
    assert get(later)["pending_reason"] == begin_reason(get(later)["spec"]["begin_time"])
    finish(jid)
    finish(past)
    # held and due: the hold is the reason; released, it waits for its time
    h = submit({"gpus": 0, "hold": True, "begin_time": int(time.time()) + 2})
    stays_held(h, 0.1)
    expect(dm.req("POST", "/v1/jobs/%d/release" % h, token=dm.admin), 200)
    wait_job(h, lambda x: x["pending_reason"] == begin_reason(x["spec"]["begin_time"]))
    finish(h)
    # a dependency that can never hold ends it before its time
    e = submit({"gpus": 0})
    f = submit({"gpus": 0, "dependency": "afterok:%d" % e,
                "begin_time": int(time.time()) + 3600})
    wait_job(f, lambda x: x["pending_reason"] == begin_reason(x["spec"]["begin_time"]))
    started(e)
    report(e, "running")
    report(e, "failed", 3)
    wait_job(f, lambda x: x["state"] == "cancelled")
    expect(dm.req("POST", "/v1/jobs/%d/cancel" % later, token=dm.admin), 200)
    # its place in the queue is its begin time, not its submission (Slurm's eligible
    # time): a job submitted after it, before its time, goes first
    blocker = submit({"gpus": 4})
    started(blocker)
    early = submit({"gpus": 4, "begin_time": int(time.time()) + 2})
    time.sleep(1)
    meanwhile = submit({"gpus": 4})
    wait_job(early, lambda x: x["pending_reason"] and "begin time" not in x["pending_reason"])
    finish(blocker)
    started(meanwhile)
    assert get(early)["state"] == "pending", get(early)
    finish(meanwhile)
    finish(early)


def test_restart_keeps_holds():
    global dm
    jid = submit({"gpus": 0, "hold": True})
    stays_held(jid, 0.1)
    later = submit({"gpus": 0, "begin_time": int(time.time()) + 3600})
    wait_job(later, lambda x: x["pending_reason"] == begin_reason(x["spec"]["begin_time"]))
    admin = dm.admin
    assert dm.stop() == 0
    dm = Daemon(dm.dir)
    dm.admin = admin
    expect(dm.req("POST", "/v1/nodes/n1/heartbeat", {}, token=AG), 200)
    stays_held(jid)
    expect(dm.req("POST", "/v1/jobs/%d/release" % jid, token=dm.admin), 200)
    finish(jid)
    j = get(later)  # still waits for its begin time
    assert j["state"] == "pending", j
    assert j["pending_reason"] == begin_reason(j["spec"]["begin_time"]), j
    expect(dm.req("POST", "/v1/jobs/%d/cancel" % later, token=dm.admin), 200)
    v = expect(dm.req("GET", "/v1/audit/verify", token=dm.admin), 200)
    assert v["ok"] is True, v


if __name__ == "__main__":
    dm = Daemon()
    try:
        expect(dm.req("PUT", "/v1/tenants", TENANTS, token=dm.admin), 200)
        AG = dm.token("agent", "", "agents")
        fx.run([test_register, test_submit_held_then_release, test_hold_a_waiting_job,
                test_conflicts_and_roles, test_dependency_and_hold, test_array_held_whole,
                test_hold_in_a_throttled_array, test_begin_time, test_restart_keeps_holds])
    finally:
        dm.stop()
