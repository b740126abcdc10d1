"""The agent side of allotd's API, driven by the test as agents: the
desired state's version and the long poll (a heartbeat that already has
the current version waits for the next one), reports with a detail and the
"lost" state, and a gang across two nodes that ends only when both report
it done (or at once when one fails)."""

import hashlib
import http.client
import os
import socket
import threading
import time

import allotd_fixture as fx
from allotd_fixture import TENANTS, Daemon, expect

dm = None
AG = None


def node(name, gpus=2):
    return {"name": name, "cpus": 16, "memory": 65536, "gpus": [{"model": "L4"}] * gpus}


def beat(name, body=None, status=200):
    return expect(dm.req("POST", "/v1/nodes/%s/heartbeat" % name, body or {}, token=AG), status)


def get(jid):
    return expect(dm.req("GET", "/v1/jobs/%d" % jid, token=dm.admin), 200)


def wait_state(jid, state, timeout=10):
    end = time.time() + timeout
    while time.time() < end:
        j = get(jid)
        if j["state"] == state:
            return j
        time.sleep(0.05)
    raise AssertionError("job %d not %s: %r" % (jid, state, j))


def test_long_poll():
    expect(dm.req("POST", "/v1/nodes/register", node("ap-1"), token=AG), 201)
    expect(dm.req("POST", "/v1/nodes/register", node("ap-2"), token=AG), 201)
    h = beat("ap-1")
    v0 = h["version"]
    assert h["jobs"] == [] and len(v0) == 16, h
    # nothing changes: the poll waits its time out and answers the same version
    t0 = time.time()
    h = beat("ap-1", {"known": v0, "wait_ms": 400})
    assert h["version"] == v0 and time.time() - t0 >= 0.35, (h, time.time() - t0)
    # a stale version answers at once
    t0 = time.time()
    beat("ap-1", {"known": "0" * 16, "wait_ms": 5000})
    assert time.time() - t0 < 1
    # a placement wakes the poll well before its time out
    got = {}

    def poll():
        t = time.time()
        got["reply"] = beat("ap-1", {"known": v0, "wait_ms": 10000})
        got["took"] = time.time() - t

    th = threading.Thread(target=poll)
    th.start()
    time.sleep(0.2)
    # it runs once: lost, it ends lost (a job that may be requeued queues again)
    j = expect(dm.req("POST", "/v1/jobs", {"tenant": "research/nlp", "gpus": 2,
                                           "requeue": False}, token=dm.admin), 201)
    th.join(15)
    assert got["took"] < 5 and got["reply"]["version"] != v0, got
    assert [d["job"] for d in got["reply"]["jobs"]] == [j["id"]], got
    # reports answer at once, even with a wait
    t0 = time.time()
    beat("ap-1", {"jobs": [{"id": j["id"], "state": "running"}], "known": v0, "wait_ms": 5000})
    assert time.time() - t0 < 1
    beat("ap-1", {"wait_ms": 60001}, 400)
    beat("ap-1", {"known": 5}, 400)
    # lost with a detail
    beat("ap-1", {"jobs": [{"id": j["id"], "state": "lost", "detail": "process vanished"}]})
    j = wait_state(j["id"], "lost")
    assert j["pending_reason"] == "process vanished", j
    ev = expect(dm.req("GET", "/v1/jobs/%d/events" % j["id"], token=dm.admin), 200)["events"]
    assert ev[-1]["kind"] == "lost" and ev[-1]["detail"] == "process vanished", ev
    beat("ap-1", {"jobs": [{"id": j["id"], "state": "failed", "detail": 7}]}, 400)
    beat("ap-1", {"jobs": [{"id": j["id"], "state": "failed", "detail": "x" * 513}]}, 400)


