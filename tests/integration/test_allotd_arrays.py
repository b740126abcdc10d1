"""Job arrays and dependencies end to end, with the test acting as the
agent: `array` expands into members with a throttle, `dependency` holds
jobs until afterok / afterany / afternotok hold (or cancels them when they
never can), cancelling an array's first job with ?array=true cancels every
member, and a restart keeps held jobs held."""

import time

import allotd_fixture as fx
from allotd_fixture import TENANTS, Daemon, expect

dm = None
AG = None

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


def submit(body, status=201, token=None, headers=None):
    body = dict({"tenant": "research/nlp", "gpus": 1}, **body)
    return expect(dm.req("POST", "/v1/jobs", body, token=token or dm.admin, headers=headers),
                  status)


def report(jid, state, code=None):
    rep = {"id": jid, "state": state}
    if code is not None:
        rep["exit_code"] = code
    expect(dm.req("POST", "/v1/nodes/n1/heartbeat", {"jobs": [rep]}, token=AG), 200)


def finish(jid, ok=True):
    wait_job(jid, lambda x: x["state"] == "starting")
    report(jid, "running")
    report(jid, "succeeded" if ok else "failed", 0 if ok else 3)
    wait_job(jid, lambda x: x["state"] == ("succeeded" if ok else "failed"))


def members(aid):
    return expect(dm.req("GET", "/v1/jobs?array=%d&limit=1000" % aid, token=dm.admin),
                  200)["jobs"]


def test_register():
    expect(dm.req("POST", "/v1/nodes/register", N1, token=AG), 201)


def test_bad_expressions():
    for arr in ["", "5-1", "0-10000", "1,1", "0-3%0", "0-3%", "a", "1-", "1,", "0-9:0",
                "-1"]:
        e = submit({"array": arr}, 422)
        assert "array" in e["error"]["message"], (arr, e)
    submit({"array": 5}, 400)
    for dep in ["afterok", "afterok:", "beforeok:1", "afterok:1?afterany:2", "afterok:x",
                "afterok:1,", ",afterok:1", "afterok:0"]:
        e = submit({"dependency": dep}, 422)
        assert "dependency" in e["error"]["message"], (dep, e)
    e = submit({"dependency": "afterok:999999"}, 422)
    assert "no job 999999" in e["error"]["message"], e
    # a job the caller may not see reads as missing
    other = submit({"tenant": "research/vision", "gpus": 0})
    member = dm.token("member", "research/nlp", "m")
    e = submit({"dependency": "afterany:%d" % other["id"]}, 422, token=member)
    assert "no job %d" % other["id"] in e["error"]["message"], e
    expect(dm.req("POST", "/v1/jobs/%d/cancel" % other["id"], token=dm.admin), 200)


def test_dependencies():
    a = submit({"name": "a"})
    ok = submit({"name": "ok", "dependency": "afterok:%d" % a["id"], "gpus": 0})
    notok = submit({"name": "notok", "dependency": "afternotok:%d" % a["id"], "gpus": 0})
    anyd = submit({"name": "any", "dependency": "afterany:%d" % a["id"], "gpus": 0})
    assert ok["depends_on"] == [a["id"]], ok
    for j, why in [(ok, "to succeed (afterok)"), (notok, "to fail (afternotok)"),
                   (anyd, "to end (afterany)")]:
        w = wait_job(j["id"], lambda x: x["pending_reason"])
        assert w["state"] == "pending" and why in w["pending_reason"], w
        assert w["placement"] is None
    finish(a["id"])
    wait_job(ok["id"], lambda x: x["state"] == "starting")
    wait_job(anyd["id"], lambda x: x["state"] == "starting")
    n = wait_job(notok["id"], lambda x: x["state"] == "cancelled")
    assert "can never be satisfied" in n["pending_reason"], n
    for j in (ok, anyd):
        finish(j["id"])
    # afternotok of a failed job starts; afterok of it never does
    b = submit({"name": "b"})
    rescue = submit({"dependency": "afternotok:%d" % b["id"], "gpus": 0})
    never = submit({"dependency": "afterok:%d,afterany:%d" % (b["id"], b["id"]), "gpus": 0})
    chained = submit({"dependency": "afterok:%d" % never["id"], "gpus": 0})
    finish(b["id"], ok=False)
    wait_job(rescue["id"], lambda x: x["state"] == "starting")
    wait_job(never["id"], lambda x: x["state"] == "cancelled")
    c = wait_job(chained["id"], lambda x: x["state"] == "cancelled")
    assert "job %d cancelled" % never["id"] in c["pending_reason"], c
    finish(rescue["id"])
    # cancelling a held job takes it out of the gate
    h = submit({"dependency": "afterok:%d" % a["id"], "gpus": 0})
    h2 = submit({"dependency": "afterany:%d" % rescue["id"], "gpus": 0})
    wait_job(h2["id"], lambda x: x["state"] == "starting")
    finish(h2["id"])
    wait_job(h["id"], lambda x: x["state"] == "starting")
    finish(h["id"])
    x = submit({"dependency": "afterok:%d" % ok["id"], "gpus": 0})
    wait_job(x["id"], lambda j: j["state"] == "starting")
    finish(x["id"])


