"""Priority classes through their own routes: list, create, change, delete,
the rules of the tenants document (names, values, at most 16), roles and
audit, a changed value reordering the jobs already queued, and a job's QoS
(order inside a tenant, best-effort preemptible), and a class a live job
names kept from removal."""

import time

import allotd_fixture as fx
from allotd_fixture import TENANTS, Daemon, expect

dm = None
AG = None


def names():
    got = expect(dm.req("GET", "/v1/priority-classes", token=dm.admin), 200)["priority_classes"]
    return [(c["name"], c["value"], c["preemptible"]) for c in got]


def put(name, body, status, token=None):
    return expect(dm.req("PUT", "/v1/priority-classes/" + name, body, token=token or dm.admin),
                  status)


def test_crud_and_rules():
    assert names() == [("inference", 1000, False), ("training", 100, True)]
    c = put("batch", {"value": 10}, 201)
    assert c == {"name": "batch", "value": 10, "preemptible": True}, c
    put("batch", {"value": 20, "preemptible": False}, 200)
    assert ("batch", 20, False) in names()
    # the tenants document shows the same classes
    doc = expect(dm.req("GET", "/v1/tenants", token=dm.admin), 200)
    assert {"name": "batch", "value": 20, "preemptible": False} in doc["priority_classes"]
    # bad input: types and fields 400, rules 422, nothing stored changes
    before = names()
    put("batch", {"value": "1"}, 400)
    put("batch", {}, 400)
    put("batch", {"value": 1, "color": "red"}, 400)
    put("batch", {"value": 1, "preemptible": "yes"}, 400)
    put("batch", {"value": 10 ** 12}, 422)
    put("bad%20name", {"value": 1}, 422)
    put("x" * 40, {"value": 1}, 422)
    expect(dm.req("PUT", "/v1/priority-classes/batch", "{", token=dm.admin), 400)
    assert names() == before
    # roles: users read, only admins write
    member = dm.token("member", "research/nlp", "m")
    viewer = dm.token("viewer", "", "v")
    expect(dm.req("GET", "/v1/priority-classes", token=viewer), 200)
    put("batch", {"value": 1}, 403, token=member)
    expect(dm.req("DELETE", "/v1/priority-classes/batch", token=member), 403)
    expect(dm.req("GET", "/v1/priority-classes", token=AG), 403)
    # at most 16 classes
    for i in range(13):
        put("c%d" % i, {"value": i}, 201)
    e = put("one-too-many", {"value": 1}, 422)
    assert "16" in e["error"]["message"], e
    for i in range(13):
        expect(dm.req("DELETE", "/v1/priority-classes/c%d" % i, token=dm.admin), 200)
    expect(dm.req("DELETE", "/v1/priority-classes/c0", token=dm.admin), 404)
    # a deleted class can no longer be asked for
    expect(dm.req("DELETE", "/v1/priority-classes/batch", token=dm.admin), 200)
    e = expect(dm.req("POST", "/v1/jobs", {"tenant": "research/nlp", "priority": "batch"},
                      token=dm.admin), 422)
    assert "batch" in e["error"]["message"], e
    audit = expect(dm.req("GET", "/v1/audit", token=dm.admin), 200)["entries"]
    acts = [a["action"] for a in audit]
    assert "priorityclass.put" in acts and "priorityclass.delete" in acts, acts
    assert expect(dm.req("GET", "/v1/audit/verify", token=dm.admin), 200)["ok"] is True


def wait_state(jid, state, timeout=10):
    end = time.time() + timeout
    while time.time() < end:
        j = expect(dm.req("GET", "/v1/jobs/%d" % jid, token=dm.admin), 200)
        if j["state"] == state:
            return j
        time.sleep(0.05)
    raise AssertionError("job %d not %s: %r" % (jid, state, j))


def test_changed_value_reorders_queued_jobs():
    n1 = {"name": "n1", "cpus": 8, "memory": 64000, "gpus": [{"model": "A100-80GB"}]}
    expect(dm.req("POST", "/v1/nodes/register", n1, token=AG), 201)
    put("lo", {"value": 10, "preemptible": False}, 201)
    put("hi", {"value": 5, "preemptible": False}, 201)
    a = expect(dm.req("POST", "/v1/jobs", {"tenant": "research/nlp", "gpus": 1,
                                           "priority": "inference"}, token=dm.admin), 201)
    wait_state(a["id"], "starting")
    b = expect(dm.req("POST", "/v1/jobs", {"tenant": "research/nlp", "gpus": 1,
                                           "priority": "lo"}, token=dm.admin), 201)
    c = expect(dm.req("POST", "/v1/jobs", {"tenant": "research/nlp", "gpus": 1,
                                           "priority": "hi"}, token=dm.admin), 201)
    time.sleep(0.2)
    # raised while both wait: the queued job follows its class
    put("hi", {"value": 100, "preemptible": False}, 200)
    time.sleep(0.2)
    hb = {"jobs": [{"id": a["id"], "state": "succeeded", "exit_code": 0}]}
    expect(dm.req("POST", "/v1/nodes/n1/heartbeat", {"jobs": [{"id": a["id"],
                                                                "state": "running"}]},
                  token=AG), 200)
    expect(dm.req("POST", "/v1/nodes/n1/heartbeat", hb, token=AG), 200)
    # hi (now 100) goes before lo (10) although it came later
    wait_state(c["id"], "starting")
    assert expect(dm.req("GET", "/v1/jobs/%d" % b["id"], token=dm.admin), 200)["state"] == \
        "pending"