def test_gang_over_two_nodes():
    g = expect(dm.req("POST", "/v1/jobs", {"tenant": "research/nlp", "gpus": 2, "tasks": 2},
                      token=dm.admin), 201)
    g = wait_state(g["id"], "starting")
    nodes = sorted({t["node"] for t in g["placement"]["tasks"]})
    assert nodes == ["ap-1", "ap-2"], g
    # it runs once both nodes run their tasks (its time limit counts from then)
    beat("ap-1", {"jobs": [{"id": g["id"], "state": "running"}]})
    beat("ap-1", {"jobs": [{"id": g["id"], "state": "running"}]})  # again (an agent's restart)
    time.sleep(0.3)
    assert get(g["id"])["state"] == "starting", get(g["id"])
    beat("ap-2", {"jobs": [{"id": g["id"], "state": "running"}]})
    wait_state(g["id"], "running")
    ev = expect(dm.req("GET", "/v1/jobs/%d/events" % g["id"], token=dm.admin), 200)["events"]
    assert [(e["kind"], e["detail"]) for e in ev if e["kind"].endswith("running")] == \
        [("node-running", "ap-1"), ("running", None)], ev
    beat("ap-1", {"jobs": [{"id": g["id"], "state": "succeeded", "exit_code": 0}]})
    time.sleep(0.3)
    assert get(g["id"])["state"] == "running"
    beat("ap-1", {"jobs": [{"id": g["id"], "state": "succeeded", "exit_code": 0}]})  # again
    time.sleep(0.2)
    assert get(g["id"])["state"] == "running"
    beat("ap-2", {"jobs": [{"id": g["id"], "state": "succeeded", "exit_code": 0}]})
    wait_state(g["id"], "succeeded")
    # a node whose tasks ended before its agent reported them running counts as running:
    # the gang runs once the other node runs
    q = expect(dm.req("POST", "/v1/jobs", {"tenant": "research/nlp", "gpus": 2, "tasks": 2},
                      token=dm.admin), 201)["id"]
    wait_state(q, "starting")
    beat("ap-1", {"jobs": [{"id": q, "state": "succeeded", "exit_code": 0}]})
    beat("ap-2", {"jobs": [{"id": q, "state": "running"}]})
    wait_state(q, "running")
    beat("ap-2", {"jobs": [{"id": q, "state": "succeeded", "exit_code": 0}]})
    wait_state(q, "succeeded")
    # one failed task ends the gang at once, with its detail
    f = expect(dm.req("POST", "/v1/jobs", {"tenant": "research/nlp", "gpus": 2, "tasks": 2},
                      token=dm.admin), 201)
    wait_state(f["id"], "starting")
    beat("ap-2", {"jobs": [{"id": f["id"], "state": "failed", "exit_code": 137,
                            "detail": "OOM killed (memory limit 1024 MiB)"}]})
    f = wait_state(f["id"], "failed")
    assert f["exit_code"] == 137 and \
        f["pending_reason"] == "on node ap-2: OOM killed (memory limit 1024 MiB)", f
    # a node's report of an earlier run does not count in the next one
    r = expect(dm.req("POST", "/v1/jobs", {"tenant": "research/nlp", "gpus": 2, "tasks": 2},
                      token=dm.admin), 201)["id"]
    first = wait_state(r, "starting")["start_time"]
    for n in ("ap-1", "ap-2"):
        beat(n, {"jobs": [{"id": r, "state": "running"}]})
    beat("ap-1", {"jobs": [{"id": r, "state": "succeeded", "exit_code": 0}]})
    beat("ap-2", {"jobs": [{"id": r, "state": "lost", "fenced": True}]})  # requeued
    end = time.time() + 10
    while time.time() < end and not (get(r)["state"] == "starting" and
                                     get(r)["start_time"] > first):
        time.sleep(0.05)  # bounded: until its next run is placed
    assert get(r)["start_time"] > first, get(r)
    beat("ap-2", {"jobs": [{"id": r, "state": "succeeded", "exit_code": 0}]})
    time.sleep(0.3)
    assert get(r)["state"] == "starting", get(r)  # ap-1 has not ended this run
    beat("ap-1", {"jobs": [{"id": r, "state": "succeeded", "exit_code": 0}]})
    wait_state(r, "succeeded")