def test_array_dependency_names_the_member():
    """afterok of an array that one member failed names that member, not the array."""
    a = submit({"name": "pair", "array": "0-1", "command": ["run"]})
    ids = [m["id"] for m in members(a["id"])]
    dep = submit({"dependency": "afterok:%d" % a["id"], "gpus": 0})
    finish(ids[0])
    finish(ids[1], ok=False)
    n = wait_job(dep["id"], lambda x: x["state"] == "cancelled")
    assert "job %d of array %d failed (afterok)" % (ids[1], a["id"]) in n["pending_reason"], n


def test_dependency_on_one_member():
    """afterok:ID_INDEX (Slurm's 12_3) waits for that member of the array alone, the
    first one too (whose id also stands for the whole array)."""
    a = submit({"name": "trio", "array": "0-2", "command": ["run"]})
    ids = [m["id"] for m in members(a["id"])]
    first = submit({"dependency": "afterok:%d_0" % a["id"], "gpus": 0})
    last = submit({"dependency": "afterany:%d_2" % a["id"], "gpus": 0})
    whole = submit({"dependency": "afterok:%d" % a["id"], "gpus": 0})
    assert first["depends_on"] == [ids[0]] and last["depends_on"] == [ids[2]], (first, last)
    w = wait_job(last["id"], lambda x: x["pending_reason"])
    assert "waiting for job %d_2 to end (afterany)" % a["id"] in w["pending_reason"], w
    finish(ids[0])
    wait_job(first["id"], lambda x: x["state"] == "starting")
    # the whole array's dependant names the member it still waits for
    want = "waiting for job %d to succeed (afterok; member %d (%d_1) has not ended)" % (
        a["id"], ids[1], a["id"])
    wait_job(whole["id"], lambda x: x["pending_reason"] == want)
    finish(ids[2], ok=False)
    wait_job(last["id"], lambda x: x["state"] == "starting")
    n = wait_job(whole["id"], lambda x: x["state"] == "cancelled")  # every member: never
    assert "job %d of array %d failed" % (ids[2], a["id"]) in n["pending_reason"], n
    finish(ids[1])
    for j in (first, last):
        finish(j["id"])
    # a member the array does not have, or a job that is no array
    e = submit({"dependency": "afterok:%d_3" % a["id"]}, 422)
    assert "array %d has no index 3" % a["id"] in e["error"]["message"], e
    e = submit({"dependency": "afterok:%d_0" % first["id"]}, 422)
    assert "is not an array" in e["error"]["message"], e
    for dep in ["afterok:%d_" % a["id"], "afterok:%d_x" % a["id"], "afterok:%d_10000" % a["id"]]:
        e = submit({"dependency": dep}, 422)
        assert "array index" in e["error"]["message"], (dep, e)


def test_array_throttle_and_cancel():
    a = submit({"name": "sweep", "array": "0-9%2", "command": ["run"]})
    aid = a["id"]
    assert a["array_size"] == 10 and a["array_job_id"] == aid and a["array_index"] == 0, a
    ms = members(aid)
    assert [m["array_index"] for m in ms] == list(range(10)), ms
    assert all(m["array_job_id"] == aid and m["name"] == "sweep" for m in ms)
    ids = [m["id"] for m in ms]
    wait_job(ids[1], lambda x: x["state"] == "starting")
    w = wait_job(ids[2], lambda x: x["pending_reason"])
    assert "array throttle" in w["pending_reason"] and w["state"] == "pending", w
    running = [m for m in members(aid) if m["state"] == "starting"]
    assert [m["array_index"] for m in running] == [0, 1], running
    desired = expect(dm.req("POST", "/v1/nodes/n1/heartbeat", {}, token=AG), 200)["jobs"]
    mine = sorted((d["array_job_id"], d["array_index"]) for d in desired
                  if d.get("array_job_id") == aid)
    assert mine == [(aid, 0), (aid, 1)], desired
    # one ends: exactly the next index enters
    finish(ids[0])
    wait_job(ids[2], lambda x: x["state"] == "starting")
    time.sleep(0.3)
    assert get(ids[3])["state"] == "pending"
    # a dependency on the array waits for every member
    after = submit({"dependency": "afterany:%d" % aid, "gpus": 0})
    w = wait_job(after["id"], lambda x: x["pending_reason"])
    assert "job %d to end" % aid in w["pending_reason"], w
    # cancel the whole array through its first job's id
    c = expect(dm.req("POST", "/v1/jobs/%d/cancel?array=true" % aid, token=dm.admin), 200)
    assert c["state"] == "succeeded" and c["members_cancelled"] == 9, c
    assert all(m["state"] == "cancelled" for m in members(aid)[1:])
    expect(dm.req("POST", "/v1/jobs/%d/cancel?array=true" % aid, token=dm.admin), 409)
    wait_job(after["id"], lambda x: x["state"] == "starting")
    finish(after["id"])
    # without ?array=true only that job is cancelled
    b = submit({"array": "0-2", "gpus": 0})
    expect(dm.req("POST", "/v1/jobs/%d/cancel" % b["id"], token=dm.admin), 200)
    assert [m["state"] for m in members(b["id"])][0] == "cancelled"
    c = expect(dm.req("POST", "/v1/jobs/%d/cancel?array=1" % b["id"], token=dm.admin), 200)
    assert c["members_cancelled"] == 2, c


