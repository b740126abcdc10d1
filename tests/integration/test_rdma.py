"""SR-IOV RDMA virtual functions on the agent (docs/network.md, "RDMA and InfiniBand";
allotd's side is test_allotd_rdma.py), end to end with the real allotd: an agent whose
sysfs is a tree the test makes (--sysfs: an HCA, seen as RDMA device and as netdev, with
three VFs, each with its netdev, RDMA device and uverbs node) registers three VFs; two
jobs asking one each get different VFs, in their environment (ALLOT_RDMA_VFS, _NETDEVS,
_DEVICES), and their own uverbs node passes the task's device rules while the others'
do not (EPERM); a task asking for a VF when the agent finds none free (one vanished from
sysfs) fails with the reason; a task asking for two waits for the one a cancelled task
still holds and gets it once that task ended; after a kill -9 and restart the agent
keeps who holds what. Needs root (cgroups, device nodes), as test_agent.py."""

import os
import re
import signal
import time

import allotd_fixture as fx
import rdma_fixture
from allotd_fixture import Agent, Daemon, expect

dm = None
AG = None
agent = None
tree = None
vfs = []
devdir = None

PROG = r"""
import os, signal, sys, time
# stopping takes a while, as for a job that saves its state
signal.signal(signal.SIGTERM, lambda *_: (time.sleep(0.5), sys.exit(0)))
print("env", *(os.environ.get(k, "-") for k in
      ("ALLOT_RDMA_VFS", "ALLOT_RDMA_NETDEVS", "ALLOT_RDMA_DEVICES")), flush=True)
for p in sorted(os.listdir(sys.argv[1])):
    try:
        os.close(os.open(os.path.join(sys.argv[1], p), os.O_RDWR)); e = 0
    except OSError as x:
        e = x.errno
    print("dev", p, e, flush=True)
print("ready", flush=True)
time.sleep(1000)
"""


def submit(n):
    body = {"tenant": "research/nlp", "gpus": 0, "cpus": 0.1, "memory": 64, "rdma_vfs": n,
            "command": ["python3", "-c", PROG, devdir],
            # the job's /tmp is its own: the folder of test devices, below the host's /tmp, is
            # reachable as its working directory
            "workdir": devdir}
    return expect(dm.req("POST", "/v1/jobs", body, token=dm.admin), 201)["id"]


def wait(cond, what, timeout=20):
    end = time.time() + timeout
    while time.time() < end:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError("not within %ss: %s" % (timeout, what))


def log(jid):
    try:
        return agent.task_log(jid)
    except OSError:
        return ""


def given(jid):
    """(ALLOT_RDMA_VFS, _NETDEVS, _DEVICES, {uverbs minor: errno}) of job jid's task."""
    wait(lambda: "ready" in log(jid) or job(jid)["state"] == "failed", "job %d's output" % jid)
    out = log(jid)
    assert "ready" in out, (job(jid), out)
    env = re.search(r"^env (\S+) (\S+) (\S+)$", out, re.M).groups()
    devs = {int(m): int(e) for m, e in re.findall(r"^dev uv(\d+) (\d+)$", out, re.M)}
    return env + (devs,)


def node_vfs():
    nodes = expect(dm.req("GET", "/v1/nodes", token=dm.admin), 200)["nodes"]
    return ([n for n in nodes if n["name"] == "rd-1"] or [{}])[0].get("rdma_vfs")


def job(jid):
    return expect(dm.req("GET", "/v1/jobs/%d" % jid, token=dm.admin), 200)


def cancel(jid):
    expect(dm.req("POST", "/v1/jobs/%d/cancel" % jid, token=dm.admin), 200)


def expect_vfs(jid, ks):
    """Job jid's task got VFs ks (in that order), and may open their uverbs nodes only."""
    got, netdevs, devices, devs = given(jid)
    want = [vfs[k] for k in ks]
    assert got == ",".join(v["pci"] for v in want), (jid, got, ks)
    assert netdevs == ",".join(v["netdev"] for v in want), netdevs
    assert devices == ",".join(v["device"] for v in want), devices
    mine = {v["minor"] for v in want}
    assert sorted(devs) == [v["minor"] for v in vfs], devs
    # its own node passes the device rules (no driver behind it: ENXIO), the others: EPERM
    assert all((devs[m] != 1) == (m in mine) for m in devs), (ks, devs)