def test_next_run_waits_for_the_last():
    """A requeued job's next run is shown with run 0 (its agent waits) until the node of
    its last run says, in a heartbeat sent with a desired state made after the requeue,
    that the job is no longer among its "stopping" jobs (or, from an agent that sends no
    such list, once it had that desired state). Each hold is a "waiting" event."""
    def shown(jid, run):
        """The run the desired state shows for the job's run `run` (None: not shown yet);
        asked with a version the node never had, which tells allotd nothing."""
        n = get(jid)["placement"]["tasks"][0]["node"]
        end = time.time() + 5
        while time.time() < end:  # bounded: the store may be ahead of the desired state
            got = [x["run"] for x in beat(n, {"known": "-"})["jobs"] if x["job"] == jid]
            if got and got[0] in (0, run):
                return got[0]
            time.sleep(0.05)
        return None

    jid = expect(dm.req("POST", "/v1/jobs", {"tenant": "research/nlp", "gpus": 1},
                        token=dm.admin), 201)["id"]
    j = wait_state(jid, "starting")
    n1, first = j["placement"]["tasks"][0]["node"], j["start_time"]
    before = beat(n1, {"jobs": [{"id": jid, "state": "running"}]})["version"]
    wait_state(jid, "running")
    assert shown(jid, first) == first
    for how in ("stopping", "older agent"):
        expect(dm.req("POST", "/v1/jobs/%d/requeue" % jid, token=dm.admin), 202)
        end = time.time() + 10
        while time.time() < end and not (get(jid)["state"] == "starting" and
                                         get(jid)["start_time"] > first):
            time.sleep(0.05)  # bounded: until its next run is placed
        run = get(jid)["start_time"]
        assert run > first and shown(jid, run) == 0, get(jid)
        # a heartbeat with a desired state from before the requeue proves nothing
        beat(n1, {"known": before, "stopping": []})
        time.sleep(0.3)
        assert shown(jid, run) == 0
        v = beat(n1, {"known": "-"})["version"]  # made after the requeue
        if how == "stopping":
            v = beat(n1, {"known": v, "stopping": [jid]})["version"]  # still there
            time.sleep(0.3)
            assert shown(jid, run) == 0
            beat(n1, {"known": v, "stopping": []})
        else:
            beat(n1, {"known": v})
        end = time.time() + 5
        while time.time() < end and shown(jid, run) == 0:
            time.sleep(0.05)
        assert shown(jid, run) == run, get(jid)
        n1, first = get(jid)["placement"]["tasks"][0]["node"], run
        beat(n1, {"jobs": [{"id": jid, "state": "running"}]})
        before = beat(n1, {"known": "-"})["version"]
    ev = expect(dm.req("GET", "/v1/jobs/%d/events" % jid, token=dm.admin), 200)["events"]
    assert len([e for e in ev if e["kind"] == "waiting"]) == 2, ev
    expect(dm.req("POST", "/v1/jobs/%d/cancel" % jid, token=dm.admin), 200)
    # a gang's next run waits for its last on every node of it: the event names them all
    g = expect(dm.req("POST", "/v1/jobs", {"tenant": "research/nlp", "gpus": 2, "tasks": 2},
                      token=dm.admin), 201)["id"]
    first = wait_state(g, "starting")["start_time"]
    for n in ("ap-1", "ap-2"):
        beat(n, {"jobs": [{"id": g, "state": "running"}]})
    wait_state(g, "running")
    expect(dm.req("POST", "/v1/jobs/%d/requeue" % g, token=dm.admin), 202)
    end = time.time() + 10
    ev = []
    while time.time() < end and not ev:  # bounded: until its next run is held
        ev = [e["detail"] for e in expect(dm.req("GET", "/v1/jobs/%d/events" % g,
                                                 token=dm.admin), 200)["events"]
              if e["kind"] == "waiting"]
        time.sleep(0.05)
    assert get(g)["start_time"] > first and len(ev) == 1, (get(g), ev)
    head = "its new run waits for its last to end on nodes "
    assert ev[0].startswith(head) and sorted(ev[0][len(head):].split(", ")) == \
        ["ap-1", "ap-2"], ev
    expect(dm.req("POST", "/v1/jobs/%d/cancel" % g, token=dm.admin), 200)
    for bad in ("x", [0], [1.5], [1] * 4097):
        st, b = dm.req("POST", "/v1/nodes/%s/heartbeat" % n1, {"stopping": bad}, token=AG)
        assert st == 400 and '"stopping"' in b["error"]["message"], (bad, st, b)