def test_array_priority():
    """A priority change on an array's first id with ?array=true (allot priority ID)
    changes every pending member and counts those it changed; a started member keeps its
    class; without the flag only that job is asked (409: it started); 409 when no member
    waits."""
    from cli_fixture import cli
    a = submit({"array": "0-3%1", "priority": "training", "gpus": 0})
    aid = a["id"]
    ids = [m["id"] for m in members(aid)]
    wait_job(ids[0], lambda x: x["state"] == "starting")
    p = "/v1/jobs/%d/priority" % aid
    expect(dm.req("POST", "/v1/jobs/%d/priority" % ids[1], {"priority": "inference"},
                  token=dm.admin), 200)
    j = expect(dm.req("POST", p + "?array=true", {"priority": "inference"}, token=dm.admin),
               200)
    assert j["members_changed"] == 2 and j["state"] == "starting", j
    assert [get(i)["spec"]["priority"] for i in ids] == ["training"] + ["inference"] * 3
    assert [e["kind"] for e in expect(dm.req("GET", "/v1/jobs/%d/events" % ids[3],
                                             token=dm.admin), 200)["events"]].count(
        "priority") == 1
    j = expect(dm.req("POST", p + "?array=1", {"priority": "inference"}, token=dm.admin), 200)
    assert j["members_changed"] == 0, j
    b = expect(dm.req("POST", p, {"priority": "inference"}, token=dm.admin), 409)
    assert "only while the job waits" in b["error"]["message"], b
    r = cli(dm, "priority", "training", aid)
    assert r.rc == 0 and r.out == "array %d: priority class changed on 3 pending jobs\n" % aid, r
    assert [get(i)["spec"]["priority"] for i in ids[1:]] == ["training"] * 3
    expect(dm.req("POST", "/v1/jobs/%d/cancel?array=true" % aid, token=dm.admin), 200)
    b = expect(dm.req("POST", p + "?array=true", {"priority": "inference"}, token=dm.admin), 409)
    assert "no job of array %d is pending" % aid in b["error"]["message"], b


def test_array_idempotency():
    h = {"Idempotency-Key": "sweep-1"}
    a = submit({"array": "3,5,7-9:2", "gpus": 0}, headers=h)
    assert a["array_size"] == 4, a
    again = submit({"array": "3,5,7-9:2", "gpus": 0}, 200, headers=h)
    assert again["id"] == a["id"], (a, again)
    assert [m["array_index"] for m in members(a["id"])] == [3, 5, 7, 9]
    expect(dm.req("POST", "/v1/jobs/%d/cancel?array=true" % a["id"], token=dm.admin), 200)


def test_restart_keeps_held_jobs():
    global dm
    a = submit({"name": "first"})
    held = submit({"dependency": "afterok:%d" % a["id"], "gpus": 0})
    arr = submit({"array": "0-3%1", "gpus": 0})
    wait_job(held["id"], lambda x: x["pending_reason"])
    wait_job(arr["id"], lambda x: x["state"] == "starting")
    admin = dm.admin
    assert dm.stop() == 0
    dm = Daemon(dm.dir)
    dm.admin = admin
    time.sleep(0.3)
    assert get(held["id"])["state"] == "pending"
    assert [m["state"] for m in members(arr["id"])] == ["starting"] + ["pending"] * 3
    expect(dm.req("POST", "/v1/nodes/n1/heartbeat", {}, token=AG), 200)
    finish(a["id"])
    wait_job(held["id"], lambda x: x["state"] == "starting")
    ids = [m["id"] for m in members(arr["id"])]
    finish(ids[0])
    wait_job(ids[1], lambda x: x["state"] == "starting")
    assert get(ids[2])["state"] == "pending"
    v = expect(dm.req("GET", "/v1/audit/verify", token=dm.admin), 200)
    assert v["ok"] is True, v


if __name__ == "__main__":
    dm = Daemon()
    try:
        expect(dm.req("PUT", "/v1/tenants", TENANTS, token=dm.admin), 200)
        AG = dm.token("agent", "", "agents")
        fx.run([test_register, test_bad_expressions, test_dependencies,
                test_array_dependency_names_the_member, test_dependency_on_one_member,
                test_array_throttle_and_cancel, test_array_priority, test_array_idempotency,
                test_restart_keeps_held_jobs])
    finally:
        dm.stop()
