"""Node administration in allotd: cordon and drain stop new placements on
a node while its jobs keep running; uncordon makes it schedulable again;
the states survive a restart; only admins may do it; unknown nodes 404.
A lost node can be deleted: its GPUs stop counting, its own credential is
revoked, a restart does not bring it back, and the same name registered
later is a new node that takes work."""

import time

import allotd_fixture as fx
from allotd_fixture import TENANTS, Daemon, expect

N1 = {"name": "adm-n1", "cpus": 32, "memory": 131072, "gpus": [{"model": "L4"}] * 4}


poll = fx.poll


def test_cordon_drain_uncordon():
    dm = Daemon()
    a = dm.admin
    expect(dm.req("PUT", "/v1/tenants", TENANTS, token=a), 200)
    ag = dm.token("agent", "", "agent")
    member = dm.token("member", "research/nlp", "m")
    expect(dm.req("POST", "/v1/nodes/register", N1, token=ag), 201)

    def job(jid):
        return expect(dm.req("GET", "/v1/jobs/%d" % jid, token=a), 200)

    def node_state():
        return expect(dm.req("GET", "/v1/nodes", token=a), 200)["nodes"][0]["state"]

    def metrics():
        return dm.req("GET", "/metrics", raw=True)[1]

    # pending jobs the scheduler does not consider yet, by what holds them
    held = expect(dm.req("POST", "/v1/jobs", {"tenant": "research/nlp", "gpus": 1, "hold": True},
                         token=a), 201)["id"]
    dep = expect(dm.req("POST", "/v1/jobs", {"tenant": "research/nlp", "gpus": 1,
                                             "dependency": "afterok:%d" % held},
                        token=a), 201)["id"]
    later = expect(dm.req("POST", "/v1/jobs", {"tenant": "research/nlp", "gpus": 1,
                                               "begin_time": int(time.time()) + 3600},
                          token=a), 201)["id"]
    poll(lambda: 'allot_jobs_held{reason="user"} 1\n' in metrics() and
         'allot_jobs_held{reason="dependency"} 1\n' in metrics() and
         'allot_jobs_held{reason="begin"} 1\n' in metrics())  # all seen by the loop
    m = metrics()
    assert 'allot_jobs_held{reason="dependency"} 1\n' in m, m
    assert 'allot_jobs{state="pending"} 3\n' in m, m
    # cancelled: the job after it can never start, and ends too
    expect(dm.req("POST", "/v1/jobs/%d/cancel" % held, token=a), 200)
    expect(dm.req("POST", "/v1/jobs/%d/cancel" % later, token=a), 200)
    poll(lambda: 'allot_jobs_held{reason="dependency"} 0\n' in metrics() and
         'allot_jobs_held{reason="begin"} 0\n' in metrics())
    assert job(dep)["state"] == "cancelled"

    first = expect(dm.req("POST", "/v1/jobs", {"tenant": "research/nlp", "gpus": 1},
                          token=a), 201)["id"]
    poll(lambda: job(first)["state"] == "starting")
    poll(lambda: "allot_gpus_free 3.000\n" in metrics())
    b = expect(dm.req("POST", "/v1/nodes/adm-n1/cordon", token=a), 200)
    assert b["state"] == "cordoned" and b["previous"] == "ready", b
    assert node_state() == "cordoned"
    # a cordoned node's free GPUs take no new work: not free for the alerts
    poll(lambda: "allot_gpus_free 0.000\n" in metrics())
    assert "allot_gpus 4\n" in metrics()
    second = expect(dm.req("POST", "/v1/jobs", {"tenant": "research/nlp", "gpus": 1},
                           token=a), 201)["id"]
    time.sleep(0.6)
    assert job(second)["state"] == "pending", job(second)
    # the running job stays in the node's desired state
    hb = expect(dm.req("POST", "/v1/nodes/adm-n1/heartbeat", {}, token=ag), 200)
    assert [d["job"] for d in hb["jobs"]] == [first] and hb["state"] == "cordoned", hb
    b = expect(dm.req("POST", "/v1/nodes/adm-n1/drain", token=a), 200)
    assert b["state"] == "draining" and b["previous"] == "cordoned", b
    # drained state survives a restart
    dm.stop()
    dm2 = Daemon(dm.dir)
    dm2.admin = a
    dm = dm2
    # its running job is adopted where it runs (not queued again), so the
    # node is still draining, not drained
    assert job(first)["state"] == "starting", job(first)
    assert node_state() == "draining"
    time.sleep(0.6)
    assert job(second)["state"] == "pending"
    expect(dm.req("POST", "/v1/nodes/adm-n1/uncordon", token=a), 200)
    poll(lambda: job(second)["state"] == "starting")
    assert node_state() == "ready"
    # drain with eviction: the job running there queues again, the node empties
    j3 = expect(dm.req("POST", "/v1/jobs", {"tenant": "research/nlp", "gpus": 2},
                       token=a), 201)["id"]
    poll(lambda: job(j3)["state"] == "starting")
    b = expect(dm.req("POST", "/v1/nodes/adm-n1/drain?evict=true", token=a), 200)
    assert b["state"] == "draining", b
    j = poll(lambda: (lambda x: x if x["state"] == "pending" else None)(job(j3)))
    assert j["placement"] is None, j
    ev = expect(dm.req("GET", "/v1/jobs/%d/events" % j3, token=a), 200)["events"]
    assert [e["detail"] for e in ev if e["kind"] == "requeued"] == \
        ["evicted: node adm-n1 is being drained"], ev
    # nothing placed there, but its agent still runs a task (stopping in its
    # grace): draining; drained once the agent says none runs
    expect(dm.req("POST", "/v1/nodes/adm-n1/heartbeat", {"live": 1}, token=ag), 200)
    time.sleep(0.3)
    assert node_state() == "draining"
    expect(dm.req("POST", "/v1/nodes/adm-n1/heartbeat", {"live": 0}, token=ag), 200)
    poll(lambda: expect(dm.req("GET", "/v1/nodes", token=a), 200)["nodes"][0]["state"] ==
         "drained")
    # the metric says so too: drain finished can be alerted on
    m = dm.req("GET", "/metrics", raw=True)[1]
    assert 'allot_node_state{node="adm-n1",state="drained"} 1' in m, m
    # and so do the answers of drain and uncordon (as GET /v1/nodes says it)
    b = expect(dm.req("POST", "/v1/nodes/adm-n1/drain", token=a), 200)
    assert b["state"] == "drained" and b["previous"] == "drained", b
    b = expect(dm.req("POST", "/v1/nodes/adm-n1/uncordon", token=a), 200)
    assert b["state"] == "ready" and b["previous"] == "drained", b
    poll(lambda: job(j3)["state"] == "starting")
    # authorization and unknown nodes
    for tok in (member, ag):
        expect(dm.req("POST", "/v1/nodes/adm-n1/cordon", token=tok), 403)
    expect(dm.req("POST", "/v1/nodes/adm-n1/drain"), 401)
    expect(dm.req("POST", "/v1/nodes/nope/cordon", token=a), 404)
    expect(dm.req("GET", "/v1/nodes/adm-n1/cordon", token=a), 405)
    actions = [e["action"] for e in expect(dm.req("GET", "/v1/audit?limit=1000", token=a),
                                           200)["entries"]]
    assert {"node.cordon", "node.drain", "node.uncordon"} <= set(actions), actions
    assert dm.stop() == 0