def test_node_bound_to_its_agent_token():
    """A node belongs to the agent token that registered it: another agent token can
    neither heartbeat for it (reports, samples, its desired state with the jobs' specs)
    nor register it, until the first token is revoked; then the node moves."""
    first = dm.token("agent", "", "agent-a")
    other = dm.token("agent", "", "agent-b")
    expect(dm.req("POST", "/v1/nodes/register", node("own-1"), token=first), 201)
    jid = expect(dm.req("POST", "/v1/jobs", {"tenant": "research/nlp", "gpus": 1,
                                             "gpu_models": ["L4"]}, token=dm.admin), 201)["id"]
    st, b = dm.req("POST", "/v1/nodes/own-1/heartbeat",
                   {"jobs": [{"id": jid, "state": "failed", "exit_code": 1}]}, token=other)
    assert st == 403 and b["error"]["code"] == "forbidden" and "jobs" not in b, (st, b)
    st, b = dm.req("POST", "/v1/nodes/register", node("own-1"), token=other)
    assert st == 403 and "revoke" in b["error"]["message"], (st, b)
    assert get(jid)["state"] != "failed"
    expect(dm.req("POST", "/v1/nodes/own-1/heartbeat", {}, token=first), 200)
    tid = [t for t in expect(dm.req("GET", "/v1/tokens", token=dm.admin), 200)["tokens"]
           if t["name"] == "agent-a"][0]["id"]
    expect(dm.req("DELETE", "/v1/tokens/%d" % tid, token=dm.admin), 200)
    expect(dm.req("POST", "/v1/nodes/register", node("own-1"), token=other), 200)
    expect(dm.req("POST", "/v1/nodes/own-1/heartbeat", {}, token=other), 200)
    expect(dm.req("POST", "/v1/jobs/%d/cancel" % jid, token=dm.admin), 200)
    expect(dm.req("POST", "/v1/nodes/own-1/cordon", token=dm.admin), 200)


def test_node_credential():
    """An agent that asks (?credential=true) gets a credential of its node's own when it
    registers with a join token several nodes share: the node is bound to it, so the
    join token (and every other node holding it) can no longer speak for the node. The
    credential is shown once; registering with it again issues none. Once an admin
    revokes it, the join token may register the node again and gets a new one."""
    join = dm.token("agent", "", "join")
    reg = "/v1/nodes/register?credential=true"
    b = expect(dm.req("POST", reg, node("cred-1"), token=join), 201)
    cred = b["node_token"]
    assert cred.startswith("allot_") and cred != join, b
    st, b = dm.req("POST", "/v1/nodes/cred-1/heartbeat", {}, token=join)
    assert st == 403 and b["error"]["code"] == "forbidden", (st, b)
    st, b = dm.req("POST", "/v1/nodes/register", node("cred-1"), token=join)
    assert st == 403, (st, b)
    expect(dm.req("POST", "/v1/nodes/cred-1/heartbeat", {}, token=cred), 200)
    b = expect(dm.req("POST", reg, node("cred-1"), token=cred), 200)
    assert "node_token" not in b, b
    # without asking, a join token binds the node to itself (as before)
    b = expect(dm.req("POST", "/v1/nodes/register", node("cred-2"), token=join), 201)
    assert "node_token" not in b, b
    toks = [t for t in expect(dm.req("GET", "/v1/tokens", token=dm.admin), 200)["tokens"]
            if t["name"] == "node/cred-1"]
    assert len(toks) == 1 and toks[0]["role"] == "agent", toks
    # a node bound to the join token (an agent from before credentials) gets one too
    b = expect(dm.req("POST", reg, node("cred-2"), token=join), 200)
    cred2 = b["node_token"]
    expect(dm.req("POST", "/v1/nodes/cred-2/heartbeat", {}, token=cred2), 200)
    assert dm.req("POST", "/v1/nodes/cred-2/heartbeat", {}, token=join)[0] == 403
    # revoked: the credential is refused, the join token joins the node again
    expect(dm.req("DELETE", "/v1/tokens/%d" % toks[0]["id"], token=dm.admin), 200)
    assert dm.req("POST", "/v1/nodes/cred-1/heartbeat", {}, token=cred)[0] == 401
    b = expect(dm.req("POST", reg, node("cred-1"), token=join), 200)
    assert b["node_token"] not in (cred, join), b
    expect(dm.req("POST", "/v1/nodes/cred-1/heartbeat", {}, token=b["node_token"]), 200)
    # an admin registering binds nothing and gets no credential
    b = expect(dm.req("POST", reg, node("cred-3"), token=dm.admin), 201)
    assert "node_token" not in b and b["node_credential"] is False, b
    # the flag is a flag, or a SHA-256 in hex
    for bad in ("yes", "ab" * 31 + "a", "ag" * 32):
        st, b = dm.req("POST", "/v1/nodes/register?credential=" + bad, node("cred-4"),
                       token=join)
        assert st == 400 and "credential" in b["error"]["message"], (bad, st, b)
    # the agent's own secret: allotd binds its hash and sends nothing back; an answer lost on
    # the way loses nothing (the join token is refused, the secret speaks)
    secret = "allot_" + os.urandom(32).hex()
    h = hashlib.sha256(secret.encode()).hexdigest()
    b = expect(dm.req("POST", "/v1/nodes/register?credential=" + h, node("cred-5"), token=join),
               201)
    assert "node_token" not in b and b["node_credential"] is True, b
    assert dm.req("POST", "/v1/nodes/register?credential=" + h, node("cred-5"),
                  token=join)[0] == 403
    expect(dm.req("POST", "/v1/nodes/register?credential=" + h, node("cred-5"), token=secret),
           200)
    expect(dm.req("POST", "/v1/nodes/cred-5/heartbeat", {}, token=secret), 200)
    # a node's credential speaks for its own node only: not another's, nor a new one
    st, b = dm.req("POST", "/v1/nodes/cred-1/heartbeat", {}, token=secret)
    assert st == 403, (st, b)
    st, b = dm.req("POST", "/v1/nodes/register", node("cred-6"), token=secret)
    assert st == 403 and "its own node only" in b["error"]["message"], (st, b)
    # a secret once bound is never bound again, even revoked
    tid = [t for t in expect(dm.req("GET", "/v1/tokens", token=dm.admin), 200)["tokens"]
           if t["name"] == "node/cred-5"][0]["id"]
    expect(dm.req("DELETE", "/v1/tokens/%d" % tid, token=dm.admin), 200)
    st, b = dm.req("POST", "/v1/nodes/register?credential=" + h, node("cred-5"), token=join)
    assert st == 409 and "make a new one" in b["error"]["message"], (st, b)
    for n in ("cred-1", "cred-2", "cred-3", "cred-5"):
        expect(dm.req("POST", "/v1/nodes/%s/cordon" % n, token=dm.admin), 200)


