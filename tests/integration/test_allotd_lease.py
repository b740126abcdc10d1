"""Node leases in allotd: a node that stops sending heartbeats is marked
lost once its lease runs out; the jobs placed on it go back to pending
(the default) or end as lost ("requeue": false); its next heartbeat makes
it ready again so the waiting jobs start there. A lost node shows no GPU
health until it is heard from again."""

import re
import time

import allotd_fixture as fx
from allotd_fixture import TENANTS, Daemon, expect

N1 = {"name": "lease-n1", "cpus": 16, "memory": 65536, "gpus": [{"model": "T4"}] * 2}


poll = fx.poll


def wait_sum(dm):
    """allot_queue_wait_seconds_sum: the seconds started jobs waited."""
    m = dm.req("GET", "/metrics", raw=True)[1]
    return float(re.search(r"^allot_queue_wait_seconds_sum (\S+)$", m, re.M).group(1))


def test_lease_expiry_and_return():
    # 3 s: time enough to place both jobs below before the node is lost,
    # even on a loaded machine
    dm = Daemon(args=["--lease", "3s"])
    a = dm.admin
    expect(dm.req("PUT", "/v1/tenants", TENANTS, token=a), 200)
    ag = dm.token("agent", "", "agent")
    expect(dm.req("POST", "/v1/nodes/register", N1, token=ag), 201)
    j = expect(dm.req("POST", "/v1/jobs", {"tenant": "research/nlp", "gpus": 1,
                                           "requeue": False}, token=a), 201)
    t0 = time.time()
    rq = expect(dm.req("POST", "/v1/jobs", {"tenant": "research/nlp", "gpus": 1}, token=a), 201)

    def state(jid):
        return expect(dm.req("GET", "/v1/jobs/%d" % jid, token=a), 200)

    poll(lambda: state(j["id"])["state"] == "starting")
    poll(lambda: state(rq["id"])["state"] == "starting")
    # one heartbeat with its GPUs' health; then none
    health = {"gpus": [{"index": i, "uuid": "GPU-%d" % i, "model": "T4", "health": "healthy"}
                       for i in range(2)]}
    expect(dm.req("POST", "/v1/nodes/lease-n1/heartbeat", {"health": health}, token=ag), 200)
    assert expect(dm.req("GET", "/v1/nodes", token=a), 200)["nodes"][0]["health"] == health
    m = dm.req("GET", "/metrics", raw=True)[1]
    assert 'allot_gpu_health{node="lease-n1",gpu="1"' in m
    # heard from just now, with most of its 3 s lease left
    age = re.search(r'^allot_node_heartbeat_age_seconds\{node="lease-n1"\} (-?\d+)$', m, re.M)
    lease = re.search(r'^allot_node_lease_seconds\{node="lease-n1"\} (\d+)$', m, re.M)
    assert age and 0 <= int(age.group(1)) <= 1 and lease and 1 <= int(lease.group(1)) <= 3, m
    # submitted while both run: it waits, and comes after rq in the queue
    k = expect(dm.req("POST", "/v1/jobs", {"tenant": "research/nlp", "gpus": 1}, token=a), 201)
    # no heartbeat: the lease (3 s) runs out
    lost = poll(lambda: (lambda x: x if x["state"] == "lost" else None)(state(j["id"])))
    assert "lease-n1" in lost["pending_reason"] and lost["end_time"] > 0, lost
    nodes = expect(dm.req("GET", "/v1/nodes", token=a), 200)["nodes"]
    assert nodes[0]["state"] == "lost", nodes
    # what its agent last said of its GPUs is not shown as if still true
    assert nodes[0]["health"] is None, nodes
    m = dm.req("GET", "/metrics", raw=True)[1]
    assert 'allot_node_state{node="lease-n1",state="lost"} 1' in m, m
    assert 'allot_node_lease_seconds{node="lease-n1"} 0\n' in m, m
    age = re.search(r'^allot_node_heartbeat_age_seconds\{node="lease-n1"\} (\d+)$', m, re.M)
    assert age and int(age.group(1)) >= 3, m  # quiet since, for at least its lease
    assert 'allot_gpu_health{node="lease-n1"' not in m, m
    kinds = [e["kind"] for e in expect(dm.req("GET", "/v1/jobs/%d/events" % j["id"], token=a),
                                       200)["events"]]
    assert kinds[-1] == "lost", kinds
    # the job that may be requeued (the default) waits again, without placement
    again = state(rq["id"])
    assert again["state"] == "pending" and again["placement"] is None, again
    kinds = [e["kind"] for e in expect(dm.req("GET", "/v1/jobs/%d/events" % rq["id"], token=a),
                                       200)["events"]]
    assert "requeued" in kinds, kinds
    # no ready node: both wait
    time.sleep(0.5)
    assert state(k["id"])["state"] == "pending"
    waited = wait_sum(dm)
    # a one-GPU node joins: the requeued job keeps its place before k
    n2 = dict(N1, name="lease-n2", gpus=[{"model": "T4"}])
    expect(dm.req("POST", "/v1/nodes/register", n2, token=ag), 201)

    def beat(*names):
        for n in names:
            expect(dm.req("POST", "/v1/nodes/%s/heartbeat" % n, {}, token=ag), 200)

    poll(lambda: beat("lease-n2") or state(rq["id"])["state"] == "starting")
    placed = state(rq["id"])["placement"]["tasks"][0]["node"]
    assert placed == "lease-n2" and state(k["id"])["state"] == "pending", placed
    # its queue wait counts from its requeue (at least 3 s, its lease, after
    # t0), not from its submission: less than the time since t0 less 2 s
    rq_wait = wait_sum(dm) - waited
    assert 0 <= rq_wait < time.time() - t0 - 2, (rq_wait, time.time() - t0)
    # the node comes back with a heartbeat, and keeps it up: k starts there
    beat("lease-n1")
    poll(lambda: beat("lease-n1", "lease-n2") or state(k["id"])["state"] == "starting")
    assert [n["state"] for n in expect(dm.req("GET", "/v1/nodes", token=a), 200)["nodes"]] == \
        ["ready", "ready"]
    assert dm.stop() == 0


def test_shorter_lease_after_a_restart():
    """allotd granted a node a 30 s lease and died; the allotd that takes over (a restart,
    or a standby) runs with --lease 2s. The node's agent fences its tasks by the lease it
    was granted, so the node is not lost before that lease ends: its job is not started
    elsewhere while it may still run there."""
    d = Daemon(args=["--lease", "30s"])
    a = d.admin
    expect(d.req("PUT", "/v1/tenants", TENANTS, token=a), 200)
    ag = d.token("agent", "", "agent")
    expect(d.req("POST", "/v1/nodes/register", N1, token=ag), 201)
    expect(d.req("POST", "/v1/nodes/lease-n1/heartbeat", {}, token=ag), 200)
    port = d.port
    d.stop(fx.signal.SIGKILL)
    d = Daemon(d.dir, args=["--listen", "127.0.0.1:%d" % port, "--lease", "2s"])
    time.sleep(5)  # proving an absence: past the new allotd's own lease
    nodes = expect(d.req("GET", "/v1/nodes", token=a), 200)["nodes"]
    assert [n["state"] for n in nodes] == ["ready"], (nodes, d.log()[-2000:])
    assert "lease-n1 lost" not in d.log(), d.log()[-2000:]
    assert d.stop() == 0


if __name__ == "__main__":
    fx.run([test_lease_expiry_and_return, test_shorter_lease_after_a_restart])