def test_admin_state_survives_loss():
    """A cordoned or drained node that is lost comes back cordoned or drained, not ready
    (as Slurm keeps a node's drain across its being down); a lost node may be cordoned,
    drained or made ready, and returns so; one lost while ready returns ready."""
    dm = Daemon(args=["--lease", "2s"])
    try:
        ag = dm.token("agent", "", "agent")
        expect(dm.req("POST", "/v1/nodes/register", dict(N1, name="rl-1"), token=ag), 201)

        def state():
            return [n["state"] for n in expect(dm.req("GET", "/v1/nodes", token=dm.admin),
                                               200)["nodes"] if n["name"] == "rl-1"][0]

        def lose_and_return():
            poll(lambda: state() == "lost", timeout=15)
            expect(dm.req("POST", "/v1/nodes/rl-1/heartbeat", {}, token=ag), 200)
            poll(lambda: state() != "lost")
            time.sleep(0.3)  # the loop's state settled
            return state()

        expect(dm.req("POST", "/v1/nodes/rl-1/drain", token=dm.admin), 200)
        assert lose_and_return() == "drained"
        expect(dm.req("POST", "/v1/nodes/rl-1/cordon", token=dm.admin), 200)
        assert lose_and_return() == "cordoned"
        expect(dm.req("POST", "/v1/nodes/rl-1/uncordon", token=dm.admin), 200)
        assert lose_and_return() == "ready"
        # changed while lost: kept for its return
        poll(lambda: state() == "lost", timeout=15)
        b = expect(dm.req("POST", "/v1/nodes/rl-1/cordon", token=dm.admin), 200)
        assert (b["state"], b["returns_as"]) == ("lost", "cordoned"), b
        expect(dm.req("POST", "/v1/nodes/rl-1/heartbeat", {}, token=ag), 200)
        poll(lambda: state() == "cordoned")
        # drained while lost, back through a registration (its agent restarted)
        poll(lambda: state() == "lost", timeout=15)
        b = expect(dm.req("POST", "/v1/nodes/rl-1/drain", token=dm.admin), 200)
        assert b["returns_as"] == "draining", b
        b = expect(dm.req("POST", "/v1/nodes/register", dict(N1, name="rl-1"), token=ag), 200)
        assert b["state"] == "draining", b
        poll(lambda: state() == "drained")
        # placed nowhere meanwhile: a job waits
        expect(dm.req("PUT", "/v1/tenants", TENANTS, token=dm.admin), 200)
        j = expect(dm.req("POST", "/v1/jobs", {"tenant": "research/nlp", "gpus": 1},
                          token=dm.admin), 201)["id"]
        time.sleep(0.5)
        assert expect(dm.req("GET", "/v1/jobs/%d" % j, token=dm.admin), 200)["state"] == \
            "pending"
    finally:
        dm.stop()