def test_node_changes_inventory():
    """A node registers another inventory (its server changed: more GPUs, another GPU
    mode) only while it is out of service and runs nothing; allotd then schedules on the
    new size. A ready node, or one whose jobs have not ended, is refused with 409 saying
    what to do."""
    def inv(gpus, mode=None):
        body = {"name": "inv-1", "cpus": 16, "memory": 65536,
                "gpus": [{"model": "A30-24GB"}] * gpus}
        if mode:
            body["gpu_mode"] = mode
        return body

    def submit(**kw):
        spec = {"tenant": "research/nlp", "gpu_models": ["A30-24GB"], "command": ["true"]}
        spec.update(kw)
        return expect(dm.req("POST", "/v1/jobs", spec, token=dm.admin), 201)["id"]

    def node_inv():
        nodes = expect(dm.req("GET", "/v1/nodes", token=dm.admin), 200)["nodes"]
        return [n for n in nodes if n["name"] == "inv-1"][0]

    expect(dm.req("POST", "/v1/nodes/register", inv(2), token=AG), 201)
    beat("inv-1")
    one = submit(gpus=1)
    wait_state(one, "starting")
    # ready: refused, and told to drain first
    st, b = dm.req("POST", "/v1/nodes/register", inv(4), token=AG)
    assert st == 409 and "allot drain" in b["error"]["message"], (st, b)
    # out of service, but its job still runs: refused until it ends
    expect(dm.req("POST", "/v1/nodes/inv-1/drain", token=dm.admin), 200)
    st, b = dm.req("POST", "/v1/nodes/register", inv(4), token=AG)
    assert st == 409 and "have not ended" in b["error"]["message"], (st, b)
    assert len(node_inv()["inventory"]["gpus"]) == 2
    beat("inv-1", {"jobs": [{"id": one, "state": "succeeded", "exit_code": 0}]})
    wait_state(one, "succeeded")
    # drained and empty: four GPUs in shared mode from now on
    end = time.time() + 10
    while True:
        st, b = dm.req("POST", "/v1/nodes/register", inv(4, "shared"), token=AG)
        if st == 200 or time.time() > end:
            break
        time.sleep(0.1)  # the loop's count of its tasks follows the report
    assert st == 200 and b["state"] == "draining", (st, b)
    # an inventory the scheduler could not take is refused before it is stored
    bad = {"name": "inv-1", "cpus": 16, "memory": 65536, "gpus": [{"model": "L4"}] * 2,
           "gpu_mode": "mig"}
    st, b = dm.req("POST", "/v1/nodes/register", bad, token=AG)
    assert st == 422 and "no MIG profiles" in b["error"]["message"], (st, b)
    n = node_inv()
    assert len(n["inventory"]["gpus"]) == 4 and n["inventory"]["gpu_mode"] == "shared", n
    assert n["state"] in ("draining", "drained"), n
    # the same inventory again is an ordinary re-registration
    expect(dm.req("POST", "/v1/nodes/register", inv(4, "shared"), token=AG), 200)
    big = submit(gpus=4)  # refused (422) while no node had four GPUs
    frac = submit(gpu_milli=500)
    time.sleep(0.3)
    assert get(big)["state"] == "pending" and get(frac)["state"] == "pending"
    expect(dm.req("POST", "/v1/nodes/inv-1/uncordon", token=dm.admin), 200)
    wait_state(big, "starting")
    beat("inv-1", {"jobs": [{"id": big, "state": "succeeded", "exit_code": 0}]})
    wait_state(big, "succeeded")
    wait_state(frac, "starting")
    beat("inv-1", {"jobs": [{"id": frac, "state": "succeeded", "exit_code": 0}]})
    wait_state(frac, "succeeded")
    entries = dm.audit()
    assert [e["result"] for e in entries if e["target"] == "node/inv-1" and
            e["result"].startswith("ok (new")] == ["ok (new inventory)"], entries[-5:]
    expect(dm.req("POST", "/v1/nodes/inv-1/cordon", token=dm.admin), 200)


