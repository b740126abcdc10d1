"""RDMA virtual functions in allotd (the agent's side is test_rdma.py): a
node's VF capacity is the sum of the vfs its inventory registers; a job
asks rdma_vfs per task; the scheduler places it only where that many are
free, says so in the pending reason, hands the count to the node's agent
in the desired state (the agent picks which VFs), shows what is used in
/v1/nodes and gives the VFs back when the job ends, also across a kill -9
of allotd. The test acts as the agents."""

import signal
import time

import allotd_fixture as fx
from allotd_fixture import Daemon, expect
from cli_fixture import cli, ok

dm = None
AG = None

TENANTS = {"version": 1, "tenants": [{"path": "hpc", "quotas": {"gpu": 16}}]}


def node(name, rdma=None):
    n = {"name": name, "cpus": 16, "memory": 65536, "gpus": [{"model": "L4"}] * 2}
    if rdma is not None:
        n["rdma"] = rdma
    return n


def submit(status=201, **kw):
    body = dict({"tenant": "hpc", "cpus": 1, "memory": 256, "gpus": 1, "command": ["true"]}, **kw)
    return expect(dm.req("POST", "/v1/jobs", body, token=dm.admin), status)


def vfs_of(name):
    nodes = expect(dm.req("GET", "/v1/nodes", token=dm.admin), 200)["nodes"]
    return [n for n in nodes if n["name"] == name][0].get("rdma_vfs")


def wait_vfs(name, want, timeout=10):
    """The node's VF counts once they read `want` (the loop publishes the nodes' view
    after the cycle that placed a job; under load that can come after the job reads
    starting), or what they read after `timeout` seconds."""
    end = time.time() + timeout
    while vfs_of(name) != want and time.time() < end:
        time.sleep(0.05)
    return vfs_of(name)


def desired_vfs(name, jid):
    jobs = fx.beat(dm, AG, name)["jobs"]
    return [x.get("rdma_vfs") for x in jobs if x["job"] == jid]


def test_bad_requests():
    for v, code, word in ((-1, 422, "rdma_vfs"), (33, 422, "rdma_vfs"), ("2", 400, "rdma_vfs"),
                          (1.5, 400, "rdma_vfs")):
        e = submit(status=code, rdma_vfs=v)
        assert word in e["error"]["message"], (v, e)
    e = expect(dm.req("POST", "/v1/nodes/register",
                      node("bad", [{"name": "mlx5_0", "vfs": -3}]), token=AG), 422)
    assert "rdma[0].vfs" in e["error"]["message"], e
    r = cli(dm, "submit", "-t", "hpc", "--rdma-vfs", "x", "--", "true")
    assert r.rc != 0 and "rdma-vfs" in r.err, r


def test_placed_where_free_and_given_back():
    assert vfs_of("r-1") == {"total": 3, "used": 0}, vfs_of("r-1")
    assert vfs_of("p-1") is None
    big = submit(rdma_vfs=2)["id"]
    j = fx.wait_job(dm, big, "starting")
    t = j["placement"]["tasks"][0]
    assert t["node"] == "r-1" and t["rdma_vfs"] == 2, j
    assert desired_vfs("r-1", big) == [2]
    assert wait_vfs("r-1", {"total": 3, "used": 2}) == {"total": 3, "used": 2}
    # GPUs are free on both nodes; two VFs on neither
    more = submit(rdma_vfs=2)["id"]
    plain = submit()["id"]
    fx.wait_job(dm, plain, "starting")
    j = fx.job(dm, more)
    assert j["state"] == "pending" and "RDMA VFs" in j["pending_reason"], j
    r = ok(cli(dm, "show", str(big)))
    assert "2 RDMA VFs per task" in r.out and ", 2 RDMA VFs" in r.out, r.out
    # the CLI asks too; one VF is left on r-1
    r = ok(cli(dm, "submit", "-t", "hpc", "--gpus", "0", "--rdma-vfs", "1", "--", "true"))
    one = int(r.out.strip())
    j = fx.wait_job(dm, one, "starting")
    assert j["placement"]["tasks"][0]["node"] == "r-1", j
    assert wait_vfs("r-1", {"total": 3, "used": 3}) == {"total": 3, "used": 3}
    # the first job ends: its VFs go to the waiting one
    fx.beat(dm, AG, "r-1", {"jobs": [{"id": big, "state": "running"}]})
    fx.beat(dm, AG, "r-1", {"jobs": [{"id": big, "state": "succeeded", "exit_code": 0}]})
    fx.wait_job(dm, big, "succeeded")
    j = fx.wait_job(dm, more, "starting")
    assert j["placement"]["tasks"][0]["node"] == "r-1", j
    assert desired_vfs("r-1", more) == [2] and desired_vfs("r-1", big) == []


def test_restart_keeps_what_is_held():
    global dm
    held = vfs_of("r-1")
    assert held == {"total": 3, "used": 3}, held
    port, admin = dm.port, dm.admin
    dm.stop(signal.SIGKILL)
    dm = Daemon(dm.dir, args=["--listen", "127.0.0.1:%d" % port])
    dm.admin = admin
    for n in ("r-1", "p-1"):  # the agents come back
        fx.beat(dm, AG, n)
    assert vfs_of("r-1") == held, vfs_of("r-1")
    # adopted jobs still hold their VFs: nothing more fits on r-1
    jid = submit(rdma_vfs=1)["id"]
    end = time.time() + 10
    while time.time() < end:  # until the scheduler has looked at it
        j = fx.job(dm, jid)
        if j["state"] != "pending" or "RDMA VFs" in (j.get("pending_reason") or ""):
            break
        time.sleep(0.05)
    assert j["state"] == "pending" and "RDMA VFs" in j["pending_reason"], j


if __name__ == "__main__":
    dm = Daemon()
    try:
        expect(dm.req("PUT", "/v1/tenants", TENANTS, token=dm.admin), 200)
        AG = dm.token("agent", "", "agents")
        expect(dm.req("POST", "/v1/nodes/register",
                      node("r-1", [{"name": "mlx5_0", "vfs": 2}, {"name": "mlx5_1", "vfs": 1},
                                   {"name": "mlx5_2"}]), token=AG), 201)
        expect(dm.req("POST", "/v1/nodes/register", node("p-1"), token=AG), 201)
        fx.run([test_bad_requests, test_placed_where_free_and_given_back,
                test_restart_keeps_what_is_held])
    finally:
        dm.stop()