def test_delete_node():
    dm = Daemon(args=["--lease", "2s"])
    a = dm.admin
    expect(dm.req("PUT", "/v1/tenants", TENANTS, token=a), 200)
    ag = dm.token("agent", "", "agent")
    member = dm.token("member", "research/nlp", "m")
    n2 = dict(N1, name="adm-n2")
    big = {"name": "adm-n1", "cpus": 64, "memory": 262144, "gpus": [{"model": "L4"}] * 8}
    reg = expect(dm.req("POST", "/v1/nodes/register?credential=true", big, token=ag), 201)
    cred = reg["node_token"]
    expect(dm.req("POST", "/v1/nodes/register", n2, token=ag), 201)

    def names():
        return sorted(n["name"] for n in expect(dm.req("GET", "/v1/nodes", token=a),
                                                  200)["nodes"])

    def gauges():
        text = dm.req("GET", "/metrics", raw=True)[1]
        return [ln for ln in text.splitlines()
                if ln.startswith(("allot_nodes ", "allot_gpus ", "allot_model_gpus{"))]

    poll(lambda: gauges() == ["allot_nodes 2", "allot_gpus 12",
                              'allot_model_gpus{model="L4"} 12'])
    # a node whose agent still runs is refused, whatever its state
    err = expect(dm.req("DELETE", "/v1/nodes/adm-n1", token=a), 409)
    assert "only a lost node" in err["error"]["message"] and "ready" in err["error"]["message"]
    expect(dm.req("POST", "/v1/nodes/adm-n1/drain", token=a), 200)
    err = expect(dm.req("DELETE", "/v1/nodes/adm-n1", token=a), 409)
    assert "draining" in err["error"]["message"], err
    for tok in (member, ag, cred):
        expect(dm.req("DELETE", "/v1/nodes/adm-n1", token=tok), 403)
    expect(dm.req("DELETE", "/v1/nodes/adm-n1"), 401)
    expect(dm.req("DELETE", "/v1/nodes/nope", token=a), 404)

    # adm-n1's agent stops; adm-n2's keeps beating: adm-n1 is lost
    def lost():
        expect(dm.req("POST", "/v1/nodes/adm-n2/heartbeat", {}, token=ag), 200)
        nodes = expect(dm.req("GET", "/v1/nodes", token=a), 200)["nodes"]
        return [n["state"] for n in nodes if n["name"] == "adm-n1"] == ["lost"]
    poll(lost, timeout=15)
    b = expect(dm.req("DELETE", "/v1/nodes/adm-n1", token=a), 200)
    assert b["name"] == "adm-n1" and b["state"] == "removed" and b["previous"] == "lost", b
    assert isinstance(b.get("credential_revoked"), int), b
    assert names() == ["adm-n2"]
    expect(dm.req("DELETE", "/v1/nodes/adm-n1", token=a), 404)
    # its GPUs no longer count, and its own credential no longer speaks
    poll(lambda: gauges() == ["allot_nodes 1", "allot_gpus 4",
                              'allot_model_gpus{model="L4"} 4'])
    expect(dm.req("POST", "/v1/nodes/adm-n1/heartbeat", {}, token=cred), 401)
    # nor in the limits submissions are checked against: adm-n2 is the
    # largest node now
    for ask, field in (({"gpus": 8}, "4 GPUs"), ({"gpus": 1, "cpus": 40}, "32 CPUs"),
                       ({"gpus": 1, "memory": 200000}, "131072 MiB")):
        err = expect(dm.req("POST", "/v1/jobs", dict(ask, tenant="research/nlp"), token=a), 422)
        assert "the largest registered node has " + field in err["error"]["message"], err
    tokens = expect(dm.req("GET", "/v1/tokens", token=a), 200)["tokens"]
    assert [t["revoked"] is not None for t in tokens if t["name"] == "node/adm-n1"] == [True]
    actions = [(e["action"], e["target"]) for e in dm.audit()]
    assert ("node.delete", "node/adm-n1") in actions, actions
    # a restart does not bring it back
    dm.stop()
    dm2 = Daemon(dm.dir, args=["--lease", "2s"])
    dm2.admin = a
    dm = dm2
    assert names() == ["adm-n2"]
    expect(dm.req("POST", "/v1/nodes/adm-n2/heartbeat", {}, token=ag), 200)
    poll(lambda: gauges() == ["allot_nodes 1", "allot_gpus 4",
                              'allot_model_gpus{model="L4"} 4'])
    # the same name registered again is a new node, ready, that takes work
    reg = expect(dm.req("POST", "/v1/nodes/register", big, token=ag), 201)
    assert reg["state"] == "ready", reg
    expect(dm.req("POST", "/v1/nodes/adm-n2/drain", token=a), 200)
    jid = expect(dm.req("POST", "/v1/jobs", {"tenant": "research/nlp", "gpus": 8, "cpus": 40},
                        token=a), 201)["id"]
    j = fx.wait_job(dm, jid, "starting")
    assert j["placement"]["tasks"][0]["node"] == "adm-n1", j
    poll(lambda: gauges() == ["allot_nodes 2", "allot_gpus 12",
                              'allot_model_gpus{model="L4"} 12'])
    assert dm.stop() == 0


if __name__ == "__main__":
    fx.run([test_cordon_drain_uncordon, test_admin_state_survives_loss, test_delete_node])