def post_job(body, status=201):
    return expect(dm.req("POST", "/v1/jobs", dict({"tenant": "research/nlp"}, **body),
                         token=dm.admin), status)


def finish(node, jid):
    for st in ("running", "succeeded"):
        expect(dm.req("POST", "/v1/nodes/%s/heartbeat" % node,
                      {"jobs": [{"id": jid, "state": st, "exit_code": 0}]}, token=AG), 200)


def test_qos():
    """QoS orders a tenant's jobs of one priority (guaranteed, burstable, best-effort),
    and a best-effort job may be preempted whatever its priority class."""
    # bad input names the field
    e = post_job({"qos": 1}, 400)
    assert "qos" in e["error"]["message"], e
    e = post_job({"qos": "gold"}, 422)
    assert "gold" in e["error"]["message"] and "best-effort" in e["error"]["message"], e
    h = {"gpus": 1, "gpu_models": ["H100-80GB"]}
    # the jobs the test before left waiting would take the new node
    for j in expect(dm.req("GET", "/v1/jobs?state=pending", token=dm.admin), 200)["jobs"]:
        expect(dm.req("POST", "/v1/jobs/%d/cancel" % j["id"], token=dm.admin), 200)
    q1 = {"name": "q1", "cpus": 8, "memory": 64000, "gpus": [{"model": "H100-80GB"}]}
    expect(dm.req("POST", "/v1/nodes/register", q1, token=AG), 201)
    a = post_job(dict(h))["id"]
    wait_state(a, "starting")
    be = post_job(dict(h, qos="best-effort"))["id"]
    bu = post_job(dict(h, qos="burstable"))["id"]
    gu = post_job(dict(h, qos="guaranteed"))["id"]
    assert expect(dm.req("GET", "/v1/jobs/%d" % gu, token=dm.admin), 200)["spec"]["qos"] == \
        "guaranteed"
    order, cur, left = [], a, {gu: "gu", bu: "bu", be: "be"}
    while left:
        time.sleep(0.3)
        finish("q1", cur)
        end, cur = time.time() + 10, None
        while time.time() < end and cur is None:
            for k in left:
                if expect(dm.req("GET", "/v1/jobs/%d" % k, token=dm.admin), 200)["state"] == \
                        "starting":
                    cur = k
            time.sleep(0.05)
        assert cur is not None, "nothing started after %r" % order
        order.append(left.pop(cur))
    assert order == ["gu", "bu", "be"], order
    # best-effort in a class that is not preemptible ("lo") still yields to "hi"
    finish("q1", be)
    x = post_job(dict(h, priority="lo", qos="best-effort"))["id"]
    wait_state(x, "starting")
    expect(dm.req("POST", "/v1/nodes/q1/heartbeat", {"jobs": [{"id": x, "state": "running"}]},
                  token=AG), 200)
    y = post_job(dict(h, priority="hi"))["id"]
    end = time.time() + 10
    while time.time() < end:
        ev = expect(dm.req("GET", "/v1/jobs/%d/events" % x, token=dm.admin), 200)
        if any(e["kind"] == "preempted" for e in ev["events"]):
            break
        time.sleep(0.05)
    else:
        raise AssertionError("best-effort job %d was not preempted for %d: %r" % (x, y, ev))


def test_class_in_use_stays():
    """A class that a pending job names is not removed, by its own route or
    by a tenants document that leaves it out (409, nothing changes); once
    the job has ended it can go. allotd resolves classes by name when it
    starts again, so a job left naming a removed class would lose its
    priority at the next restart."""
    put("urgent", {"value": 500}, 201)
    j = post_job({"gpus": 1, "priority": "urgent", "hold": True})["id"]
    e = expect(dm.req("DELETE", "/v1/priority-classes/urgent", token=dm.admin), 409)
    assert "urgent" in e["error"]["message"] and str(j) in e["error"]["message"], e
    doc = expect(dm.req("GET", "/v1/tenants", token=dm.admin), 200)
    doc["priority_classes"] = [c for c in doc["priority_classes"] if c["name"] != "urgent"]
    e = expect(dm.req("PUT", "/v1/tenants", doc, token=dm.admin), 409)
    assert "urgent" in e["error"]["message"], e
    expect(dm.req("POST", "/v1/tenants/check", doc, token=dm.admin), 409)
    assert ("urgent", 500, True) in names()
    expect(dm.req("POST", "/v1/jobs/%d/cancel" % j, token=dm.admin), 200)
    wait_state(j, "cancelled")
    expect(dm.req("PUT", "/v1/tenants", doc, token=dm.admin), 200)
    assert "urgent" not in [n for n, _, _ in names()]


if __name__ == "__main__":
    dm = Daemon(args=["--preempt-min-runtime", "0s"])
    try:
        expect(dm.req("PUT", "/v1/tenants", TENANTS, token=dm.admin), 200)
        AG = dm.token("agent", "", "agents")
        fx.run([test_crud_and_rules, test_changed_value_reorders_queued_jobs, test_qos,
                test_class_in_use_stays])
    finally:
        dm.stop()