def test_more_cpu_or_memory_than_any_node_is_422():
    """A task that asks for more CPU or memory than any registered node has can never
    run: refused at submission, as more GPUs than any node has are, not left pending
    with 'no node has 17.0 CPU ... free'."""
    def submit(**kw):
        spec = {"tenant": "research/nlp", "gpus": 0, "command": ["true"]}
        spec.update(kw)
        return dm.req("POST", "/v1/jobs", spec, token=dm.admin)

    st, b = submit(cpus=17)
    assert st == 422 and b["error"]["message"] == (
        'field "cpus" is 17; the largest registered node has 16 CPUs'), (st, b)
    st, b = submit(memory=65537)
    assert st == 422 and "the largest registered node has 65536 MiB" in b["error"]["message"], \
        (st, b)
    st, b = submit(cpus=16, memory=65536, hold=True)
    assert st == 201, (st, b)
    expect(dm.req("POST", "/v1/jobs/%d/cancel" % b["id"], token=dm.admin), 200)
    # more GPUs than any node of the models the job names has (once one is registered)
    held = [submit(gpus=2, gpu_models=["T4"], hold=True)]
    t4 = dict(node("ap-t4", gpus=1), gpus=[{"model": "T4"}])
    expect(dm.req("POST", "/v1/nodes/register", t4, token=AG), 201)
    expect(dm.req("POST", "/v1/nodes/ap-t4/cordon", token=dm.admin), 200)
    end = time.time() + 10
    while time.time() < end and submit(gpus=2, gpu_models=["T4"], hold=True)[0] != 422:
        time.sleep(0.05)  # bounded: until the loop has added the node
    st, b = submit(gpus=2, gpu_models=["T4"], hold=True)
    assert st == 422 and b["error"]["message"] == (
        'field "gpus" is 2; the largest registered node of the GPU models it names (T4) has '
        '1 GPUs'), (st, b)
    held += [submit(gpus=2, gpu_models=["T4", "L4"], hold=True),
             submit(gpus=2, gpu_models=["A100-80GB"], hold=True)]  # none of it yet: waits
    assert [st for st, _ in held] == [201, 201, 201], held
    for _, b in held:
        expect(dm.req("POST", "/v1/jobs/%d/cancel" % b["id"], token=dm.admin), 200)


def test_show_requeued_job():
    """allot show of a job waiting again after a requeue shows no start of a run that is
    not there, but its last run's start as such."""
    from cli_fixture import cli
    jid = expect(dm.req("POST", "/v1/jobs", {"tenant": "research/nlp", "gpus": 1,
                                             "gpu_models": ["A30-24GB"], "command": ["true"]},
                        token=dm.admin), 201)["id"]
    expect(dm.req("POST", "/v1/nodes/inv-1/uncordon", token=dm.admin), 200)
    wait_state(jid, "starting")
    beat("inv-1", {"jobs": [{"id": jid, "state": "running"}]})
    wait_state(jid, "running")
    expect(dm.req("POST", "/v1/nodes/inv-1/cordon", token=dm.admin), 200)
    expect(dm.req("POST", "/v1/jobs/%d/requeue" % jid, token=dm.admin), 202)
    wait_state(jid, "pending")  # the agent is told to stop it; its end is of an old run
    r = cli(dm, "show", jid)
    started = [ln for ln in r.out.splitlines() if ln.startswith("started:")]
    assert r.rc == 0 and len(started) == 1 and "- (last run started 20" in started[0], r
    expect(dm.req("POST", "/v1/jobs/%d/cancel" % jid, token=dm.admin), 200)