state = {}


def test_capacity_registered():
    wait(lambda: node_vfs() is not None, "rd-1 registered with its VFs")
    # mlx5_0 and ib0 are one PCI device: three VFs, not six
    assert node_vfs() == {"total": 3, "used": 0}, node_vfs()


def test_two_tasks_get_different_vfs():
    a, b = submit(1), submit(1)
    ga, gb = given(a)[0], given(b)[0]
    assert {ga, gb} == {vfs[0]["pci"], vfs[1]["pci"]}, (ga, gb)
    state["a"], state["b"] = (a, b) if ga == vfs[0]["pci"] else (b, a)
    expect_vfs(state["a"], [0])
    expect_vfs(state["b"], [1])
    assert node_vfs() == {"total": 3, "used": 2}, node_vfs()


def test_fewer_free_than_asked():
    """allotd counts the third VF free; the agent no longer finds it in sysfs."""
    link = rdma_fixture.virtfn(tree, 2)
    os.rename(link, link + ".gone")
    try:
        c = submit(1)
        wait(lambda: job(c)["state"] in ("failed", "succeeded"), "job %d's end" % c)
        j = job(c)
        assert j["state"] == "failed", j
        assert "not enough RDMA VFs: 1 asked, 0 of the node's 2 free" in j["pending_reason"], j
    finally:
        os.rename(link + ".gone", link)
    wait(lambda: node_vfs()["used"] == 2, "job %d's VF given back: %r" % (c, node_vfs()))


def test_waits_for_a_stopping_task():
    """Cancelled, the first job's task still runs until its SIGTERM took effect: a job
    asking for two VFs (the free one and that one) starts once it has ended."""
    cancel(state["a"])
    d = submit(2)
    expect_vfs(d, [0, 2])
    wait(lambda: job(d)["state"] == "running", "job %d running" % d)
    state["d"] = d
    assert node_vfs()["used"] == 3, node_vfs()


def test_restart_keeps_the_assignment():
    """After a kill -9 the agent reads who holds what back from the tasks' folders: when the
    second job ends, its VF is the one a new job gets (the first two are the third job's)."""
    agent.stop(signal.SIGKILL)
    agent.start()
    wait(lambda: agent.log().count("running, adopted") >= 2, "both tasks adopted")
    cancel(state["b"])
    e = submit(1)
    expect_vfs(e, [1])
    expect_vfs(state["d"], [0, 2])  # still where it ran
    for jid in (state["d"], e):
        cancel(jid)
    wait(lambda: node_vfs()["used"] == 0, "every VF given back: %r" % node_vfs())
    wait(lambda: not os.listdir(os.path.join(agent.dir, "tasks")), "every task forgotten")


def test_agent_stops_clean():
    """No sanitizer report (an ASan build reports leaks at exit): build-asan/allotd."""
    agent.stop()
    assert "Sanitizer" not in agent.log() and "runtime error" not in agent.log(), \
        agent.log()[-4000:]


if __name__ == "__main__":
    if os.geteuid() != 0:
        print("SKIP: allot-agent needs root for cgroups and device rules")
        raise SystemExit(0)
    tree = fx.tempdir()
    vfs = rdma_fixture.sysfs_tree(tree, 3)
    # the VFs' uverbs nodes (231:193..195), where the jobs (as nobody) open them
    devdir = fx.tempdir()
    os.chmod(devdir, 0o755)
    for v in vfs:
        path = os.path.join(devdir, "uv%d" % v["minor"])
        os.mknod(path, 0o666 | 0o020000, os.makedev(rdma_fixture.UVERBS_MAJOR, v["minor"]))
        os.chmod(path, 0o666)
    dm = Daemon()
    try:
        expect(dm.req("PUT", "/v1/tenants", fx.TENANTS, token=dm.admin), 200)
        AG = dm.token("agent", "", "agents")
        agent = Agent(dm, AG, "rd-1", emulate="1xL4", args=["--sysfs", tree])
        fx.run([test_capacity_registered, test_two_tasks_get_different_vfs,
                test_fewer_free_than_asked, test_waits_for_a_stopping_task,
                test_restart_keeps_the_assignment, test_agent_stops_clean])
    finally:
        if agent and agent.proc.poll() is None:
            agent.stop()
        dm.stop()