def test_log_endpoint_is_the_agents():
    """The log URL an agent tells allotd is a base it cannot turn into another request (a
    query, fragment or user part is 400); a 200 without an agent's log size is 502, not
    shown to the reader; a silent endpoint holds no store read handle meanwhile."""
    d = Daemon(args=["--store-readers", "4"])
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(16)
    lsock.settimeout(0.2)
    port = lsock.getsockname()[1]
    accepted, stop, answer = [], threading.Event(), threading.Event()

    def serve():  # bounded by stop
        while not stop.is_set():
            try:
                c, _ = lsock.accept()
            except socket.timeout:
                continue
            if answer.is_set():
                c.recv(4096)
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\nConnection: close\r\n\r\n"
                          b"secret!")
                c.close()
            else:
                accepted.append(c)

    th = threading.Thread(target=serve)
    th.start()
    try:
        expect(d.req("PUT", "/v1/tenants", TENANTS, token=d.admin), 200)
        ag = d.token("agent", "", "agents")
        expect(d.req("POST", "/v1/nodes/register", node("lg-1"), token=ag), 201)
        base = "http://127.0.0.1:%d" % port
        for bad in [base + "/metrics?", base + "/x#", "http://u@127.0.0.1:%d" % port,
                    "http:///x", "http://h /x", "ftp://h"]:
            b = expect(d.req("POST", "/v1/nodes/lg-1/heartbeat",
                             {"logs": {"url": bad, "key": "k"}}, token=ag), 400)
            assert "no query, fragment or user" in b["error"]["message"], (bad, b)
        expect(d.req("POST", "/v1/nodes/lg-1/heartbeat", {"logs": {"url": base, "key": "k"}},
                     token=ag), 200)
        jid = expect(d.req("POST", "/v1/jobs", {"tenant": "research/nlp", "gpus": 1},
                           token=d.admin), 201)["id"]
        end = time.time() + 10
        while time.time() < end and expect(d.req("GET", "/v1/jobs/%d" % jid, token=d.admin),
                                           200)["state"] != "starting":
            time.sleep(0.05)
        answer.set()
        b = expect(d.req("GET", "/v1/jobs/%d/logs" % jid, token=d.admin), 502)
        assert "not an allot-agent log endpoint" in b["error"]["message"], b
        answer.clear()
        results = []

        def fetch():
            c = http.client.HTTPConnection("127.0.0.1", d.port, timeout=30)
            try:
                c.request("GET", "/v1/jobs/%d/logs" % jid,
                          headers={"Authorization": "Bearer " + d.admin})
                results.append(c.getresponse().status)
            finally:
                c.close()
        ts = [threading.Thread(target=fetch) for _ in range(4)]  # as many as read handles
        for t in ts:
            t.start()
        end = time.time() + 10
        while time.time() < end and len(accepted) < 4:  # all four wait on the endpoint
            time.sleep(0.02)
        assert len(accepted) == 4, accepted
        st, _ = d.req("GET", "/v1/jobs?limit=1", token=d.admin)
        assert st == 200 and not results, (st, results)  # served while the four wait
        for c in accepted:
            c.close()
        for t in ts:
            t.join(30)
        assert results == [502] * 4, results
    finally:
        stop.set()
        th.join(5)
        lsock.close()
        for c in accepted:
            c.close()
        assert d.stop() == 0


if __name__ == "__main__":
    dm = Daemon()
    try:
        expect(dm.req("PUT", "/v1/tenants", TENANTS, token=dm.admin), 200)
        AG = dm.token("agent", "", "agents")
        fx.run([test_long_poll, test_gang_over_two_nodes, test_next_run_waits_for_the_last,
                test_node_bound_to_its_agent_token,
                test_node_credential, test_node_changes_inventory,
                test_more_cpu_or_memory_than_any_node_is_422, test_show_requeued_job,
                test_log_endpoint_is_the_agents])
    finally:
        dm.stop()
