"""allot-agent end to end with a real allotd, on loopback, with emulated
GPUs: jobs run to completion with their exit code and logs, as an
unprivileged user, in cgroups that enforce memory (an OOM kill is reported
as such), CPU quota and device access (another GPU: EPERM); cancel stops a
job with SIGTERM and grace; an agent killed with SIGKILL and restarted
adopts its running tasks (none runs twice); allotd killed and restarted on
the same port is found again. The agent needs root for cgroups and user
switching, as on a real node."""

import grp
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import allotd_fixture as fx
from allotd_fixture import TENANTS, Agent, Daemon, expect
from cli_fixture import cli, fails, ok

dm = None
AG = None
agent = None


def tenant_uid(ag, tenant):
    """The uid the agent gave tenant under --run-as tenant (its STATE/tenant-uids)."""
    with open(os.path.join(ag.dir, "tenant-uids")) as f:
        for line in f:
            uid, name = line.split()
            if name == tenant:
                assert 2000000000 <= int(uid) <= 2099999999, line
                return uid
    raise AssertionError("no uid for %s" % tenant)


def submit(body):
    body = dict({"tenant": "research/nlp", "gpus": 1, "cpus": 1, "memory": 256}, **body)
    if "mig" in body:
        del body["gpus"]
    body = {k: v for k, v in body.items() if v is not None}
    return expect(dm.req("POST", "/v1/jobs", body, token=dm.admin), 201)["id"]


def wait_node(name):
    for _ in range(200):  # bounded: an agent registers within a second
        if any(n["name"] == name for n in
               expect(dm.req("GET", "/v1/nodes", token=dm.admin), 200)["nodes"]):
            return
        time.sleep(0.05)
    raise AssertionError("node %s did not register" % name)


def sh(script):
    return ["sh", "-c", script]


def wait_state(jid, states, timeout=20):
    end = time.time() + timeout
    while time.time() < end:
        j = expect(dm.req("GET", "/v1/jobs/%d" % jid, token=dm.admin), 200)
        if j["state"] in states:
            return j
        time.sleep(0.05)
    raise AssertionError("job %d not %s within %ss: %r" % (jid, states, timeout, j))


def test_stale_cgroups_removed():
    """The task cgroups of a test run that was killed (no pid 4194305 can exist) are
    removed by the next run; this run's own are kept."""
    dead = "/sys/fs/cgroup/pids/allot-test-4194305"
    os.makedirs(os.path.join(dead, "7-0"), exist_ok=True)
    assert "allot-test-4194305" in fx.remove_stale_cgroups()
    assert not os.path.exists(dead)
    assert fx.CGROUP_ROOT not in fx.remove_stale_cgroups()


def test_stopped_agent_leaves_no_cgroup():
    """An agent that stops with no task running removes its own cgroup folder in every
    hierarchy, after a job made one there; only a task still running would keep it."""
    root = "%s-own" % fx.CGROUP_ROOT
    own = Agent(dm, AG, "ag-own", emulate="1xT4", args=["--cgroup-root", root])
    wait_node("ag-own")
    try:
        jid = submit({"gpu_models": ["T4"], "command": sh("echo own")})
        assert wait_state(jid, ("succeeded", "failed"))["state"] == "succeeded"
        made = [d for d in os.listdir("/sys/fs/cgroup")
                if os.path.isdir(os.path.join("/sys/fs/cgroup", d, root))]
        assert made, "no cgroup folder %s was made" % root
    finally:
        assert own.stop() == 0
    left = [d for d in os.listdir("/sys/fs/cgroup")
            if os.path.exists(os.path.join("/sys/fs/cgroup", d, root))]
    assert not left, left
    expect(dm.req("POST", "/v1/nodes/ag-own/cordon", token=dm.admin), 200)


def test_token_hidden_from_process_list():
    """The join token given with --token is not left in /proc/PID/cmdline, where any
    job on the node could read it and speak for the node."""
    wait_node("ag-1")  # the agent has read its options
    with open("/proc/%d/cmdline" % agent.proc.pid, "rb") as f:
        args = f.read().split(b"\0")
    assert AG.encode() not in b"\0".join(args), args
    assert args[args.index(b"--token") + 1] == b"*" * len(AG), args


def test_node_credential():
    """Joined with the shared token, the agent gets its node's own credential, keeps it in
    STATE/node-token (0600) and speaks with it: the join token, which every node holds,
    can no longer speak for ag-1 (its heartbeats carry the specs of the jobs placed
    there)."""
    wait_node("ag-1")
    path = os.path.join(agent.dir, "node-token")
    assert os.stat(path).st_mode & 0o777 == 0o600
    with open(path) as f:
        tok = f.read().strip()
    assert tok.startswith("allot_") and tok != AG
    assert "speaks with its own credential from now on (token node/ag-1)" in agent.log(), \
        agent.log()
    st, b = dm.req("POST", "/v1/nodes/ag-1/heartbeat", {}, token=AG)
    assert st == 403 and "jobs" not in b, (st, b)
    creds = node_creds("ag-1")
    assert len(creds) == 1, creds
    # an admin revokes it (a rotation): the agent joins again with the join token and
    # gets a new one, without missing its lease
    expect(dm.req("DELETE", "/v1/tokens/%d" % creds[0]["id"], token=dm.admin), 200)
    end = time.time() + 10
    while time.time() < end and agent.log().count("speaks with its own credential") < 2:
        time.sleep(0.05)
    assert "refused the node credential" in agent.log(), agent.log()
    assert agent.log().count("speaks with its own credential") == 2, agent.log()
    with open(path) as f:
        assert f.read().strip() not in (tok, AG)
    assert len(node_creds("ag-1")) == 1
    wait_state(submit({"gpus": 0, "command": sh("true")}), ("succeeded",))


def node_creds(node):
    """The live node credentials of node."""
    return [t for t in expect(dm.req("GET", "/v1/tokens", token=dm.admin), 200)["tokens"]
            if t["name"] == "node/" + node and not t["revoked"]]


def test_run_to_completion():
    jid = submit({"command": sh("echo hello $ALLOT_JOB_ID; id -u; echo gpus=$CUDA_VISIBLE_DEVICES;"
                                " echo nv=$NVIDIA_VISIBLE_DEVICES")})
    j = wait_state(jid, ("succeeded", "failed"))
    assert j["state"] == "succeeded" and j["exit_code"] == 0, j
    out = agent.task_log(jid)
    assert "hello %d" % jid in out, out
    # the tenant's own uid (--run-as tenant, the default), never root
    assert "\n%s\n" % tenant_uid(agent, "research/nlp") in out, out
    assert "gpus=GPU-" in out and out.split("gpus=")[1].split()[0] == \
        out.split("nv=")[1].split()[0], out
    evs = expect(dm.req("GET", "/v1/jobs/%d/events" % jid, token=dm.admin), 200)["events"]
    kinds = [e["kind"] for e in evs]
    assert kinds[:2] == ["submitted", "placed"] and kinds[-1] == "succeeded", kinds
    assert evs[-1]["detail"].startswith("ran "), evs  # the run time the agent measured
    # its name and CPUs (whole, rounded up; 1 by default); no name when it has none
    jid = submit({"name": "named-1", "cpus": 1.5,
                  "command": sh('echo "n=$ALLOT_JOB_NAME c=$ALLOT_CPUS_PER_TASK"')})
    assert wait_state(jid, ("succeeded", "failed"))["state"] == "succeeded"
    assert "n=named-1 c=2\n" in agent.task_log(jid), agent.task_log(jid)
    jid = submit({"cpus": None,
                  "command": sh('echo "n=${ALLOT_JOB_NAME-unset} c=${ALLOT_CPUS_PER_TASK-unset}"')})
    assert wait_state(jid, ("succeeded", "failed"))["state"] == "succeeded"
    assert "n=unset c=1\n" in agent.task_log(jid), agent.task_log(jid)


def test_job_reports_its_checkpoint():
    """A job reports its own save with `allot checkpoint` and no token of
    its own: the agent gives it ALLOT_JOB_ID, ALLOT_SERVER and its own
    credential ALLOT_JOB_TOKEN, which is good for nothing else (`allot show`
    with it is refused)."""
    from cli_fixture import ALLOT
    jid = submit({"checkpointable": True,
                  "command": sh('"%s" checkpoint && echo "server=$ALLOT_SERVER"; '
                                'ALLOT_TOKEN="$ALLOT_JOB_TOKEN" "%s" show "$ALLOT_JOB_ID"; '
                                'echo "show=$?"' % (ALLOT, ALLOT))})
    j = wait_state(jid, ("succeeded", "failed"))
    out = agent.task_log(jid)
    assert j["state"] == "succeeded", (j, out)
    assert "job %d saved at " % jid in out and "server=http://127.0.0.1:%d" % dm.port in out, out
    assert "role job may not GET" in out and "show=0" not in out, out
    evs = expect(dm.req("GET", "/v1/jobs/%d/events" % jid, token=dm.admin), 200)["events"]
    assert "checkpoint" in [e["kind"] for e in evs], evs
    # a job that does not checkpoint gets no credential
    jid = submit({"command": sh('echo "token=[${ALLOT_JOB_TOKEN:-none}]"')})
    assert wait_state(jid, ("succeeded", "failed"))["state"] == "succeeded"
    assert "token=[none]" in agent.task_log(jid), agent.task_log(jid)


def zombies_of(pid):
    """The zombie children of process pid."""
    out = []
    for p in os.listdir("/proc"):
        try:
            with open("/proc/%s/stat" % p) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] == "Z" and int(fields[1]) == pid:
            out.append(int(p))
    return out


def node_state(name):
    return next(n["state"] for n in expect(dm.req("GET", "/v1/nodes", token=dm.admin),
                                           200)["nodes"] if n["name"] == name)


def test_drained_once_the_processes_are_gone():
    """A draining node is drained only once its agent runs no process: a cancelled job
    ends at once in allotd, but its processes live out their grace (SIGTERM to SIGKILL,
    the agent's 2 s here), and until then the node is still draining."""
    jid = submit({"gpus": 0, "cpus": 0.1, "command": sh(
        "trap 'echo term; sleep 30' TERM; echo pid $$; while :; do sleep 0.2; done")})
    wait_state(jid, ("running",))
    end = time.time() + 10
    while time.time() < end and "pid " not in agent.task_log(jid):
        time.sleep(0.05)
    pid = int(agent.task_log(jid).split("pid ")[1].split()[0])
    try:
        expect(dm.req("POST", "/v1/nodes/%s/drain" % agent.name, token=dm.admin), 200)
        expect(dm.req("POST", "/v1/jobs/%d/cancel" % jid, token=dm.admin), 200)
        seen = set()
        end = time.time() + 15
        while time.time() < end and pid_alive(pid):
            seen.add(node_state(agent.name))  # bounded: the grace is 2 s
            time.sleep(0.05)
        assert not pid_alive(pid) and seen == {"draining"}, (seen, agent.task_log(jid))
        end = time.time() + 10
        while time.time() < end and node_state(agent.name) != "drained":
            time.sleep(0.05)  # bounded: the agent's next heartbeat tells
        assert node_state(agent.name) == "drained"
    finally:
        expect(dm.req("POST", "/v1/nodes/%s/uncordon" % agent.name, token=dm.admin), 200)


def test_token_file_wins_over_the_environment():
    """--token-file, given for the agent, wins over an ALLOT_TOKEN its environment
    happens to carry (here one allotd refuses)."""
    d2 = Daemon()
    ag = None
    try:
        path = os.path.join(fx.tempdir(), "join.secret")
        with open(path, "w") as f:
            f.write(d2.token("agent", "", "join") + "\n")
        os.chmod(path, 0o600)
        ag = Agent(d2, "", "tokfile", emulate="1xT4", args=["--token-file", path],
                   env={"ALLOT_TOKEN": "allot_" + "0" * 64})
        end = time.time() + 15
        while time.time() < end and ag.proc.poll() is None and not any(
                n["name"] == "tokfile" for n in expect(d2.req("GET", "/v1/nodes",
                                                              token=d2.admin), 200)["nodes"]):
            time.sleep(0.1)  # bounded: until the node registered
        assert ag.proc.poll() is None, ag.log()
        assert any(n["name"] == "tokfile" for n in expect(
            d2.req("GET", "/v1/nodes", token=d2.admin), 200)["nodes"]), ag.log()
    finally:
        if ag:
            ag.stop()
        d2.stop()


def test_short_tasks_leave_no_zombies():
    """Every task's supervisor is reaped, also one that exits after its task was seen
    to end: a stream of short jobs leaves no zombie children of the agent."""
    ids = [submit({"gpus": 0, "cpus": 0.1, "command": sh("echo x")}) for _ in range(10)]
    for jid in ids:
        assert wait_state(jid, ("succeeded", "failed"))["state"] == "succeeded"
    end = time.time() + 10
    while time.time() < end and zombies_of(agent.proc.pid):
        time.sleep(0.1)  # bounded: reported tasks are forgotten at a later heartbeat
    assert not zombies_of(agent.proc.pid), zombies_of(agent.proc.pid)


def test_exit_code_and_no_command():
    jid = submit({"command": sh("echo bad >&2; exit 3")})
    j = wait_state(jid, ("succeeded", "failed"))
    assert j["state"] == "failed" and j["exit_code"] == 3, j
    assert "status 3" in j["pending_reason"] and "bad" in agent.task_log(jid), j
    jid = submit({"command": ["/nonexistent/program"]})
    j = wait_state(jid, ("succeeded", "failed"))
    assert j["exit_code"] == 127 and "cannot run" in agent.task_log(jid), j
    # no command: refused at submission, not failed on its node after taking its place
    body = {"tenant": "research/nlp", "gpus": 1}
    for extra, says in (({}, 'field "command" is required'),
                        ({"command": []}, 'field "command" is required'),
                        ({"command": [""]}, "the program to run, is empty")):
        st, b = dm.req("POST", "/v1/jobs", json.dumps(dict(body, **extra)), token=dm.admin)
        assert st == 422 and says in b["error"]["message"], (st, b)


def test_ls_time_nodes_exit():
    """allot ls tells how long a job has run, where, and how it ended."""
    def row(jid):
        rows = ok(cli(dm, "ls", "-s", wait_state(jid, ("running", "failed"))["state"])).lines()
        head = rows[0].split()
        cells = [r.split() for r in rows if r.split()[0] == str(jid)][0]
        return {k: cells[head.index(k)] for k in ("TIME", "NODES", "EXIT")}

    long = submit({"gpus": 0, "cpus": 0.1, "command": sh("sleep 30")})
    wait_state(long, ("running",))
    time.sleep(1.2)
    r = row(long)
    assert re.fullmatch(r"0:00:0[1-9]", r["TIME"]) and r["NODES"] == "ag-1", r
    assert r["EXIT"] == "-", r
    ended = submit({"gpus": 0, "cpus": 0.1, "command": sh("sleep 1; exit 3")})
    assert wait_state(ended, ("failed",))["exit_code"] == 3
    r = row(ended)
    assert re.fullmatch(r"0:00:0[1-5]", r["TIME"]) and r["NODES"] == "ag-1", r
    assert r["EXIT"] == "3", r
    expect(dm.req("POST", "/v1/jobs/%d/cancel" % long, token=dm.admin), 200)
    wait_state(long, ("cancelled",))


PROBE_DIR = None  # a folder on the agent's PATH only (set in main)


def test_command_found_in_the_jobs_path():
    """A command without a slash is looked up in the PATH the job runs
    with, not the agent's: a program only on the agent's PATH is not found
    (exit 127, "No such file or directory"), with or without a shell."""
    for cmd, said in ((["allot-path-probe"], "cannot run allot-path-probe: No such file"),
                      (sh("allot-path-probe"), "not found")):
        jid = submit({"command": cmd})
        j = wait_state(jid, ("succeeded", "failed"))
        log = agent.task_log(jid)
        assert j["state"] == "failed" and j["exit_code"] == 127, (cmd, j, log)
        assert "found by the agent" not in log and said in log, (cmd, log)


def test_tasks_know_where_the_others_run():
    """Each task of a job of several tasks gets ALLOT_TASK_NODES, the nodes
    of its tasks by task index (here both on this node); a job of one task
    gets none."""
    jid = submit({"tasks": 2, "command": sh('echo "nodes=$ALLOT_TASK_NODES '
                                            'addrs=${ALLOT_TASK_ADDRESSES-unset}"')})
    j = wait_state(jid, ("succeeded", "failed"))
    log = agent.task_log(jid)
    assert j["state"] == "succeeded", (j, log)
    assert "nodes=%s,%s addrs=unset" % (agent.name, agent.name) in log, log
    jid = submit({"command": sh('echo "nodes=${ALLOT_TASK_NODES-unset}"')})
    wait_state(jid, ("succeeded", "failed"))
    assert "nodes=unset" in agent.task_log(jid), agent.task_log(jid)


def test_failed_task_ends_its_gang():
    """A task of a gang that fails ends the job at once, with its exit code,
    when the other tasks run on the same node too (as across nodes): the
    others are stopped, not left holding their GPUs."""
    t0 = time.time()
    jid = submit({"tasks": 2, "command": sh('if [ "$ALLOT_TASK_INDEX" = 1 ]; then sleep 0.5; '
                                             'exit 2; fi; exec sleep 61.25')})
    j = wait_state(jid, ("succeeded", "failed"), timeout=30)
    assert j["state"] == "failed" and j["exit_code"] == 2, j
    assert j["pending_reason"] == "task 1: exited with status 2", j  # which task
    assert time.time() - t0 < 30, j
    assert {t["node"] for t in j["placement"]["tasks"]} == {agent.name}, j
    # nothing of it is left running on the node (the agent's grace is 3 s)

    def left():
        return subprocess.run(["pgrep", "-f", "sleep 61.25"], capture_output=True).returncode == 0
    end = time.time() + 15
    while time.time() < end and left():
        time.sleep(0.1)
    assert not left()


def test_memory_limit_is_an_oom_kill():
    jid = submit({"memory": 64, "command": ["python3", "-c",
                                            "x = bytearray(400 * 1024 * 1024); print(len(x))"]})
    j = wait_state(jid, ("succeeded", "failed"))
    assert j["state"] == "failed" and "OOM" in (j["pending_reason"] or ""), j


def test_cpu_quota():
    prog = ("import time\nt0 = time.time()\nwhile time.time() - t0 < 2: pass\n"
            "print('cpu', time.process_time(), 'wall', time.time() - t0)\n")
    jid = submit({"cpus": 0.25, "gpus": 0, "command": ["python3", "-c", prog]})
    j = wait_state(jid, ("succeeded", "failed"))
    assert j["state"] == "succeeded", j
    words = agent.task_log(jid).split()
    cpu, wall = float(words[words.index("cpu") + 1]), float(words[words.index("wall") + 1])
    assert cpu <= 0.25 * wall * 1.4 + 0.05, (cpu, wall)


CPU_WEIGHT = r"""
import glob, os
for line in open("/proc/self/cgroup"):
    hid, ctrls, path = line.rstrip("\n").split(":", 2)
    if "cpu" in ctrls.split(","):  # cgroup v1: cpu.shares
        for d in glob.glob("/sys/fs/cgroup/*cpu*") + ["/sys/fs/cgroup/cpu"]:
            f = d + path + "/cpu.shares"
            if os.path.exists(f):
                print("shares", open(f).read().strip())
                break
    elif hid == "0" and os.path.exists("/sys/fs/cgroup" + path + "/cpu.weight"):
        print("weight", open("/sys/fs/cgroup" + path + "/cpu.weight").read().strip())
"""


def test_cpu_weight_follows_the_reservation():
    """Under contention a task gets the CPUs it reserved, not only its cap:
    its cgroup's CPU weight is its CPUs (1,024 shares a CPU); a task that
    reserved a hundredth of a CPU has about the least weight and yields to every
    other (and starts: its quota, under the kernel's least in 100 ms periods, is
    counted in 1 s ones)."""
    want = {0.01: ("10", "1"), 2: ("2048", "79")}
    for cpus, (shares, weight) in want.items():
        jid = submit({"cpus": cpus, "gpus": 0, "command": ["python3", "-c", CPU_WEIGHT]})
        j = wait_state(jid, ("succeeded", "failed"))
        out = agent.task_log(jid)
        assert j["state"] == "succeeded", (j, out)
        assert ("shares %s" % shares) in out or ("weight %s" % weight) in out, (cpus, out)


def test_tiny_cpu_ask_starts():
    """A task of 0.005 CPU starts (its quota of 0.5 ms in a 100 ms period is under the
    kernel's least: the cgroup refused it and the task failed), held to 5 ms a second."""
    jid = submit({"cpus": 0.005, "gpus": 0, "command": ["true"]})
    j = wait_state(jid, ("succeeded", "failed"))
    assert j["state"] == "succeeded", (j, agent.task_log(jid))


def test_device_access():
    prog = ("import os\n"
            "mine = os.environ['ALLOT_GPU_DEVICES'].split(',')\n"
            "d = os.path.dirname(mine[0])\n"
            "for p in sorted(os.listdir(d)):\n"
            "    path = os.path.join(d, p)\n"
            "    try:\n"
            "        os.close(os.open(path, os.O_RDWR)); e = 0\n"
            "    except OSError as x:\n"
            "        e = x.errno\n"
            "    print(p, 'mine' if path in mine else 'other', e)\n")
    jid = submit({"command": ["python3", "-c", prog]})
    j = wait_state(jid, ("succeeded", "failed"))
    assert j["state"] == "succeeded", (j, agent.task_log(jid))
    rows = [l.split() for l in agent.task_log(jid).splitlines() if l.startswith("nvidia")]
    by = {r[0]: (r[1], int(r[2])) for r in rows}
    mine = [k for k, v in by.items() if v[0] == "mine"]
    assert len(mine) == 1 and "nvidiactl" in by, by
    # the assigned GPU passes the cgroup (no driver behind it: ENXIO), another is denied
    assert by[mine[0]][1] != 1, by
    others = [v[1] for k, v in by.items() if v[0] == "other" and k != "nvidiactl"]
    assert others and all(e == 1 for e in others), by  # EPERM
    assert by["nvidiactl"][1] != 1, by


def test_tenants_run_as_their_own_uids():
    """By default (--run-as tenant) each tenant's jobs run as a uid of their own: one
    tenant's job cannot signal another's, read its environment or read its log, and its
    /proc shows only its own user's processes (not another tenant's command line), while
    the host's /proc still shows every process."""
    a = submit({"gpus": 0, "env": {"SECRET": "s3cr3t"},
                "command": sh("echo pid $$; echo a-log-line; exec python3 -c "
                              "'import time; time.sleep(30)' cmdline-s3cr3t")})
    assert wait_log(agent, a, "a-log-line"), agent.task_log(a)
    pid = agent.task_log(a).split()[1]
    logf = os.path.join(agent.dir, "logs", str(a), "task-0.log")
    b = submit({"tenant": "research/vision", "gpus": 0, "command": sh(
        "id -u; kill -0 %s && echo can-signal; grep -a SECRET /proc/%s/environ && echo can-read;"
        " cat %s && echo can-read-log; test -e /proc/%s && echo can-see;"
        " echo cmdlines=$(cat /proc/*/cmdline | tr '\\0' ' ' | grep -c 'cmdline-s3c[r]3t');"
        " test -e /proc/$$ && echo sees-itself; true" % (pid, pid, logf, pid))})
    j = wait_state(b, ("succeeded", "failed"))
    out = agent.task_log(b)
    try:
        assert j["state"] == "succeeded", (j, out)
        assert out.split()[0] == tenant_uid(agent, "research/vision") != \
            tenant_uid(agent, "research/nlp"), out
        assert "can-signal" not in out and "can-read" not in out and "s3cr3t" not in out, out
        assert "a-log-line" not in out, out
        assert "can-see" not in out and "sees-itself" in out, out
        assert "cmdlines=0" in out, out  # no command line it sees holds the other's secret
        assert os.path.exists("/proc/%s" % pid)  # the host's /proc is as it was
        assert expect(dm.req("GET", "/v1/jobs/%d" % a, token=dm.admin), 200)["state"] == \
            "running"
    finally:
        expect(dm.req("POST", "/v1/jobs/%d/cancel" % a, token=dm.admin), 200)


def test_workdir_entered_as_the_jobs_user():
    """The agent enters a job's working directory as the job's user, not as root: a
    world-readable folder below one its user cannot pass stays out of reach, and the error
    is the same whether a path there exists or not (no oracle for root-only folders)."""
    base = fx.tempdir()  # root's, 0700
    sub = os.path.join(base, "sub")
    os.mkdir(sub, 0o755)
    with open(os.path.join(sub, "data.txt"), "w") as f:
        f.write("other-users-data\n")
    os.chmod(os.path.join(sub, "data.txt"), 0o644)
    for wd in (sub, os.path.join(base, "no-such-folder")):
        jid = submit({"gpus": 0, "workdir": wd, "command": sh("cat data.txt")})
        j = wait_state(jid, ("succeeded", "failed"))
        out = agent.task_log(jid)
        assert j["state"] == "failed" and j["exit_code"] == 126, (j, out)
        assert "other-users-data" not in out, out
        assert "allot-agent: workdir %s: Permission denied" % wd in out, out
    os.chmod(base, 0o755)  # now the job's user may pass: the same job runs there
    jid = submit({"gpus": 0, "workdir": sub, "command": sh("cat data.txt")})
    j = wait_state(jid, ("succeeded", "failed"))
    assert j["state"] == "succeeded" and "other-users-data" in agent.task_log(jid), \
        (j, agent.task_log(jid))


def test_private_tmp_and_umask():
    """A job's files are its own: umask 077, and /tmp and /dev/shm of its own (fresh tmpfs,
    mode 1777), so another tenant's job, and the host, never see what it leaves there. The
    agent's state folder and the working directory stay reachable below /tmp. The tasks
    of one job on one node share them (as with Slurm's per-job /tmp), and they are gone
    once its last task there is."""
    name = "allot-iso-%d.txt" % os.getpid()
    host = os.path.join("/tmp", name)
    a = submit({"gpus": 0, "command": sh(
        "umask; echo nlp-data > /tmp/%s; echo nlp-shm > /dev/shm/%s; stat -c 'mode %%a' /tmp;"
        " stat -c 'file %%a' /tmp/%s; echo written; sleep 30" % (name, name, name))})
    try:
        assert wait_log(agent, a, "written"), agent.task_log(a)
        out = agent.task_log(a)
        assert "0077" in out and "mode 1777" in out and "file 600" in out, out
        assert not os.path.exists(host) and not os.path.exists("/dev/shm/" + name), out
        b = submit({"tenant": "research/vision", "gpus": 0, "command": sh(
            "cat /tmp/%s /dev/shm/%s; ls /tmp /dev/shm; echo end" % (name, name))})
        j = wait_state(b, ("succeeded", "failed"))
        out = agent.task_log(b)
        assert j["state"] == "succeeded" and "end" in out, (j, out)
        assert "nlp-data" not in out and "nlp-shm" not in out and name not in out.split(), out
        # Linux 5.8 or later gives each task a /proc of its own (nothing to say); an older
        # kernel shows other tenants' command lines unless the host's /proc hides them:
        # said at start
        rel = tuple(int(x) for x in os.uname().release.split(".")[:2])
        if rel >= (5, 8):
            assert "hidepid" not in agent.log(), agent.log()
        elif "hidepid" not in open("/proc/mounts").read():
            assert "hidepid" in agent.log(), agent.log()
        # two tasks of one job on this node: what one leaves in /tmp and /dev/shm the other
        # reads (a transport through /dev/shm, such as NCCL's, works between them)
        g = submit({"gpus": 0, "tasks": 2, "cpus": 0.25, "command": sh(
            "if [ $ALLOT_TASK_INDEX = 0 ]; then echo tmp-of-0 > /tmp/t0; echo shm-of-0 > "
            "/dev/shm/s0; sleep 3; else for i in $(seq 1 50); do [ -e /dev/shm/s0 ] && break;"
            " sleep 0.1; done; cat /tmp/t0 /dev/shm/s0; fi")})
        j = wait_state(g, ("succeeded", "failed"))
        assert j["state"] == "succeeded", j
        nodes = {t["node"] for t in j["placement"]["tasks"]}
        log1 = open(os.path.join(agent.dir, "logs", str(g), "task-1.log")).read()
        assert nodes == {"ag-1"} and "tmp-of-0\nshm-of-0\n" in log1, (nodes, log1)
        # where the job's folders are kept on the host only the agent may enter, so that no
        # other job looks into them there
        assert os.stat(os.path.join(agent.dir, "jobfs")).st_mode & 0o777 == 0o700
        end = time.time() + 5
        jobfs = os.path.join(agent.dir, "jobfs", str(g))
        while time.time() < end and os.path.exists(jobfs):
            time.sleep(0.05)
        assert not os.path.exists(jobfs) and jobfs not in open("/proc/mounts").read()
    finally:
        expect(dm.req("POST", "/v1/jobs/%d/cancel" % a, token=dm.admin), 200)
        for p in (host, "/dev/shm/" + name):
            if os.path.exists(p):
                os.unlink(p)


def whole_disk():
    """MAJ:MIN of a whole block device of this machine (sysfs), or None."""
    for name in sorted(os.listdir("/sys/block")):
        try:
            with open("/sys/block/%s/dev" % name) as f:
                return f.read().strip()
        except OSError:
            pass
    return None


def test_io_limits():
    """--io-max gives every task block I/O limits: the task's cgroup holds them (io.max on
    cgroup v2, the blkio throttling files on v1), and a bad spec stops the agent at start,
    naming it."""
    r = subprocess.run([fx.AGENT, "--server", "http://127.0.0.1:1", "--token", "x",
                        "--io-max", "8:0 speed=1"], capture_output=True, text=True, timeout=20)
    assert r.returncode == 2 and "--io-max 8:0: \"speed=1\"" in r.stderr, r
    r = subprocess.run([fx.AGENT, "--server", "http://127.0.0.1:1", "--token", "x",
                        "--io-max", "4095:4095 rbps=1"], capture_output=True, text=True, timeout=20)
    assert r.returncode == 2 and "no such block device" in r.stderr, r
    disk = whole_disk()
    assert disk, "no block device in /sys/block"
    ag = Agent(dm, AG, "ag-io", emulate="1xT4",
               args=["--io-max", "%s rbps=1M wiops=100" % disk])
    wait_node("ag-io")
    try:
        jid = submit({"gpu_models": ["T4"], "command": sh("echo up; sleep 30")})
        assert wait_log(ag, jid, "up"), (ag.log(), ag.task_log(jid))
        key = "%d-0" % jid
        v2 = os.path.exists("/sys/fs/cgroup/cgroup.controllers")
        if v2:
            with open("/sys/fs/cgroup/%s/%s/io.max" % (fx.CGROUP_ROOT, key)) as f:
                got = f.read()
            assert "%s rbps=1048576 wbps=max riops=max wiops=100" % disk in got, got
        else:
            base = "/sys/fs/cgroup/blkio/%s/%s/" % (fx.CGROUP_ROOT, key)
            with open(base + "blkio.throttle.read_bps_device") as f:
                assert f.read().split() == [disk, "1048576"]
            with open(base + "blkio.throttle.write_iops_device") as f:
                assert f.read().split() == [disk, "100"]
            with open(base + "cgroup.procs") as f:
                assert f.read().split(), "the task is not in its blkio cgroup"
        expect(dm.req("POST", "/v1/jobs/%d/cancel" % jid, token=dm.admin), 200)
        wait_state(jid, ("cancelled",))
        end = time.time() + 10
        while time.time() < end and os.path.exists(
                "/sys/fs/cgroup/%s/%s/%s" % ("" if v2 else "blkio", fx.CGROUP_ROOT, key)):
            time.sleep(0.1)
        assert not os.path.exists(
            "/sys/fs/cgroup/%s/%s/%s" % ("" if v2 else "blkio", fx.CGROUP_ROOT, key))
    finally:
        ag.stop()
        expect(dm.req("POST", "/v1/nodes/ag-io/cordon", token=dm.admin), 200)


def test_log_max():
    """--log-max caps a task's log: a job writing past it cannot grow its log beyond it (the
    rest of its output is read and dropped, the job goes on), and the log's last line says
    why."""
    ag = Agent(dm, AG, "ag-logcap", emulate="1xH100-80GB", args=["--log-max", "64K"])
    try:
        wait_node("ag-logcap")
        jid = submit({"gpu_models": ["H100-80GB"], "command": sh(
            "echo first; head -c 3000000 /dev/zero | tr '\\0' x; echo; echo past-the-cap >&2;"
            " exit 0")})
        j = wait_state(jid, ("succeeded", "failed"), timeout=30)
        path = os.path.join(ag.dir, "logs", str(jid), "task-0.log")
        out = ag.task_log(jid)
        assert j["state"] == "succeeded", (j, out[-300:])
        assert os.path.getsize(path) <= 64 * 1024, os.path.getsize(path)
        assert out.startswith("first\n") and "past-the-cap" not in out, out[-300:]
        assert out.rstrip().endswith("(--log-max): the rest of the task's output is discarded"), \
            out[-300:]
        assert "cap of 65536 bytes" in out, out[-300:]
    finally:
        ag.stop()
        expect(dm.req("POST", "/v1/nodes/ag-logcap/cordon", token=dm.admin), 200)


def test_root_refused():
    m = os.path.join(fx.tempdir(), "users")
    with open(m, "w") as f:
        f.write("# tenant user\nresearch root\nresearch/nlp nobody\n"
                "@research/vision:alice 4242:4242\n@research/vision:bob nobody:nogroup\n"
                "@research/vision:carol 4243:nogroup\n@research/vision:dave nobody:nosuchgroup\n"
                "@mallory 4244 allow-root\n")
    ag2 = Agent(dm, AG, "ag-root", emulate="1xT4", args=["--user-map", m])
    try:
        # only ag-root has a T4; research/vision maps to root (its parent's line)
        jid = submit({"tenant": "research/vision", "gpu_models": ["T4"],
                      "command": sh("id -u")})
        j = wait_state(jid, ("succeeded", "failed"))
        assert j["placement"]["tasks"][0]["node"] == "ag-root", j
        assert j["state"] == "failed" and "as root" in j["pending_reason"], j
        # the reason is the task's output: allot logs and allot run show it
        r = ok(cli(dm, "logs", jid))
        assert "not started on node ag-root" in r.out and "as root" in r.out, r
        r = cli(dm, "run", "-t", "research/vision", "-g", "1", "--gpu-model", "T4", "--", "id",
                "-u")
        assert r.rc == 1 and "not started on node ag-root" in r.out, r
        assert "failed: " in r.err and "as root" in r.err and "no_log" not in r.err, r
        # the longer prefix wins: research/nlp runs as nobody there
        jid = submit({"gpu_models": ["T4"], "command": sh("id -u")})
        j = wait_state(jid, ("succeeded", "failed"))
        assert j["state"] == "succeeded" and "65534" in ag2.task_log(jid), j
        # a submitting user's line (the token's name) wins over the tenant's
        alice = dm.token("member", "research/vision", "alice")
        jid = expect(dm.req("POST", "/v1/jobs", {"tenant": "research/vision", "gpus": 1,
                                                 "gpu_models": ["T4"], "command": sh("id -u")},
                            token=alice), 201)["id"]
        j = wait_state(jid, ("succeeded", "failed"))
        assert j["state"] == "succeeded" and ag2.task_log(jid).strip() == "4242", \
            (j, ag2.task_log(jid))
        # a user line names the token's tenant scope too: another tenant's token of the same
        # name, or a scoped token named like a cluster-wide one, does not get its user
        for scope, name in (("research/nlp", "alice"), ("research/nlp", "mallory")):
            tok = dm.token("member", scope, name)
            jid = expect(dm.req("POST", "/v1/jobs", {"tenant": "research/nlp", "gpus": 1,
                                                     "gpu_models": ["T4"],
                                                     "command": sh("id -u")},
                                token=tok), 201)["id"]
            j = wait_state(jid, ("succeeded", "failed"))
            assert j["state"] == "succeeded" and ag2.task_log(jid).strip() == "65534", \
                (scope, name, j, ag2.task_log(jid))
        # USER:GROUP, each a name or a number; an unknown group is refused
        gid = str(grp.getgrnam("nogroup").gr_gid)
        for name, want in (("bob", "65534 " + gid), ("carol", "4243 " + gid)):
            tok = dm.token("member", "research/vision", name)
            jid = expect(dm.req("POST", "/v1/jobs", {"tenant": "research/vision", "gpus": 1,
                                                     "gpu_models": ["T4"],
                                                     "command": sh("echo $(id -u) $(id -g)")},
                                token=tok), 201)["id"]
            j = wait_state(jid, ("succeeded", "failed"))
            assert j["state"] == "succeeded" and ag2.task_log(jid).strip() == want, \
                (name, j, ag2.task_log(jid))
        dave = dm.token("member", "research/vision", "dave")
        jid = expect(dm.req("POST", "/v1/jobs", {"tenant": "research/vision", "gpus": 1,
                                                 "gpu_models": ["T4"], "command": sh("id -u")},
                            token=dave), 201)["id"]
        j = wait_state(jid, ("succeeded", "failed"))
        assert j["state"] == "failed" and \
            'no user or group "nobody:nosuchgroup"' in j["pending_reason"], j
    finally:
        ag2.stop()
        # its agent is gone: no later job may land there
        expect(dm.req("POST", "/v1/nodes/ag-root/cordon", token=dm.admin), 200)


def test_cancel_stops_with_grace():
    jid = submit({"command": sh("trap 'echo got TERM; exit 0' TERM; echo started; "
                                "sleep 100 & wait")})
    wait_state(jid, ("running",))
    assert wait_log(agent, jid, "started")  # its trap is set: "running" may come before
    expect(dm.req("POST", "/v1/jobs/%d/cancel" % jid, token=dm.admin), 200)
    end = time.time() + 10
    while time.time() < end and "got TERM" not in agent.task_log(jid):
        time.sleep(0.05)
    assert "got TERM" in agent.task_log(jid), agent.task_log(jid)
    # a job that ignores SIGTERM is killed after the grace (2 s here)
    jid = submit({"command": sh("trap '' TERM; echo started; while :; do sleep 0.1; done")})
    wait_state(jid, ("running",))
    assert wait_log(agent, jid, "started")
    expect(dm.req("POST", "/v1/jobs/%d/cancel" % jid, token=dm.admin), 200)
    task_dir = os.path.join(agent.dir, "tasks", "%d-0" % jid)
    end = time.time() + 10
    while time.time() < end and os.path.isdir(task_dir):
        time.sleep(0.1)
    assert not os.path.isdir(task_dir), "task not stopped within the grace"


def test_nvml_discovery():
    """Without --emulate the GPUs come from NVML (here the fake libnvidia-ml of tests/fake)."""
    lib = os.path.join(os.path.dirname(fx.AGENT), "fake-nvml", "libnvidia-ml.so.1")
    conf = os.path.join(fx.tempdir(), "machine")
    with open(conf, "w") as f:
        f.write('gpu name="NVIDIA H100 80GB HBM3" mem=81559 uuid=GPU-aaaa minor=0\n'
                'gpu name="NVIDIA H100 80GB HBM3" mem=81559 uuid=GPU-bbbb minor=1\n'
                'gpu name="NVIDIA H100 80GB HBM3" mem=81559 uuid=GPU-cccc minor=2 ecc=3\n'
                'gpu name="Mystery GPU" mem=1000 uuid=GPU-dddd minor=3\n')
    ag = Agent(dm, AG, "ag-nvml", emulate="", args=["--nvml-lib", lib],
               env={"FAKE_NVML_CONFIG": conf})
    try:
        node = None
        for _ in range(100):
            nodes = expect(dm.req("GET", "/v1/nodes", token=dm.admin), 200)["nodes"]
            node = ([n for n in nodes if n["name"] == "ag-nvml"] or [None])[0]
            if node:
                break
            time.sleep(0.05)
        assert node, ag.log()
        gpus = node["inventory"]["gpus"]
        # the unhealthy one (uncorrectable ECC) and the unknown model are not offered
        assert gpus == [{"model": "H100-80GB", "uuid": "GPU-aaaa"},
                        {"model": "H100-80GB", "uuid": "GPU-bbbb"}], (gpus, ag.log())
        assert "unhealthy" in ag.log() and "no catalog model" in ag.log(), ag.log()
        # --print-inventory shows the same without registering
        r = subprocess.run([fx.AGENT, "--print-inventory", "--nvml-lib", lib, "--state-dir",
                            fx.tempdir()], capture_output=True, text=True, timeout=20,
                           env=dict(os.environ, FAKE_NVML_CONFIG=conf))
        inv = json.loads(r.stdout)
        assert inv["register"]["gpus"] == gpus and len(inv["health"]) == 2, r
        # the same options from a config file (--config), quoted values with comments
        cf = os.path.join(fx.tempdir(), "agent.conf")
        with open(cf, "w") as f:
            f.write('# allot-agent\nnvml-lib "%s"  # the fake NVML\nstate-dir %s\n'
                    % (lib, fx.tempdir()))
        r = subprocess.run([fx.AGENT, "--config", cf, "--print-inventory"], capture_output=True,
                           text=True, timeout=20, env=dict(os.environ, FAKE_NVML_CONFIG=conf))
        assert r.returncode == 0 and json.loads(r.stdout)["register"]["gpus"] == gpus, r
        with open(cf, "a") as f:
            f.write("gpu-mode sometimes\n")
        r = subprocess.run([fx.AGENT, "--config", cf, "--print-inventory"], capture_output=True,
                           text=True, timeout=20)
        assert r.returncode == 2 and "agent.conf:4: " in r.stderr and "gpu-mode" in r.stderr, r
        r = subprocess.run([fx.AGENT, "--print-inventory", "stray"], capture_output=True,
                           text=True, timeout=20)
        assert r.returncode == 2 and 'unexpected argument "stray"' in r.stderr, r
        # allotd appends the log's path to --advertise: what would change it is refused here
        r = subprocess.run([fx.AGENT, "--print-inventory", "--emulate", "1xL4", "--state-dir",
                            fx.tempdir(), "--advertise", "http://h:1/x?a"], capture_output=True,
                           text=True, timeout=20)
        assert r.returncode == 2 and "--advertise: want http(s)://" in r.stderr, r
        r = subprocess.run([fx.AGENT, "--print-inventory", "--listen", "foo"],
                           capture_output=True, text=True, timeout=20)
        assert r.returncode == 2 and 'listen: "foo" is not IPV4:PORT' in r.stderr, r
        # allotd registers one model per node: a mixed emulation is refused here
        r = subprocess.run([fx.AGENT, "--print-inventory", "--emulate", "1xH100-80GB,1xL4",
                            "--state-dir", fx.tempdir()], capture_output=True, text=True,
                           timeout=20)
        assert r.returncode == 2 and "one model" in r.stderr, r
        r = subprocess.run([fx.AGENT, "--print-inventory", "--emulate", "3xNOPE"],
                           capture_output=True, text=True, timeout=20)
        assert r.returncode == 2 and 'unknown GPU model "NOPE"' in r.stderr, r
        # NVLink islands (pairs here) and an Xid that needs a reset
        with open(conf, "w") as f:
            for i in range(4):
                f.write('gpu name="NVIDIA H100 80GB HBM3" mem=81559 uuid=GPU-%d minor=%d\n'
                        % (i, i))
            f.write("nvlink 0 1 4\nnvlink 2 3 4\nxid 1 79\n")
        r = subprocess.run([fx.AGENT, "--print-inventory", "--nvml-lib", lib, "--state-dir",
                            fx.tempdir()], capture_output=True, text=True, timeout=20,
                           env=dict(os.environ, FAKE_NVML_CONFIG=conf))
        inv = json.loads(r.stdout)
        assert inv["register"]["island_size"] == 2, inv
        h = {g["index"]: g for g in inv["health"]}
        assert h[1]["health"] == "unhealthy" and "Xid 79" in h[1]["text"], h
        assert h[0]["health"] == "healthy", h
    finally:
        ag.stop()
        expect(dm.req("POST", "/v1/nodes/ag-nvml/cordon", token=dm.admin), 200)


def test_mig_instances_not_allots():
    """A MIG instance no task of the agent holds (made by hand before allot came) is
    destroyed at the agent's start, so the slots the scheduler counts as free are; one a
    process uses cannot be, and its GPU is reported unhealthy, saying why."""
    lib = os.path.join(os.path.dirname(fx.AGENT), "fake-nvml", "libnvidia-ml.so.1")
    conf = os.path.join(fx.tempdir(), "machine")
    with open(conf, "w") as f:
        f.write('gpu name="NVIDIA A30" mem=24576 uuid=GPU-a30a minor=0 mig=on\n'
                'gpu name="NVIDIA A30" mem=24576 uuid=GPU-a30b minor=1 mig=on\n'
                "gi 0 0 0\n"       # GPU 0: a 1g slice at 0 (instance 1), idle
                "gi 1 0 1\n"       # GPU 1: a 1g slice at 1 (instance 1), in use
                "proc 1 4242 100 1 0\n")
    ag = Agent(dm, AG, "ag-fmig2", emulate="", args=["--nvml-lib", lib, "--gpu-mode", "mig"],
               env={"FAKE_NVML_CONFIG": conf})
    try:
        wait_node("ag-fmig2")
        log = ag.log()
        assert "GPU 0: MIG instance 1 (1g.6gb at 0) destroyed" in log, log
        assert "GPU 1: MIG instance 1 (1g.6gb at 1) is not allot's and cannot be destroyed" \
            in log, log
        end = time.time() + 10
        gpus = []
        while time.time() < end:  # the heartbeat carries the health
            n = [x for x in expect(dm.req("GET", "/v1/nodes", token=dm.admin), 200)["nodes"]
                 if x["name"] == "ag-fmig2"][0]
            gpus = (n.get("health") or {}).get("gpus") or []
            if len(gpus) == 2:
                break
            time.sleep(0.1)
        assert [g["health"] for g in gpus] == ["healthy", "unhealthy"], gpus
        assert gpus[0]["mig"] == [] and "not allot's" in gpus[1]["text"], gpus
        time.sleep(2.5)  # looked at again every 5 heartbeats (1 s): logged once
        assert ag.log().count("is not allot's and cannot be destroyed") == 1, ag.log()
    finally:
        ag.stop()
        expect(dm.req("POST", "/v1/nodes/ag-fmig2/cordon", token=dm.admin), 200)
    # a record the agent cannot read: nothing is destroyed on a guess, the GPU is
    # unhealthy; once the folder is gone (its task vanished), the slice is destroyed
    with open(conf, "w") as f:
        f.write('gpu name="NVIDIA A30" mem=24576 uuid=GPU-a30d minor=0 mig=on\n'
                "gi 0 0 0\n")
    state = fx.tempdir()
    os.makedirs(os.path.join(state, "tasks", "999999-0", "mig"))
    ag = Agent(dm, AG, "ag-fmig4", emulate="", state_dir=state,
               args=["--nvml-lib", lib, "--gpu-mode", "mig"], env={"FAKE_NVML_CONFIG": conf})
    try:
        wait_node("ag-fmig4")
        end = time.time() + 10
        while time.time() < end and "destroyed: no task" not in ag.log():
            time.sleep(0.1)
        log = ag.log()
        told = log.find("cannot tell whether a task holds MIG instance 1 (1g.6gb at 0): ")
        assert told >= 0 and "999999-0/mig: Is a directory" in log, log
        assert log.find("GPU 0: MIG instance 1 (1g.6gb at 0) destroyed", told) > told, log
    finally:
        ag.stop()
        expect(dm.req("POST", "/v1/nodes/ag-fmig4/cordon", token=dm.admin), 200)
    # a slice whose user goes away (its destroy refused once, then not) is destroyed at a
    # later try, and its GPU is healthy again without a restart
    with open(conf, "w") as f:
        f.write('gpu name="NVIDIA A30" mem=24576 uuid=GPU-a30c minor=0 mig=on\n'
                "gi 0 0 2\n"
                "fail nvmlComputeInstanceDestroy 0 NVML_ERROR_IN_USE 1\n")
    ag = Agent(dm, AG, "ag-fmig3", emulate="", args=["--nvml-lib", lib, "--gpu-mode", "mig"],
               env={"FAKE_NVML_CONFIG": conf})
    try:
        wait_node("ag-fmig3")
        end = time.time() + 10
        while time.time() < end and "GPU 0: MIG instance 1 (1g.6gb at 2) destroyed" \
                not in ag.log():
            time.sleep(0.1)
        log = ag.log()
        assert "cannot be destroyed" in log and \
            "GPU 0: MIG instance 1 (1g.6gb at 2) destroyed" in log, log
        end = time.time() + 10
        gpus = []
        while time.time() < end:
            n = [x for x in expect(dm.req("GET", "/v1/nodes", token=dm.admin), 200)["nodes"]
                 if x["name"] == "ag-fmig3"][0]
            gpus = (n.get("health") or {}).get("gpus") or []
            if gpus and gpus[0]["health"] == "healthy":
                break
            time.sleep(0.1)
        assert [g["health"] for g in gpus] == ["healthy"], gpus
    finally:
        ag.stop()
        expect(dm.req("POST", "/v1/nodes/ag-fmig3/cordon", token=dm.admin), 200)


def test_mig():
    """MIG tasks see their instance's UUID: made up on emulated GPUs; created with NVML at
    the scheduler's placement (here the fake libnvidia-ml) and destroyed after the task.
    A task may open its own instance's capability devices and no other instance's; where
    the driver lists no capability devices (the fake NVML node here) a MIG task fails
    rather than run unisolated, and its instance is destroyed."""
    ag = Agent(dm, AG, "ag-mig", emulate="1xA100-80GB", args=["--gpu-mode", "mig"])
    lib = os.path.join(os.path.dirname(fx.AGENT), "fake-nvml", "libnvidia-ml.so.1")
    conf = os.path.join(fx.tempdir(), "machine")
    with open(conf, "w") as f:
        f.write('gpu name="NVIDIA A30" mem=24576 uuid=GPU-a30 minor=0 mig=on\n'
                "fail nvmlComputeInstanceDestroy 0 NVML_ERROR_IN_USE 1\n")
    ag2 = Agent(dm, AG, "ag-fmig", emulate="", args=["--nvml-lib", lib, "--gpu-mode", "mig"],
                env={"FAKE_NVML_CONFIG": conf})
    wait_node("ag-mig")
    wait_node("ag-fmig")
    try:
        a = submit({"mig": "1g.10gb", "gpu_models": ["A100-80GB"],
                    "command": sh("echo cvd=$CUDA_VISIBLE_DEVICES")})
        b = submit({"mig": "2g.12gb", "gpu_models": ["A30-24GB"],
                    "command": sh("echo cvd=$CUDA_VISIBLE_DEVICES; sleep 0.5")})
        j = wait_state(a, ("succeeded", "failed"))
        assert j["state"] == "succeeded", (j, ag.log())
        assert j["placement"]["tasks"][0]["mig_profile"], j
        assert ag.task_log(a).startswith("cvd=MIG-"), ag.task_log(a)
        j = wait_state(b, ("succeeded", "failed"))
        assert j["state"] == "failed" and j["placement"]["tasks"][0]["mig_profile"], j
        assert "no nvidia-caps device in /proc/devices" in j["pending_reason"], j
        assert "MIG 2g.12gb at" in ag2.log(), ag2.log()
        # its destroy refused once, the GPU is marked until a later look destroys it
        end = time.time() + 5
        while time.time() < end and "destroyed: no task" not in ag2.log():
            time.sleep(0.1)
        log = ag2.log()
        left = log.find("no task's any more, cannot be destroyed")
        assert left >= 0 and log.find(") destroyed: no task", left) > left, log
        # allot nodes: the health and MIG layout the agents report
        long = submit({"mig": "1g.10gb", "gpu_models": ["A100-80GB"], "command": sh("sleep 30")})
        wait_state(long, ("running",))
        time.sleep(1.2)  # a heartbeat carries the new layout
        rows = [l.split() for l in cli(dm, "nodes", "--gpus", "ag-mig").out.splitlines()]
        assert rows[0][:6] == ["NODE", "GPU", "MODEL", "UUID", "HEALTH", "MIG"], rows
        assert rows[1][0] == "ag-mig" and rows[1][4] == "healthy", rows
        assert rows[1][5].startswith("1g.10gb@"), rows
        n = [x for x in cli(dm, "nodes", "-o", "json").json() if x["name"] == "ag-mig"][0]
        assert n["health"]["gpus"][0]["mig"][0]["profile"] == "1g.10gb", n
        assert "ok" in cli(dm, "nodes", "ag-mig").out
        # beside it, a task opens every capability device there is: its own two pass the
        # device rules (no driver behind them: ENXIO), the other instance's are denied
        probe = ("import os\n"
                 "mine = [p for p in os.environ['ALLOT_GPU_DEVICES'].split(',') if 'caps' in p]\n"
                 "d = os.path.dirname(mine[0])\n"
                 "for p in sorted(os.listdir(d)):\n"
                 "    path = os.path.join(d, p)\n"
                 "    try:\n"
                 "        os.close(os.open(path, os.O_RDONLY)); e = 0\n"
                 "    except OSError as x:\n"
                 "        e = x.errno\n"
                 "    print('cap', p, 'mine' if path in mine else 'other', e)\n")
        c = submit({"mig": "1g.10gb", "gpu_models": ["A100-80GB"],
                    "command": ["python3", "-c", probe]})
        j = wait_state(c, ("succeeded", "failed"))
        assert j["state"] == "succeeded", (j, ag.log(), ag.task_log(c))
        rows = [l.split()[1:] for l in ag.task_log(c).splitlines() if l.startswith("cap ")]
        mine = [r for r in rows if r[1] == "mine"]
        other = [r for r in rows if r[1] == "other"]
        assert len(mine) == 2 and all(int(r[2]) not in (0, 1) for r in mine), rows
        assert len(other) >= 2 and all(int(r[2]) == 1 for r in other), rows  # EPERM
        expect(dm.req("POST", "/v1/jobs/%d/cancel" % long, token=dm.admin), 200)
    finally:
        ag.stop()
        ag2.stop()
        for n in ("ag-mig", "ag-fmig"):
            expect(dm.req("POST", "/v1/nodes/%s/cordon" % n, token=dm.admin), 200)


def busybox_image(root):
    """A root file system of busybox (Debian's busybox-static): IMAGE-DIR/bb."""
    fs = os.path.join(root, "bb")
    os.makedirs(os.path.join(fs, "bin"))
    for d in ("proc", "sys", "dev", "tmp", "etc"):
        os.makedirs(os.path.join(fs, d))
    shutil.copy("/bin/busybox", os.path.join(fs, "bin", "busybox"))
    for tool in ("sh", "echo", "id", "ls", "cat", "sleep", "hostname", "test"):
        os.symlink("busybox", os.path.join(fs, "bin", tool))
    return root


def test_oci_image():
    """A job naming an image runs in a crun container of that root file system: its own
    view of the files and processes, its user, its GPU device only, the job's cgroup."""
    if not shutil.which("crun") or not os.path.exists("/bin/busybox"):
        raise AssertionError("crun and busybox-static are needed (scripts/install-deps)")
    images = busybox_image(fx.tempdir())
    os.chmod(images, 0o755)
    ag = Agent(dm, AG, "ag-oci", emulate="2xA10-24GB", args=["--image-dir", images])
    wait_node("ag-oci")
    try:
        jid = submit({"image": "bb", "gpu_models": ["A10-24GB"], "env": {"GREETING": "hi"},
                      "command": ["sh", "-c", "echo $GREETING; id -u; hostname; ls /dev; "
                                              "ls / ; test -e /work && echo host-visible; "
                                              "echo pid=$$; umask; exit 4"]})
        j = wait_state(jid, ("succeeded", "failed"))
        out = ag.task_log(jid)
        assert j["exit_code"] == 4, (j, out, ag.log())
        lines = out.split()
        assert lines[0] == "hi" and lines[1] == tenant_uid(ag, "research/nlp") and \
            lines[2] == "allot-job", out
        gpu_devs = [w for w in lines if w.startswith("nvidia") and w != "nvidiactl"]
        assert len(gpu_devs) == 1 and "nvidiactl" in lines, out
        assert "host-visible" not in out and "pid=1" in out and "0077" in lines, out
        # two tasks of one job in images on one node share the job's /tmp and /dev/shm
        g = submit({"image": "bb", "tasks": 2, "cpus": 0.25, "gpu_models": ["A10-24GB"],
                    "command": ["sh", "-c", "if test $ALLOT_TASK_INDEX = 0; then echo tmp-of-0 > "
                                "/tmp/t0; echo shm-of-0 > /dev/shm/s0; sleep 3; else i=0; while "
                                "test $i -lt 50 && ! test -e /dev/shm/s0; do sleep 0.1; "
                                "i=$((i+1)); done; cat /tmp/t0 /dev/shm/s0; fi"]})
        j = wait_state(g, ("succeeded", "failed"))
        log1 = open(os.path.join(ag.dir, "logs", str(g), "task-1.log")).read()
        assert j["state"] == "succeeded" and "tmp-of-0\nshm-of-0\n" in log1, (j, log1)
        # an image that is not there fails the job with the reason
        jid = submit({"image": "nope", "gpu_models": ["A10-24GB"], "command": ["true"]})
        j = wait_state(jid, ("succeeded", "failed"))
        assert j["state"] == "failed" and "no root file system" in j["pending_reason"], j
        # a name no node takes is refused at once (the agent checks again: a job
        # stored before allotd did)
        b = expect(dm.req("POST", "/v1/jobs", {"tenant": "research/nlp", "image": "../etc",
                                               "command": ["true"]}, token=dm.admin), 422)
        assert "is not an image name" in b["error"]["message"], b
        # cancel reaches the process in the container
        jid = submit({"image": "bb", "gpu_models": ["A10-24GB"],
                      "command": ["sh", "-c", "trap 'echo got TERM; exit 0' TERM; echo up; "
                                              "sleep 100 & wait"]})
        wait_state(jid, ("running",))
        end = time.time() + 10
        while time.time() < end and "up" not in ag.task_log(jid):
            time.sleep(0.05)
        expect(dm.req("POST", "/v1/jobs/%d/cancel" % jid, token=dm.admin), 200)
        end = time.time() + 10
        while time.time() < end and "got TERM" not in ag.task_log(jid):
            time.sleep(0.05)
        assert "got TERM" in ag.task_log(jid), (ag.task_log(jid), ag.log())
    finally:
        ag.stop()
        expect(dm.req("POST", "/v1/nodes/ag-oci/cordon", token=dm.admin), 200)


def glibc_image(root, prog, *more):
    """A root file system IMAGE-DIR/cu holding prog (a dynamically linked program of this
    machine) and the shared libraries it and more (libraries the container is given) load,
    from this machine's C library (and a sanitizer's runtime, in that build), and nothing
    of the driver."""
    fs = os.path.join(root, "cu")
    for d in ("proc", "sys", "dev", "tmp", "bin"):
        os.makedirs(os.path.join(fs, d))
    shutil.copy(prog, os.path.join(fs, "bin", os.path.basename(prog)))
    libs = set()
    for f in (prog,) + more:
        out = subprocess.run(["ldd", f], capture_output=True, text=True).stdout
        for line in out.splitlines():
            words = line.split()
            path = words[2] if len(words) > 2 and words[1] == "=>" else words[0]
            if path.startswith("/") and "fake-cuda" not in path:
                libs.add(path)
    for lib in libs:
        os.makedirs(os.path.dirname(fs + lib), exist_ok=True)
        shutil.copy(os.path.realpath(lib), fs + lib)
    return root


def test_oci_gpu_fraction():
    """A GPU job in an image gets the node's driver libraries (in /usr/local/nvidia/lib64, on
    LD_LIBRARY_PATH; here the fake libcuda) and, on a fraction, the shim with its region:
    inside the container the fraction's GPU memory cap holds (an allocation past it is
    refused) and its use is metered, as for a process."""
    job = os.path.join(os.path.dirname(fx.AGENT), "fake-cuda-job")
    lib = os.path.join(os.path.dirname(fx.AGENT), "fake-cuda", "libcuda.so.1")
    shim_lib = os.path.join(os.path.dirname(fx.AGENT), "liballot-cuda.so")
    asan = b"libasan" in subprocess.run(["ldd", shim_lib], capture_output=True).stdout
    images = glibc_image(fx.tempdir(), job, lib)
    os.chmod(images, 0o755)
    ag = Agent(dm, AG, "ag-ocif", emulate="1xA10-24GB",
               args=["--image-dir", images, "--gpu-mode", "shared", "--driver-libs", lib,
                     "--shim-lib", "/nonexistent" if asan else shim_lib,
                     "--sample-interval", "200ms"])
    wait_node("ag-ocif")
    env = {"FAKE_CUDA_UUIDS": "GPU-11111111-2222-3333-4444-555555555555"}
    try:
        t0 = int(time.time()) - 1
        small = submit({"image": "cu", "gpus": None, "gpu_milli": 500, "gpu_memory": 1024,
                        "gpu_models": ["A10-24GB"], "env": env,
                        "command": ["/bin/fake-cuda-job", "1048576", "1"]})
        j = wait_state(small, ("succeeded", "failed"), timeout=60)
        assert j["state"] == "succeeded", (j, ag.task_log(small), ag.log())
        assert "alloc 0" in ag.task_log(small), ag.task_log(small)
        if asan:
            return
        rows, r = job_usage(small, t0)
        assert r and r[0]["gpu_memory_peak_bytes"] == 1048576 + (300 << 20), \
            (rows, ag.task_log(small))
        # past the 1024 MiB cap (with the context's 300Mi): refused, out of memory (2)
        big = submit({"image": "cu", "gpus": None, "gpu_milli": 500, "gpu_memory": 1024,
                      "gpu_models": ["A10-24GB"], "env": env,
                      "command": ["/bin/fake-cuda-job", str(900 << 20), "0"]})
        j = wait_state(big, ("succeeded", "failed"), timeout=60)
        assert "alloc 2" in ag.task_log(big), (j, ag.task_log(big))
        # a whole GPU in an image: the driver, no shim
        whole = submit({"image": "cu", "gpu_models": ["A10-24GB"], "env": env,
                        "command": ["/bin/fake-cuda-job", str(900 << 20), "0"]})
        j = wait_state(whole, ("succeeded", "failed"), timeout=60)
        assert "alloc 0" in ag.task_log(whole), (j, ag.task_log(whole))
    finally:
        ag.stop()
        expect(dm.req("POST", "/v1/nodes/ag-ocif/cordon", token=dm.admin), 200)


def fake_a30_agent(name, args=()):
    """An agent on one fake A30 (fake NVML and CUDA, whose log says what was cleared):
    (the agent, registered; the GPU's UUID; the CUDA log's path)."""
    build = os.path.dirname(fx.AGENT)
    uuid = "GPU-11111111-2222-3333-4444-555555555555"
    tmp = fx.tempdir()
    conf, clog = os.path.join(tmp, "machine"), os.path.join(tmp, "cuda.log")
    with open(conf, "w") as f:
        f.write('gpu name="NVIDIA A30" mem=24576 uuid=%s minor=0\n' % uuid)
    env = {"FAKE_NVML_CONFIG": conf, "FAKE_CUDA_UUIDS": uuid, "FAKE_CUDA_MEM_MIB": "512",
           "FAKE_CUDA_LOG": clog}
    ag = Agent(dm, AG, name, emulate="", env=env, args=[
        "--nvml-lib", os.path.join(build, "fake-nvml", "libnvidia-ml.so.1"),
        "--cuda-lib", os.path.join(build, "fake-cuda", "libcuda.so.1")] + list(args))
    wait_node(name)
    return ag, uuid, clog


def test_scrub_between_tenants():
    """A GPU passing to another tenant is cleared first (the fake CUDA driver logs what was
    set to zero); the same tenant again is not; a GPU that cannot be cleared is not handed
    over."""
    ag, uuid, clog = fake_a30_agent("ag-scrub")

    def run(tenant):
        jid = submit({"tenant": tenant, "gpu_models": ["A30-24GB"], "command": sh("true")})
        return wait_state(jid, ("succeeded", "failed"))

    def cleared():
        if not os.path.exists(clog):
            return []
        return [int(l.split()[2]) for l in open(clog) if l.startswith("done " + uuid)]

    try:
        assert run("research/nlp")["state"] == "succeeded"
        assert cleared() == [512], (cleared(), ag.log())  # first use: unknown before
        assert run("research/nlp")["state"] == "succeeded"
        assert cleared() == [512], cleared()  # same tenant: not again
        assert run("research/vision")["state"] == "succeeded"
        assert cleared() == [512, 512], cleared()
        assert "scrubbed 512 MiB" in ag.log() and "research/nlp -> research/vision" in ag.log()
        # a restarted agent remembers the last tenant (STATE/gpu-tenants)
        ag.stop()
        ag.start()
        assert run("research/vision")["state"] == "succeeded"
        assert cleared() == [512, 512], cleared()
        # the driver fails: the GPU is not handed to the next tenant
        ag.stop()
        ag.env = dict(ag.env, FAKE_CUDA_FAIL="memset")
        ag.start()
        j = run("research/nlp")
        assert j["state"] == "failed" and "could not be cleared" in j["pending_reason"], j
    finally:
        ag.stop()
        expect(dm.req("POST", "/v1/nodes/ag-scrub/cordon", token=dm.admin), 200)


def test_scrub_after_a_shared_gpu():
    """A GPU two tenants' fractions shared is cleared before its next task, whichever
    tenant's: the first tenant, back on it alone, does not find what the other left. The
    mark (`mixed` in STATE/gpu-tenants) outlives a restart of the agent."""
    ag, uuid, clog = fake_a30_agent("ag-mixed", ["--gpu-mode", "shared",
                                                 "--shim-lib", "/nonexistent"])

    def job(tenant, cmd, **kw):
        return submit(dict({"tenant": tenant, "gpus": None, "gpu_models": ["A30-24GB"],
                            "command": cmd}, **kw))

    def cleared():
        if not os.path.exists(clog):
            return 0
        return len([l for l in open(clog) if l.startswith("done " + uuid)])

    def tenants():
        with open(os.path.join(ag.dir, "gpu-tenants")) as f:
            return f.read().split()

    try:
        a = job("research/nlp", sh("sleep 6"), gpu_milli=500)  # still runs when b starts
        wait_state(a, ("running",))
        b = job("research/vision", sh("sleep 1"), gpu_milli=500)
        wait_state(b, ("running",))
        assert cleared() == 1 and tenants() == ["0", "research/nlp", "mixed"], \
            (cleared(), tenants())
        for jid in (a, b):
            assert wait_state(jid, ("succeeded", "failed"))["state"] == "succeeded"
        ag.stop()  # the mark is on disk
        ag.start()
        c = job("research/nlp", sh("true"), gpus=1)
        assert wait_state(c, ("succeeded", "failed"))["state"] == "succeeded"
        assert cleared() == 2, (cleared(), ag.log())
        assert tenants() == ["0", "research/nlp"], tenants()
        assert "research/nlp and others -> research/nlp" in ag.log(), ag.log()
        c = job("research/nlp", sh("true"), gpus=1)
        assert wait_state(c, ("succeeded", "failed"))["state"] == "succeeded"
        assert cleared() == 2, cleared()  # its own again: not cleared
    finally:
        ag.stop()
        expect(dm.req("POST", "/v1/nodes/ag-mixed/cordon", token=dm.admin), 200)


def test_fractions_shim_and_mps():
    """A fraction of a shared GPU: the shim's limits (and none for a whole GPU), or with
    --sharing mps an MPS control daemon per GPU and the job's MPS limits."""
    # the job also shows its entry in its GPU's share folder, as it sees it
    prog = sh("env | grep -E '^(ALLOT_GPU_MEMORY|ALLOT_GPU_SM|ALLOT_GPU_SHARE|ALLOT_GPU_CONTEXT|"
              "ALLOT_SHIM|CUDA_MPS_|LD_PRELOAD)' | sort; [ -z \"$ALLOT_GPU_SHARE_ID\" ] || "
              "{ cd \"$ALLOT_GPU_SHARE_DIR\"/gpu-* && stat -c 'entry %n %a %u' "
              "\"$ALLOT_GPU_SHARE_ID\".job \"$ALLOT_GPU_SHARE_ID\".seen && "
              "cat \"$ALLOT_GPU_SHARE_ID\".job; "
              "touch \"$ALLOT_GPU_SHARE_ID\".job new.job 2>/dev/null || echo 'entry read-only'; }")
    shim_lib = os.path.join(os.path.dirname(fx.AGENT), "liballot-cuda.so")
    # a sanitizer build's shim needs libasan first in LD_PRELOAD (tests/shim does
    # that); preloaded into sh it would stop it: the agent gets no shim there
    asan = b"libasan" in subprocess.run(["ldd", shim_lib], capture_output=True).stdout
    fake = os.path.join(fx.SOURCE, "tests", "fake", "nvidia-cuda-mps-control")
    mlog = os.path.join(fx.tempdir(), "mps.log")
    shim = Agent(dm, AG, "ag-shim", emulate="1xA10-24GB",
                 args=["--gpu-mode", "shared", "--shim-lib", "/nonexistent" if asan else shim_lib,
                       "--sm-share", "soft"])
    mark = "allot-fake-mps-server-%d" % os.getpid()
    images = busybox_image(fx.tempdir())
    os.chmod(images, 0o755)
    mps = Agent(dm, AG, "ag-mps", emulate="1xA30-24GB",
                args=["--gpu-mode", "shared", "--sharing", "mps", "--mps-control", fake,
                      "--image-dir", images],
                env={"FAKE_MPS_LOG": mlog, "FAKE_MPS_SHM_MARK": mark})
    wait_node("ag-shim")
    wait_node("ag-mps")
    try:
        a = submit({"gpus": None, "gpu_milli": 250, "gpu_memory": 4096,
                    "gpu_models": ["A10-24GB"], "command": prog})
        b = submit({"gpu_models": ["A10-24GB"], "command": prog})
        shm = "; ls /dev/shm | sed 's/^/shm:/'"
        c = submit({"gpus": None, "gpu_milli": 500, "gpu_memory": 8192,
                    "gpu_models": ["A30-24GB"], "command": prog[:2] + [prog[2] + shm]})
        # compute only: the same share of the GPU's memory, reserved and capped
        d = submit({"gpus": None, "gpu_milli": 500, "gpu_models": ["A10-24GB"],
                    "command": prog})
        for jid in (a, b, c, d):
            assert wait_state(jid, ("succeeded", "failed"))["state"] == "succeeded"
        env_a = shim.task_log(a)
        assert "ALLOT_GPU_MEMORY_LIMIT=4096Mi" in env_a and "ALLOT_GPU_SM_LIMIT=25" in env_a, env_a
        assert "ALLOT_SHIM_REGION=" in env_a, env_a
        # jobs on one GPU share its time by tenant weight (research/nlp: 1 -> 100), softly
        share = os.path.join(shim.dir, "gpushare")
        assert "ALLOT_GPU_SHARE_DIR=%s\n" % share in env_a, env_a
        assert "ALLOT_GPU_SHARE_ID=%d-0\n" % a in env_a, env_a
        # the agent's folder, which no job may write; the task's entry in it: the
        # weight and ceiling (soft: 100) the agent gave, and the job's activity file
        st = os.stat(share)
        assert st.st_mode & 0o7777 == 0o755 and st.st_uid == os.getuid(), oct(st.st_mode)
        uid = [l.split()[-1] for l in env_a.splitlines() if l.startswith("entry ")]
        assert "entry %d-0.job 644 %d\n" % (a, os.getuid()) in env_a, env_a
        assert "entry %d-0.seen 444 " % a in env_a, env_a
        assert "weight 100\nceiling 100\nuid %s\n" % uid[1] in env_a, env_a
        assert os.getuid() != 0 or "entry read-only" in env_a, env_a
        assert "ALLOT_GPU_SM_WEIGHT" not in env_a and "ALLOT_GPU_SM_SOFT" not in env_a, env_a
        # gone once the task ended
        gpu = [os.path.join(share, n) for n in os.listdir(share) if n.startswith("gpu-")]
        assert len(gpu) == 1 and not [n for n in os.listdir(gpu[0])
                                      if n.startswith("%d-0." % a)], os.listdir(gpu[0])
        # contexts count the agent's default estimate until the shim measures them
        assert "ALLOT_GPU_CONTEXT_OVERHEAD=300Mi" in env_a, env_a
        # the shim is preloaded, and a program that never touches CUDA runs as before;
        # without one (the sanitizer build's agent) the job's log says it is unenforced
        assert asan or "LD_PRELOAD=%s" % shim_lib in env_a, env_a
        unenforced = "no GPU sharing shim at /nonexistent (--shim-lib): this fraction's GPU " \
            "memory cap and compute share are not enforced"
        assert (unenforced in env_a) == asan, env_a
        assert shim.task_log(b) == "", shim.task_log(b)  # a whole GPU: no limits
        if os.getuid() == 0:
            # the region is the job's user's alone, in a small tmpfs of its own: a job
            # that grows it fills that, not the agent's state file system
            g = submit({"gpus": None, "gpu_milli": 250, "gpu_models": ["A10-24GB"],
                        "command": sh("stat -c 'region %a %u' \"$ALLOT_SHIM_REGION\"; "
                                      "head -c 4000000 /dev/zero >> \"$ALLOT_SHIM_REGION\" "
                                      "2>/dev/null || echo grow-refused; "
                                      "stat -c 'size %s' \"$ALLOT_SHIM_REGION\"")})
            assert wait_state(g, ("succeeded", "failed"))["state"] == "succeeded"
            out = shim.task_log(g)
            assert "region 600 " in out and "region 600 0\n" not in out, out
            assert "grow-refused" in out, out
            size = int(out.split("size ")[1].split()[0])
            assert size <= 512 * 1024, out
        env_d = shim.task_log(d)
        assert "ALLOT_GPU_MEMORY_LIMIT=12288Mi" in env_d and "ALLOT_GPU_SM_LIMIT=50" in env_d, env_d
        gpu_d = expect(dm.req("GET", "/v1/jobs/%d" % d, token=dm.admin), 200)
        assert '"gpu_memory": 12288' in json.dumps(gpu_d), gpu_d
        env_c = mps.task_log(c)
        assert "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50" in env_c, env_c
        assert "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=8192M" in env_c, env_c
        pipe = [l for l in env_c.splitlines() if l.startswith("CUDA_MPS_PIPE_DIRECTORY=")][0]
        assert "ALLOT_SHIM_REGION" not in env_c, env_c
        started = open(mlog).read().split()
        assert started[0] == "started" and started[1].startswith("GPU-"), started
        assert started[2] == pipe.split("=", 1)[1], (started, pipe)
        # an MPS client's /dev/shm is its MPS server's (where the server's shared memory
        # is); neither the host's /dev/shm nor another task's holds it
        if os.getuid() == 0:
            assert "shm:" + mark in env_c, env_c
            assert not os.path.exists("/dev/shm/" + mark)
            # only the agent may enter where it is kept: no other job reaches it on the host
            assert os.stat(os.path.join(mps.dir, "mps-shm")).st_mode & 0o777 == 0o700
            e = submit({"gpu_models": ["A30-24GB"], "command": sh("ls /dev/shm; echo end")})
            assert wait_state(e, ("succeeded", "failed"))["state"] == "succeeded"
            assert mark not in mps.task_log(e) and "end" in mps.task_log(e), mps.task_log(e)
            # MPS does not reach into an image yet: such a fraction fails, saying so
            f = submit({"image": "bb", "gpus": None, "gpu_milli": 500,
                        "gpu_models": ["A30-24GB"], "command": ["true"]})
            j = wait_state(f, ("succeeded", "failed"))
            assert j["state"] == "failed" and "MPS" in j["pending_reason"], j
    finally:
        shim.stop()
        mps.stop()
        # the MPS daemon's shared memory outlives the agent (as the daemon does)
        subprocess.run(["umount", os.path.join(mps.dir, "mps-shm", "0")],
                       stderr=subprocess.DEVNULL)
        for n in ("ag-shim", "ag-mps"):
            expect(dm.req("POST", "/v1/nodes/%s/cordon" % n, token=dm.admin), 200)


def job_usage(jid, t0):
    """The usage rows since t0 and job jid's, once its samples (every 200 ms, sent with the
    heartbeats) gave it a GPU memory figure, or after 15 s."""
    end = time.time() + 15
    while True:
        rows = expect(dm.req("GET", "/v1/usage?by=job&from=%d" % t0, token=dm.admin),
                      200)["rows"]
        r = [x for x in rows if x["key"] == str(jid)]
        if (r and r[0]["gpu_memory_peak_bytes"] is not None) or time.time() >= end:
            return rows, r
        time.sleep(0.2)


def test_fraction_metering():
    """A fraction's GPU use comes from its shim region: a CUDA job on the fake driver holding
    1 MiB and launching kernels under a 50 % share is metered with that memory (and its
    context's overhead: the agent's default estimate, 300Mi, with no NVML to measure it) and a
    busy share, and the shim learns its processes' host pids. A fraction that never uses
    CUDA has no utilisation figure."""
    shim_lib = os.path.join(os.path.dirname(fx.AGENT), "liballot-cuda.so")
    if b"libasan" in subprocess.run(["ldd", shim_lib], capture_output=True).stdout:
        print("  (sanitizer build: the shim is not preloaded, nothing to meter)")
        return
    job = os.path.join(os.path.dirname(fx.AGENT), "fake-cuda-job")
    ag = Agent(dm, AG, "ag-frac", emulate="1xA10-24GB",
               args=["--gpu-mode", "shared", "--shim-lib", shim_lib, "--sample-interval", "200ms"])
    wait_node("ag-frac")
    try:
        t0 = int(time.time()) - 1
        jid = submit({"gpus": None, "gpu_milli": 500, "gpu_memory": 4096,
                      "gpu_models": ["A10-24GB"], "command": [job, "1048576", "2"],
                      "env": {"FAKE_CUDA_KERNEL_US": "1000", "ALLOT_SHIM_LOG": "stderr",
                              "FAKE_CUDA_UUIDS": "GPU-11111111-2222-3333-4444-555555555555"}})
        j = wait_state(jid, ("succeeded", "failed"), timeout=60)
        assert j["state"] == "succeeded", (j, ag.task_log(jid))
        assert "alloc 0" in ag.task_log(jid), ag.task_log(jid)
        rows, r = job_usage(jid, t0)
        assert r and r[0]["gpu_memory_peak_bytes"] == 1048576 + (300 << 20), \
            (rows, ag.task_log(jid))
        assert r[0]["sm_util_avg"] is not None and 10 <= r[0]["sm_util_avg"] <= 90, r
        # a fraction whose program never touches CUDA: no process in its region, so no
        # utilisation figure (not 0 %: bill: measured bills its allocation), and no memory
        t0 = int(time.time()) - 1
        jid = submit({"gpus": None, "gpu_milli": 500, "gpu_models": ["A10-24GB"],
                      "command": sh("sleep 1.5")})
        j = wait_state(jid, ("succeeded", "failed"), timeout=60)
        assert j["state"] == "succeeded", (j, ag.task_log(jid))
        rows, r = job_usage(jid, t0)
        assert r and r[0]["gpu_memory_peak_bytes"] == 0 and r[0]["gpu_seconds"] > 0, rows
        assert r[0]["sm_util_avg"] is None and r[0]["measured_seconds"] == 0, r
    finally:
        ag.stop()
        expect(dm.req("POST", "/v1/nodes/ag-frac/cordon", token=dm.admin), 200)


def test_gpu_memory_cap_held_from_outside():
    """A fraction's GPU memory cap holds also for a job that gets around the shim (unsets
    LD_PRELOAD): the agent reads NVML's per-process figures of the job's processes (the
    fake driver publishes them, as a real driver knows them) and stops one over its cap,
    saying so; a job within its cap, the shim preloaded or not, runs to its end."""
    if os.getuid() != 0:
        print("  (not root: no cgroup to find a job's processes by)")
        return
    lib = os.path.join(os.path.dirname(fx.AGENT), "fake-nvml", "libnvidia-ml.so.1")
    job = os.path.join(os.path.dirname(fx.AGENT), "fake-cuda-job")
    d = fx.tempdir()
    # the jobs' users write their books there, as a driver keeps them (outside /tmp,
    # which is each job's own)
    procs = "/var/tmp/allot-test-gpu-procs-%d" % os.getpid()
    os.mkdir(procs)
    os.chmod(procs, 0o1777)
    conf = os.path.join(d, "machine")
    with open(conf, "w") as f:
        f.write('gpu name="NVIDIA A10" mem=24576 uuid=GPU-cafe minor=0\n')
    ag = Agent(dm, AG, "ag-cap", emulate="", env={"FAKE_NVML_CONFIG": conf,
                                                  "FAKE_GPU_PROCS_DIR": procs},
               args=["--nvml-lib", lib, "--gpu-mode", "shared", "--sample-interval", "200ms",
                     "--shim-lib", "/nonexistent", "--no-scrub"])
    wait_node("ag-cap")
    env = {"FAKE_GPU_PROCS_DIR": procs, "FAKE_CUDA_UUIDS": "GPU-cafe",
           "FAKE_CUDA_MEM_MIB": "24576"}
    try:
        # it also fails when it catches the SIGTERM and exits 0
        over = submit({"gpus": None, "gpu_milli": 250, "gpu_memory": 4096,
                       "gpu_models": ["A10-24GB"], "env": env,
                       "command": sh("trap 'exit 0' TERM; %s %d 5 & wait" % (job, 6 << 30))})
        j = wait_state(over, ("succeeded", "failed"), timeout=30)
        assert j["state"] == "failed", (j, ag.task_log(over))
        assert "over its GPU memory cap (6144 MiB held on GPU 0, cap 4096 MiB" in \
            j["pending_reason"], (j, ag.log())
        within = submit({"gpus": None, "gpu_milli": 250, "gpu_memory": 4096,
                         "gpu_models": ["A10-24GB"], "command": [job, str(3 << 30), "1"],
                         "env": env})
        j = wait_state(within, ("succeeded", "failed"), timeout=30)
        assert j["state"] == "succeeded", (j, ag.task_log(within), ag.log())
    finally:
        ag.stop()
        shutil.rmtree(procs, ignore_errors=True)
        expect(dm.req("POST", "/v1/nodes/ag-cap/cordon", token=dm.admin), 200)


def test_logs_and_run():
    # allot run: the output as it comes, and the job's exit code
    r = cli(dm, "run", "-t", "research/nlp", "--gpus", "0", "--", "sh", "-c",
            "echo line-1; sleep 0.5; echo line-2 >&2; exit 7")
    assert r.rc == 7 and r.out == "line-1\nline-2\n", r
    assert "submitted" in r.err and "failed" in r.err, r
    r = ok(cli(dm, "run", "-t", "research/nlp", "--gpus", "0", "--", "printf", "a\\0b"))
    assert r.out == "a\x00b", r
    # allot logs: whole, from a running job with --follow, and through the API
    jid = submit({"gpus": 0, "command": sh("for i in 1 2 3; do echo tick $i; sleep 0.3; done")})
    r = ok(cli(dm, "logs", "-f", jid))
    assert r.out == "tick 1\ntick 2\ntick 3\n", r
    assert ok(cli(dm, "logs", jid)).out == r.out
    st, body = dm.req("GET", "/v1/jobs/%d/logs?offset=7" % jid, token=dm.admin, raw=True)
    assert st == 200 and body == "tick 2\ntick 3\n", (st, body)
    # the logs are the agent's alone: no job lists which jobs ran here
    for p in (os.path.join(agent.dir, "logs"), os.path.join(agent.dir, "logs", str(jid))):
        assert os.stat(p).st_mode & 0o777 == 0o700, (p, oct(os.stat(p).st_mode))
    fails(cli(dm, "logs", "999999"), 2, "not_found")
    fails(cli(dm, "logs", jid, "--task", "x"), 1, "usage")
    r = fails(cli(dm, "logs", jid, "--task", "5"), 2, "not_found")
    assert "has 1 task (0..0), no task 5" in r.err, r
    # no ready node has an A100: never placed
    pend = submit({"gpu_models": ["A100-80GB"], "command": sh("true")})
    fails(cli(dm, "logs", pend), 4, "not_started")
    expect(dm.req("POST", "/v1/jobs/%d/cancel" % pend, token=dm.admin), 200)
    # a member of another tenant does not see it
    member = dm.token("member", "research/vision", "mv")
    fails(cli(dm, "logs", jid, token=member), 2, "not_found")


def test_preemption_with_grace():
    """A higher class preempts a running job of the same tenant: SIGTERM reaches it, the
    grace passes, it goes back to pending and runs again once the GPUs are free."""
    low = submit({"gpus": 2, "priority": "training", "gpu_models": ["L4"],
                  "command": sh("trap 'echo got TERM; sleep 0.3; exit 143' TERM; echo started; "
                                "sleep 3 & wait; echo finished")})
    wait_state(low, ("running",))
    assert wait_log(agent, low, "started")  # its trap is set
    high = submit({"gpus": 2, "priority": "inference", "gpu_models": ["L4"],
                   "command": sh("echo high; sleep 1")})
    end = time.time() + 15
    while time.time() < end and "got TERM" not in agent.task_log(low):
        time.sleep(0.05)
    assert "got TERM" in agent.task_log(low), agent.task_log(low)
    wait_state(high, ("running", "succeeded"))
    j = wait_state(high, ("succeeded",))
    assert j["exit_code"] == 0, j
    kinds = [e["kind"] for e in expect(dm.req("GET", "/v1/jobs/%d/events" % low,
                                              token=dm.admin), 200)["events"]]
    assert "preempted" in kinds, kinds
    j = wait_state(low, ("succeeded",), timeout=30)
    out = agent.task_log(low)
    assert out.count("started") == 2 and out.count("finished") == 1, out


def test_preemptor_starts_once_the_victim_is_gone():
    """A preempted job (checkpointable: the queue gives it a grace period) that exits on
    SIGTERM at once gives its GPU to the job it was stopped for then, not when its grace
    period (20 s here) ends: its agent no longer lists it as stopping, and allotd ends the
    grace early."""
    d2 = Daemon(args=["--preempt-grace", "20s", "--preempt-min-runtime", "0s"])
    expect(d2.req("PUT", "/v1/tenants", TENANTS, token=d2.admin), 200)
    ag = Agent(d2, d2.token("agent", "", "agents"), "grace-1", emulate="1xT4",
               args=["--grace", "25s", "--cgroup-root", "%s-grace-1" % fx.CGROUP_ROOT])
    try:
        low = submit_to(d2, sh("trap 'echo term $(date +%s%N); exit 143' TERM; echo started; "
                               "sleep 60 & wait"), priority="training", checkpointable=True)
        assert wait_log(ag, low, "started", timeout=20), ag.log()
        high = submit_to(d2, sh("echo high $(date +%s%N); sleep 30"), priority="inference")
        assert wait_log(ag, high, "high", timeout=15), (ag.log(), d2.log()[-3000:])
        term, started = stamps(ag, low, "term")[0], stamps(ag, high, "high")[0]
        assert started > term and started - term < 15 * 10 ** 9, (term, started)
        # low waits (requeued); high is stopped, and gone before its agent stops
        for j in (low, high):
            expect(d2.req("POST", "/v1/jobs/%d/cancel" % j, token=d2.admin), 200)
        end = time.time() + 15
        while time.time() < end and "job %d task 0 ended" % high not in ag.log():
            time.sleep(0.1)
        assert "job %d task 0 ended" % high in ag.log(), ag.log()
    finally:
        ag.stop()
        d2.stop()


def events_of(d, jid):
    return expect(d.req("GET", "/v1/jobs/%d/events" % jid, token=d.admin), 200)["events"]


def test_join_token_read_again():
    """An agent whose node credential is revoked after its join token (made for a time)
    expired cannot register again; it reads --token-file again at each refusal, so an
    admin who puts a new join token there gets the node back without restarting it."""
    tf = os.path.join(fx.tempdir(), "join")
    short = expect(dm.req("POST", "/v1/tokens", {"role": "agent", "name": "join-short",
                                                 "duration_s": 8}, token=dm.admin), 201)
    with open(tf, "w") as f:
        f.write(short["token"] + "\n")
    ag = fx.Agent.__new__(fx.Agent)  # the fixture's agent, with --token-file
    ag.dir, ag.name, ag.env = fx.tempdir(), "ag-join", None
    os.chmod(ag.dir, 0o755)
    ag.args = ["--server", "http://127.0.0.1:%d" % dm.port, "--token-file", tf, "--name",
               "ag-join", "--emulate", "1xT4", "--state-dir", ag.dir, "--cgroup-root",
               fx.CGROUP_ROOT, "--grace", "2s", "--poll-wait", "500ms", "--heartbeat", "200ms",
               "--listen", "127.0.0.1:0"]
    ag.log_path = os.path.join(ag.dir, "agent.log")
    ag.start()
    try:
        wait_node("ag-join")
        time.sleep(max(0, short["expires"] - time.time()) + 1.2)  # the join token expired
        cred = [t["id"] for t in expect(dm.req("GET", "/v1/tokens", token=dm.admin),
                                        200)["tokens"] if t["name"] == "node/ag-join"]
        expect(dm.req("DELETE", "/v1/tokens/%d" % cred[-1], token=dm.admin), 200)
        end = time.time() + 10
        while time.time() < end and "the token expired" not in ag.log():
            time.sleep(0.1)
        assert "the token expired" in ag.log(), ag.log()
        new = dm.token("agent", "", "join-new")
        with open(tf, "w") as f:
            f.write(new + "\n")
        end = time.time() + 10
        while time.time() < end and ag.log().count("registered as ag-join") < 2:
            time.sleep(0.1)
        assert "a new join token read from %s" % tf in ag.log(), ag.log()
        assert ag.log().count("registered as ag-join") == 2, ag.log()
        t0 = time.time()
        end = t0 + 5
        while time.time() < end:
            n = [x for x in expect(dm.req("GET", "/v1/nodes", token=dm.admin), 200)["nodes"]
                 if x["name"] == "ag-join"][0]
            if n["state"] == "ready" and n["last_heartbeat"] >= int(t0):
                break
            time.sleep(0.1)
        assert n["state"] == "ready" and n["last_heartbeat"] >= int(t0), n
    finally:
        ag.stop()
        expect(dm.req("POST", "/v1/nodes/ag-join/cordon", token=dm.admin), 200)


def test_fence_follows_a_new_lease():
    """allotd restarted with a shorter --lease: the agent fences by the lease allotd
    counts now (the heartbeat's lease_ms), not the one it registered under, so that its
    tasks stop before allotd counts the node lost and runs them elsewhere."""
    d = Daemon(args=["--lease", "10s"])
    a = None
    try:
        tok = d.token("agent", "", "agents")
        a = Agent(d, tok, "ag-lease", emulate="1xT4")
        end = time.time() + 10
        while time.time() < end and "registered as ag-lease" not in a.log():
            time.sleep(0.05)
        admin, port = d.admin, d.port
        d.stop()
        d = Daemon(d.dir, args=["--lease", "3s", "--listen", "127.0.0.1:%d" % port])
        d.admin = admin
        end = time.time() + 15
        while time.time() < end and "allotd counts a lease of 3000 ms now" not in a.log():
            time.sleep(0.1)
        assert "allotd counts a lease of 3000 ms now (was 10000)" in a.log(), a.log()
    finally:
        if a:
            a.stop()
        d.stop()


def test_log_of_an_id_given_again():
    """A job's log folder on a node that holds another owner's logs under the same id (a
    store restored from a backup gives ids again) is emptied before the job writes to it:
    `allot logs` never shows one tenant another's output. A requeued job's own log keeps
    its earlier runs (test_requeue)."""
    ag = Agent(dm, AG, "ag-reid", emulate="1xV100-16GB")
    try:
        wait_node("ag-reid")
        probe = submit({"gpus": 0, "command": ["true"]})  # ids from here on
        wait_state(probe, ("succeeded", "failed"))
        for jid in range(probe + 1, probe + 12):
            old = os.path.join(ag.dir, "logs", str(jid))
            os.makedirs(old)
            with open(os.path.join(old, "task-0.log"), "w") as f:
                f.write("secret of another tenant\n")
            if jid % 2:  # the others: of no known owner (an older agent's)
                with open(os.path.join(old, ".owner"), "w") as f:
                    f.write("other/tenant")
        for i in range(2):
            jid = submit({"gpu_models": ["V100-16GB"], "command": sh("echo mine")})
            assert probe < jid < probe + 12, (probe, jid)
            assert wait_state(jid, ("succeeded", "failed"))["state"] == "succeeded"
            assert ok(cli(dm, "logs", jid)).out == "mine\n"
        # a task that does not start (no such image) writes why into a folder made its
        # own first
        jid = submit({"gpu_models": ["V100-16GB"], "image": "no-such-image",
                      "command": ["true"]})
        assert probe < jid < probe + 12, (probe, jid)
        wait_state(jid, ("failed",))
        assert "secret" not in ag.task_log(jid), ag.task_log(jid)
        assert "held logs of another owner (other/tenant)" in ag.log(), ag.log()
        assert "held logs of another owner (unknown)" in ag.log(), ag.log()
    finally:
        ag.stop()
        expect(dm.req("POST", "/v1/nodes/ag-reid/cordon", token=dm.admin), 200)


def test_log_retention():
    """--log-retention: the log folder of a job with no task left on the node goes once its
    logs were last written longer ago than that (`allot logs` then answers no_log), while a
    running job's log stays however old its last write, and a folder holding anything but
    task logs is left whole."""
    ag = Agent(dm, AG, "ag-ret", emulate="1xV100-16GB", args=["--log-retention", "2s"])
    try:
        wait_node("ag-ret")
        other = os.path.join(ag.dir, "logs", "999999")
        os.makedirs(other)
        with open(os.path.join(other, "notes.txt"), "w") as f:
            f.write("kept\n")
        os.utime(os.path.join(other, "notes.txt"), (time.time() - 3600, time.time() - 3600))
        # quiet for 3 s before it ends: the retention counts from its end
        done = submit({"gpu_models": ["V100-16GB"], "command": sh("echo short; sleep 3")})
        assert wait_state(done, ("succeeded", "failed"))["state"] == "succeeded"
        time.sleep(1.5)
        assert ok(cli(dm, "logs", done)).out == "short\n"
        longer = submit({"gpu_models": ["V100-16GB"], "command": sh("echo long; sleep 60")})
        wait_state(longer, ("running",))
        assert wait_log(ag, longer, "long")
        path = os.path.join(ag.dir, "logs", str(done))
        end = time.time() + 15
        while time.time() < end and os.path.exists(path):
            time.sleep(0.2)
        assert not os.path.exists(path), ag.log()
        fails(cli(dm, "logs", done), 2, "no_log")
        assert "removed the logs of 1 ended jobs" in ag.log(), ag.log()
        time.sleep(2.5)  # the running job's log is older than the retention now
        assert ag.task_log(longer) == "long\n"
        assert os.path.exists(os.path.join(other, "notes.txt"))
        expect(dm.req("POST", "/v1/jobs/%d/cancel" % longer, token=dm.admin), 200)
    finally:
        ag.stop()
        expect(dm.req("POST", "/v1/nodes/ag-ret/cordon", token=dm.admin), 200)


def test_requeue():
    """`allot requeue` (POST /v1/jobs/{id}/requeue) sends a running job back to the queue:
    its agent stops it, a "requeued" event names who asked, and it runs again (its log
    holds both runs). A job that is not starting or running answers 409, a viewer 403, and
    the request is audited."""
    jid = submit({"gpus": 0, "command": sh("echo run; sleep 60")})
    wait_state(jid, ("running",))
    assert wait_log(agent, jid, "run")
    first = wait_state(jid, ("running",))["start_time"]
    r = ok(cli(dm, "requeue", jid))
    assert r.out == "requeued job %d\n" % jid, r
    assert wait_log(agent, jid, "run", count=2, timeout=20), agent.task_log(jid)
    j = wait_state(jid, ("running",))
    assert j["start_time"] > first, (j, first)
    ev = [e for e in events_of(dm, jid) if e["kind"] == "requeued"]
    assert len(ev) == 1 and ev[0]["detail"].startswith("requeued by "), ev
    entries = dm.audit()
    assert [e["result"] for e in entries
            if e["action"] == "job.requeue" and e["target"] == "job/%d" % jid] == ["ok"], entries[-5:]
    viewer = dm.token("viewer", "research/nlp", "v-requeue")
    st, body = dm.req("POST", "/v1/jobs/%d/requeue" % jid, token=viewer)
    assert st == 403 and body["error"]["code"] == "forbidden", (st, body)
    expect(dm.req("POST", "/v1/jobs/%d/cancel" % jid, token=dm.admin), 200)
    r = fails(cli(dm, "requeue", jid), 4, "conflict")
    assert "is cancelled: only a starting or running job is requeued" in r.err, r
    fails(cli(dm, "requeue", 999999), 2, "not_found")
    # a job submitted with --no-requeue is not run twice
    once = submit({"gpus": 0, "requeue": False, "command": sh("echo once; sleep 60")})
    wait_state(once, ("running",))
    r = fails(cli(dm, "requeue", once), 4, "conflict")
    assert "--no-requeue" in r.err, r
    assert wait_state(once, ("running",))["start_time"] > 0
    expect(dm.req("POST", "/v1/jobs/%d/cancel" % once, token=dm.admin), 200)
    # an array's id requeues every running member
    arr = expect(dm.req("POST", "/v1/jobs", {"tenant": "research/nlp", "gpus": 0, "cpus": 1,
                                             "memory": 256, "array": "0-1",
                                             "command": sh("echo m; sleep 60")},
                        token=dm.admin), 201)["id"]
    members = [arr, arr + 1]
    for m in members:
        assert wait_log(agent, m, "m"), agent.log()
    r = ok(cli(dm, "requeue", arr))
    assert r.out == "requeued 2 jobs of array %d\n" % arr, r
    for m in members:
        assert wait_log(agent, m, "m", count=2, timeout=20), agent.task_log(m)
    expect(dm.req("POST", "/v1/jobs/%d/cancel?array=true" % arr, token=dm.admin), 200)


def test_gpus_move_after_the_victim_is_gone():
    """A job preempted at once (not checkpointable) leaves its GPUs in allotd's books at
    once, but its process gets the agent's grace: the preemptor starts on those GPUs only
    after the victim's process has ended. Then the victim, cancelled preemptor gone, is
    placed on the same node again: its new run starts (it is not mistaken for the run the
    agent stopped)."""
    ag = Agent(dm, AG, "ag-re", emulate="1xL40S-48GB", args=["--grace", "3s"])
    try:
        wait_node("ag-re")
        low = submit({"priority": "training", "gpu_models": ["L40S-48GB"],
                      "command": sh("echo start $(date +%s%N); trap 'sleep 1; echo gone "
                                    "$(date +%s%N); exit 143' TERM; sleep 30 & wait")})
        wait_state(low, ("running",))
        end = time.time() + 10
        while time.time() < end and "start" not in ag.task_log(low):
            time.sleep(0.05)
        high = submit({"priority": "inference", "gpu_models": ["L40S-48GB"],
                       "command": sh("echo start $(date +%s%N); sleep 0.5")})
        assert wait_state(high, ("succeeded", "failed"))["state"] == "succeeded"
        gone = int(ag.task_log(low).split("gone ")[1].split()[0])
        started = int(ag.task_log(high).split("start ")[1].split()[0])
        assert started > gone, (ag.task_log(low), ag.task_log(high), ag.log())
        # the victim's second run, on the same node and GPU
        j = wait_state(low, ("running",), timeout=20)
        end = time.time() + 10
        while time.time() < end and ag.task_log(low).count("start") < 2:
            time.sleep(0.05)
        assert ag.task_log(low).count("start") == 2, (j, ag.log())
        expect(dm.req("POST", "/v1/jobs/%d/cancel" % low, token=dm.admin), 200)
        wait_state(low, ("cancelled",))
        # a checkpointable victim whose preemptor is cancelled in its grace period is
        # requeued and placed here again within a cycle: its new run starts
        ck = submit({"priority": "training", "gpu_models": ["L40S-48GB"], "checkpointable": True,
                     "command": sh("echo start; sleep 30")})
        wait_state(ck, ("running",))
        pre = submit({"priority": "inference", "gpu_models": ["L40S-48GB"],
                      "command": sh("sleep 5")})
        end = time.time() + 10
        while time.time() < end and "preempted" not in [e["kind"] for e in events_of(dm, ck)]:
            time.sleep(0.05)
        expect(dm.req("POST", "/v1/jobs/%d/cancel" % pre, token=dm.admin), 200)
        end = time.time() + 20
        while time.time() < end and ag.task_log(ck).count("start") < 2:
            time.sleep(0.1)
        assert ag.task_log(ck).count("start") == 2, (events_of(dm, ck), ag.log())
        # the victim got allotd's grace (--preempt-grace 2s), not the agent's own (3s)
        kill = [l for l in ag.log().splitlines() if "job %d task 0: SIGTERM" % ck in l]
        assert kill and int(kill[0].split("SIGKILL in ")[1].split()[0]) <= 2000, ag.log()
        assert wait_state(ck, ("running",))["state"] == "running"
        expect(dm.req("POST", "/v1/jobs/%d/cancel" % ck, token=dm.admin), 200)
    finally:
        ag.stop()
        expect(dm.req("POST", "/v1/nodes/ag-re/cordon", token=dm.admin), 200)


def test_labels():
    """An agent's --labels reach its node's inventory beside its own allot.io/ label, and a
    job selecting them runs there; a label the agent may not set stops it at start."""
    bad = subprocess.run([fx.AGENT, "--labels", "allot.io/emulated=false", "--emulate", "1xT4",
                          "--token", "x"], capture_output=True, text=True, timeout=20)
    assert bad.returncode != 0 and "allot.io/ keys are the agent's own" in bad.stderr, bad
    ag = Agent(dm, AG, "ag-lab", emulate="1xT4", args=["--labels", "zone=z9,nvlink"])
    try:
        wait_node("ag-lab")
        n = [x for x in expect(dm.req("GET", "/v1/nodes", token=dm.admin), 200)["nodes"]
             if x["name"] == "ag-lab"][0]
        assert n["inventory"]["labels"] == {"allot.io/emulated": "true", "zone": "z9",
                                            "nvlink": ""}, n
        jid = submit({"node_selector": {"zone": "z9", "nvlink": ""},
                      "command": sh("echo on $(hostname)")})
        j = wait_state(jid, ("succeeded", "failed"))
        assert j["state"] == "succeeded" and j["placement"]["tasks"][0]["node"] == "ag-lab", j
        assert "on " in ag.task_log(jid)
    finally:
        ag.stop()
        expect(dm.req("POST", "/v1/nodes/ag-lab/cordon", token=dm.admin), 200)


def test_state_folder_held_by_one_agent():
    """A second allot-agent on a running agent's state folder stops at once, naming the
    first's pid (two would adopt, start and stop each other's tasks); --print-inventory,
    which changes nothing, still runs there."""
    wait_node(agent.name)  # registered: it holds its folder
    other = subprocess.run([fx.AGENT, "--state-dir", agent.dir, "--emulate", "1xT4", "--token",
                            "x", "--name", "twin", "--server", "http://127.0.0.1:%d" % dm.port],
                           capture_output=True, text=True, timeout=20)
    assert other.returncode == 1, other
    assert "is in use by another allot-agent (pid %d)" % agent.proc.pid in other.stderr, other
    inv = subprocess.run([fx.AGENT, "--state-dir", agent.dir, "--emulate", "1xT4",
                          "--print-inventory"], capture_output=True, text=True, timeout=20)
    assert inv.returncode == 0 and '"register"' in inv.stdout, inv


def cpus_allowed(text):
    """The CPUs of the last `Cpus_allowed_list:` line in text, as a set."""
    lines = [l for l in text.splitlines() if l.startswith("Cpus_allowed_list:")]
    cpus = set()
    for part in lines[-1].split(":")[1].strip().split(",") if lines else []:
        lo, _, hi = part.partition("-")
        cpus |= set(range(int(lo), int(hi or lo) + 1))
    return cpus


def cpuset_cpus():
    """The CPUs of the root cpuset (v1), or the effective ones of the v2 root."""
    v1 = os.path.exists("/sys/fs/cgroup/cpuset/cpuset.cpus")
    with open("/sys/fs/cgroup/cpuset/cpuset.cpus" if v1 else
              "/sys/fs/cgroup/cpuset.cpus.effective") as f:
        return v1, cpus_allowed("Cpus_allowed_list: " + f.read().strip())


def test_cpu_bind():
    """--cpu-bind cores: a task of one whole CPU runs on a core of its own (ALLOT_CPU_CORES
    names it), a task of half a CPU on the cores left (the shared pool, which keeps one), and
    gets the core back once the first has ended; the binding is the task's cpuset cgroup."""
    v1, allowed = cpuset_cpus()
    if v1 and len(allowed) >= 2:  # a folder an older run left narrower: widened at start
        top = "/sys/fs/cgroup/cpuset/%s" % fx.CGROUP_ROOT
        os.makedirs(top, exist_ok=True)
        with open("/sys/fs/cgroup/cpuset/cpuset.mems") as f:
            mems = f.read().strip()
        with open(os.path.join(top, "cpuset.mems"), "w") as f:
            f.write(mems)
        with open(os.path.join(top, "cpuset.cpus"), "w") as f:
            f.write(str(min(allowed)))
    # it offers 4 CPUs whatever the machine has: allotd places more than the cores hold
    ag = Agent(dm, AG, "ag-cpu", emulate="1xT4", args=["--cpu-bind", "cores", "--labels",
                                                        "cpubind=yes", "--cpus", "4000"])
    show = "grep Cpus_allowed_list /proc/self/status; echo cores=${ALLOT_CPU_CORES-none}; "
    try:
        wait_node("ag-cpu")
        one = submit({"gpus": 0, "cpus": 1, "node_selector": {"cpubind": "yes"},
                      "command": sh(show + "sleep 60")})
        wait_state(one, ("running",))
        end = time.time() + 10
        while time.time() < end and not cpus_allowed(ag.task_log(one)):
            time.sleep(0.05)
        own = cpus_allowed(ag.task_log(one))
        half = submit({"gpus": 0, "cpus": 0.5, "node_selector": {"cpubind": "yes"},
                       "command": sh("for i in $(seq 150); do " + show + "sleep 0.2; done")})
        wait_state(half, ("running",))
        end = time.time() + 10
        while time.time() < end and not cpus_allowed(ag.task_log(half)):
            time.sleep(0.05)
        pool = cpus_allowed(ag.task_log(half))
        if len(allowed) >= 2:  # a core of its own, and the pool keeps the rest
            assert len(own) == 1 and pool == allowed - own, (own, pool, allowed, ag.log()[-2000:])
            # the job knows its own cores; one in the pool has none
            assert "cores=%d\n" % min(own) in ag.task_log(one), ag.task_log(one)
            assert "cores=none\n" in ag.task_log(half), ag.task_log(half)
            cg = "/sys/fs/cgroup/%s%s/%d-0/cpuset.cpus" % ("cpuset/" if v1 else "", fx.CGROUP_ROOT,
                                                          one)
            with open(cg) as f:
                assert cpus_allowed("Cpus_allowed_list: " + f.read().strip()) == own
        else:  # one CPU: the pool keeps it, the task shares it
            assert own == pool == allowed and "runs in the shared pool" in ag.log(), ag.log()
        # a restarted agent knows the cores it gave: a second task of one CPU finds none
        # free beside the pool's last and shares the pool (forgetting, it would take the
        # first task's core)
        ag.stop(signal.SIGKILL)
        ag.start()
        two = submit({"gpus": 0, "cpus": 1, "node_selector": {"cpubind": "yes"},
                      "command": sh(show + "sleep 60")})
        wait_state(two, ("running",))
        end = time.time() + 10
        while time.time() < end and not cpus_allowed(ag.task_log(two)):
            time.sleep(0.05)
        assert cpus_allowed(ag.task_log(two)) == pool, (ag.task_log(two), ag.log()[-2000:])
        expect(dm.req("POST", "/v1/jobs/%d/cancel" % two, token=dm.admin), 200)
        wait_state(two, ("cancelled",))
        expect(dm.req("POST", "/v1/jobs/%d/cancel" % one, token=dm.admin), 200)
        wait_state(one, ("cancelled",))
        end = time.time() + 15
        while time.time() < end and cpus_allowed(ag.task_log(half)) != allowed:
            time.sleep(0.1)
        assert cpus_allowed(ag.task_log(half)) == allowed, (ag.task_log(half)[-500:],
                                                            ag.log()[-2000:])
        expect(dm.req("POST", "/v1/jobs/%d/cancel" % half, token=dm.admin), 200)
        wait_state(half, ("cancelled",))
    finally:
        ag.stop()
        expect(dm.req("POST", "/v1/nodes/ag-cpu/cordon", token=dm.admin), 200)


def test_cpu_bind_after_an_unbound_start():
    """A task that an agent without --cpu-bind started runs on every CPU: after a restart
    with --cpu-bind cores, a task of a whole CPU runs in the shared pool (its core would not
    be its own), and the agent says why."""
    ag = Agent(dm, AG, "ag-cpu2", emulate="1xT4", args=["--labels", "cpubind=late", "--cpus",
                                                         "4000"])
    show = "grep Cpus_allowed_list /proc/self/status; "
    try:
        wait_node("ag-cpu2")
        old = submit({"gpus": 0, "cpus": 0.5, "node_selector": {"cpubind": "late"},
                      "command": sh("sleep 60")})
        wait_state(old, ("running",))
        ag.stop(signal.SIGKILL)
        ag.args += ["--cpu-bind", "cores"]
        ag.start()
        new = submit({"gpus": 0, "cpus": 1, "node_selector": {"cpubind": "late"},
                      "command": sh(show + "sleep 60")})
        wait_state(new, ("running",))
        end = time.time() + 10
        while time.time() < end and not cpus_allowed(ag.task_log(new)):
            time.sleep(0.05)
        assert cpus_allowed(ag.task_log(new)) == cpuset_cpus()[1], ag.task_log(new)
        assert "task %d-0, started without --cpu-bind, runs on every CPU" % old in ag.log(), \
            ag.log()[-2000:]
        for j in (old, new):
            expect(dm.req("POST", "/v1/jobs/%d/cancel" % j, token=dm.admin), 200)
            wait_state(j, ("cancelled",))
    finally:
        ag.stop()
        expect(dm.req("POST", "/v1/nodes/ag-cpu2/cordon", token=dm.admin), 200)


def test_one_run_at_a_time():
    """A requeued job's next run, placed on another node, starts only once its last run's
    processes on the first node are gone (they had the agent's grace): a job never runs
    twice at once. The first node's agent lists the job as stopping in its heartbeats
    meanwhile; allotd shows the new run with run 0 (its agent waits)."""
    a1 = Agent(dm, AG, "ag-once1", emulate="1xA10-24GB", args=["--grace", "6s"])
    a2 = None
    try:
        wait_node("ag-once1")
        jid = submit({"gpu_models": ["A10-24GB"],
                      "command": sh("echo start $(date +%s%N); trap 'sleep 2; echo gone "
                                    "$(date +%s%N); exit 143' TERM; sleep 60 & wait")})
        wait_state(jid, ("running",))
        end = time.time() + 10
        while time.time() < end and "start" not in a1.task_log(jid):
            time.sleep(0.05)
        a2 = Agent(dm, AG, "ag-once2", emulate="1xA10-24GB")
        wait_node("ag-once2")
        expect(dm.req("POST", "/v1/nodes/ag-once1/cordon", token=dm.admin), 200)
        ok(cli(dm, "requeue", jid))
        end = time.time() + 20
        while time.time() < end and "start" not in (a2.task_log(jid) if os.path.exists(
                os.path.join(a2.dir, "logs", str(jid), "task-0.log")) else ""):
            time.sleep(0.05)
        end = time.time() + 10
        while time.time() < end and "gone" not in a1.task_log(jid):
            time.sleep(0.05)
        gone = int(a1.task_log(jid).split("gone ")[1].split()[0])
        started = int(a2.task_log(jid).split("start ")[1].split()[0])
        assert started > gone, (a1.task_log(jid), a2.task_log(jid), dm.log()[-3000:])
        assert "job %d: its new run waits for the last to end on node ag-once1" % jid \
            in dm.log(), dm.log()[-3000:]
        ev = [e["detail"] for e in events_of(dm, jid) if e["kind"] == "waiting"]
        assert ev == ["its new run waits for its last to end on node ag-once1"], ev
        expect(dm.req("POST", "/v1/jobs/%d/cancel" % jid, token=dm.admin), 200)
        wait_state(jid, ("cancelled",))
    finally:
        a1.stop()
        if a2:
            a2.stop()
        for n in ("ag-once1", "ag-once2"):
            expect(dm.req("POST", "/v1/nodes/%s/cordon" % n, token=dm.admin), 200)


def test_logs_of_a_requeued_job():
    """A job preempted back to pending has no placement, but its run's log is still on the
    node: `allot logs` prints it and says on stderr that it is the previous run's, on which
    node (the API: X-Allot-Log-Run and X-Allot-Log-Node); once placed again, the log is the
    current run's. A job cancelled while pending again keeps its last run's log too."""
    ag = Agent(dm, AG, "ag-rq", emulate="1xV100-32GB")
    try:
        wait_node("ag-rq")
        low = submit({"priority": "training", "gpu_models": ["V100-32GB"],
                      "command": sh("echo first words; sleep 60")})
        wait_state(low, ("running",))
        assert wait_log(ag, low, "first words"), ag.log()
        high = submit({"priority": "inference", "gpu_models": ["V100-32GB"],
                       "command": sh("sleep 60")})
        j = wait_state(low, ("pending",))
        assert j["placement"] is None, j
        r = ok(cli(dm, "logs", low))
        assert r.out == "first words\n", r
        assert "job %d is pending again" % low in r.err and "previous run" in r.err and \
            "node ag-rq" in r.err, r
        c = dm.conn()
        try:
            c.request("GET", "/v1/jobs/%d/logs" % low,
                      headers={"Authorization": "Bearer " + dm.admin})
            resp = c.getresponse()
            assert resp.status == 200 and resp.read() == b"first words\n", resp.status
            assert resp.getheader("X-Allot-Log-Run") == "previous", resp.getheaders()
            assert resp.getheader("X-Allot-Log-Node") == "ag-rq", resp.getheaders()
            assert resp.getheader("X-Allot-Log-Size") == "12", resp.getheaders()
        finally:
            c.close()
        # placed again: the current run's log, with no word about a previous run
        expect(dm.req("POST", "/v1/jobs/%d/cancel" % high, token=dm.admin), 200)
        wait_state(low, ("running",))
        assert wait_log(ag, low, "first words", count=2), ag.log()
        r = ok(cli(dm, "logs", low))
        assert r.out == "first words\n" * 2 and r.err == "", r
        # pending again, then cancelled: still its last run's log
        high = submit({"priority": "inference", "gpu_models": ["V100-32GB"],
                       "command": sh("sleep 60")})
        wait_state(low, ("pending",))
        expect(dm.req("POST", "/v1/jobs/%d/cancel" % low, token=dm.admin), 200)
        wait_state(low, ("cancelled",))
        for args in (("logs", low), ("logs", "-f", low)):
            r = ok(cli(dm, *args))
            assert r.out == "first words\n" * 2, r
            assert "job %d is cancelled" % low in r.err and "node ag-rq" in r.err, r
        expect(dm.req("POST", "/v1/jobs/%d/cancel" % high, token=dm.admin), 200)
        # a job that never ran still has nothing to show
        never = submit({"gpu_models": ["B200-180GB"], "command": sh("true")})
        fails(cli(dm, "logs", never), 4, "not_started")
        expect(dm.req("POST", "/v1/jobs/%d/cancel" % never, token=dm.admin), 200)
        for args in (("logs", never), ("logs", "-f", never)):
            r = fails(cli(dm, *args), 4)
            assert r.out == "" and "job %d was cancelled before it was ever placed" % never \
                in r.err, r
    finally:
        ag.stop()
        expect(dm.req("POST", "/v1/nodes/ag-rq/cordon", token=dm.admin), 200)


def test_signal():
    """allot signal: every process of the task gets it, once; the job goes on
    (or ends by it); pending jobs, unknown signals and viewers are refused."""
    jid = submit({"gpus": 0, "cpus": 0.1, "command": sh(
        "trap 'echo got USR1' USR1; (trap 'echo child got USR1' USR1; echo child ready; "
        "while :; do sleep 0.1; done) & echo ready; while :; do sleep 0.1; done")})
    wait_state(jid, ("running",))
    assert wait_log(agent, jid, "child ready"), agent.task_log(jid)
    r = ok(cli(dm, "signal", "USR1", jid))
    assert r.out == "SIGUSR1 sent to job %d\n" % jid, r
    assert wait_log(agent, jid, "child got USR1") and wait_log(agent, jid, "\ngot USR1"), \
        agent.task_log(jid)
    time.sleep(1.5)  # heartbeats go on showing it: sent once all the same
    log = agent.task_log(jid)
    assert log.count("child got USR1") == 1 and log.count("\ngot USR1") == 1, log
    key = os.path.join(agent.dir, "tasks", "%d-0" % jid)
    assert os.path.exists(os.path.join(key, "signalled")), os.listdir(key)
    assert wait_state(jid, ("running",))["state"] == "running"
    ev = expect(dm.req("GET", "/v1/jobs/%d/events" % jid, token=dm.admin), 200)["events"]
    assert any(e["kind"] == "signal" and e["detail"].startswith("SIGUSR1 sent by ")
               for e in ev), ev
    # by number, through the API; 12 is USR2 (no trap: the shell ends by it)
    st, b = dm.req("POST", "/v1/jobs/%d/signal" % jid, {"signal": 12}, token=dm.admin)
    assert st == 202 and b["signal"] == "USR2", (st, b)
    j = wait_state(jid, ("failed", "succeeded"))
    assert j["state"] == "failed" and j["exit_code"] == 128 + 12, j
    # an array's first id: every running member
    first = submit({"gpus": 0, "cpus": 0.1, "array": "0-1", "command": sh(
        "trap 'echo got USR1' USR1; echo ready; while :; do sleep 0.1; done")})
    members = [j["id"] for j in expect(dm.req("GET", "/v1/jobs?array=%d" % first,
                                              token=dm.admin), 200)["jobs"]]
    assert len(members) == 2, members
    for m in members:
        wait_state(m, ("running",))
        assert wait_log(agent, m, "ready"), agent.task_log(m)
    r = ok(cli(dm, "signal", "usr1", first))
    assert r.out == "SIGUSR1 sent to 2 jobs of array %d\n" % first, r
    for m in members:
        assert wait_log(agent, m, "got USR1"), agent.task_log(m)
    r = ok(cli(dm, "signal", "USR1", "%d_1" % first))  # one member
    assert r.out == "SIGUSR1 sent to job %d_1\n" % first, r
    assert wait_log(agent, members[1], "got USR1", count=2), agent.task_log(members[1])
    assert agent.task_log(members[0]).count("got USR1") == 1
    ok(cli(dm, "cancel", first))
    # refused: an ended job, a pending one, unknown signals, a viewer
    r = fails(cli(dm, "signal", "TERM", jid), 4, "conflict")
    assert "only a starting or running job" in r.err, r
    pend = submit({"gpu_models": ["A100-80GB"], "command": sh("true")})
    fails(cli(dm, "signal", "TERM", pend), 4, "conflict")
    r = fails(cli(dm, "signal", "SEGV", pend), 1, "usage")
    assert "not a signal a job may be sent" in r.err, r
    fails(cli(dm, "signal", "TERM"), 1, "usage")
    expect(dm.req("POST", "/v1/jobs/%d/signal" % pend, {"signal": "SIGPIPE"}, token=dm.admin), 422)
    expect(dm.req("POST", "/v1/jobs/%d/signal" % pend, {}, token=dm.admin), 400)
    expect(dm.req("POST", "/v1/jobs/%d/signal" % pend, {"signal": "TERM", "x": 1},
                  token=dm.admin), 400)
    # --token on the verb's line is the one used (the line's copy is hidden)
    r = fails(cli(dm, "signal", "CONT", pend, "--token", dm.admin, token="allot_" + "0" * 64), 4,
              "conflict")
    r = fails(cli(dm, "priority", "nosuch", pend, "--token", dm.admin,
                  token="allot_" + "0" * 64), 6, "invalid")
    viewer = dm.token("viewer", "", "sig-viewer")
    fails(cli(dm, "signal", "TERM", pend, token=viewer), 3, "forbidden")
    fails(cli(dm, "signal", "TERM", 999999), 2, "not_found")
    expect(dm.req("POST", "/v1/jobs/%d/cancel" % pend, token=dm.admin), 200)


def test_signal_before_the_time_limit():
    """--signal USR1@S (sbatch --signal): USR1 S seconds before the time limit, once;
    then the limit stops the job. A warning without a limit, or one that would
    come before the start, is refused."""
    r = ok(cli(dm, "submit", "-t", "research/nlp", "--gpus", "0", "--cpus", "0.1",
               "--time-limit", "4s", "--signal", "USR1@2", "--", "sh", "-c",
               "trap 'echo warned' USR1; trap 'echo term; exit 0' TERM; echo ready; "
               "while :; do sleep 0.1; done"))
    jid = int(r.out)
    wait_state(jid, ("running",))
    assert wait_log(agent, jid, "ready"), agent.task_log(jid)
    assert wait_log(agent, jid, "warned", timeout=10), agent.task_log(jid)
    j = wait_state(jid, ("failed", "succeeded", "cancelled"))
    # the job ends at its limit when allotd says so; its TERM trap runs once the agent's
    # stop reaches it (bounded)
    assert wait_log(agent, jid, "term", timeout=10), agent.task_log(jid)
    log = agent.task_log(jid)
    assert log.count("warned") == 1 and log.index("warned") < log.index("term"), log
    ev = expect(dm.req("GET", "/v1/jobs/%d/events" % jid, token=dm.admin), 200)["events"]
    assert [e["detail"] for e in ev if e["kind"] == "warning"] == \
        ["SIGUSR1 sent: 2 s before its time limit"], ev
    assert "signal:       USR1@2 (before the time limit)" in ok(cli(dm, "show", jid)).out
    for body, want in (({"signal": "USR1"}, "needs \"time_limit\""),
                       ({"signal": "USR1@60", "time_limit": 60}, "before the job starts"),
                       ({"signal": "USR1@x", "time_limit": 600}, "0..65535"),
                       ({"signal": "SEGV@5", "time_limit": 600}, "SIG[@SECONDS]")):
        b = expect(dm.req("POST", "/v1/jobs", dict(body, tenant="research/nlp",
                                                  command=["true"]), token=dm.admin), 422)
        assert want in b["error"]["message"], b


def test_warning_once_across_allotd_restarts():
    """A run gets its --signal warning once, also when allotd restarts after it (the
    warning's event is read back), and a signal sent right after a restart arrives."""
    global dm
    jid = submit({"gpus": 0, "cpus": 0.1, "time_limit": 60, "signal": "USR1@59", "command": sh(
        "trap 'echo warned' USR1; trap 'echo got USR2' USR2; trap 'echo term; exit 0' TERM; "
        "echo ready; while :; do sleep 0.1; done")})
    wait_state(jid, ("running",))
    assert wait_log(agent, jid, "warned"), agent.task_log(jid)
    port, admin = dm.port, dm.admin
    dm.stop(signal.SIGKILL)
    dm = Daemon(dm.dir, args=["--listen", "127.0.0.1:%d" % port, "--preempt-grace", "2s",
                              "--preempt-min-runtime", "0s", "--meter-interval", "300ms"])
    dm.admin = admin
    ok(cli(dm, "signal", "USR2", jid))
    assert wait_log(agent, jid, "got USR2"), agent.task_log(jid)
    # stopped, it still handles the SIGTERM of a cancel (SIGCONT comes with it)
    ok(cli(dm, "signal", "STOP", jid))
    time.sleep(1)
    ok(cli(dm, "cancel", jid))
    assert wait_log(agent, jid, "term"), agent.task_log(jid)
    log = agent.task_log(jid)
    assert log.count("warned") == 1 and log.count("got USR2") == 1, log


def test_time_limit_changed():
    """allot time-limit (scontrol update TimeLimit): a member lowers a running job's
    limit and it stops there; raising is for admins; the change is stored."""
    member = dm.token("member", "research/nlp", "tl-member")
    jid = submit({"gpus": 0, "cpus": 0.1, "time_limit": 600, "command": sh(
        "trap 'echo term; exit 0' TERM; echo ready; while :; do sleep 0.1; done")})
    wait_state(jid, ("running",))
    assert wait_log(agent, jid, "ready"), agent.task_log(jid)
    r = fails(cli(dm, "time-limit", "2h", jid, token=member), 3, "forbidden")
    assert "may only lower" in r.err, r
    fails(cli(dm, "time-limit", "none", jid, token=member), 3, "forbidden")
    r = ok(cli(dm, "time-limit", "1h", jid))  # an admin raises it
    assert r.out == "job %d: time limit 3600 s\n" % jid, r
    r = ok(cli(dm, "time-limit", "2s", jid, token=member))
    assert r.out == "job %d: time limit 2 s\n" % jid, r
    j = wait_state(jid, ("failed", "succeeded", "cancelled"))
    assert "stopped at its runtime limit (2 s)" in (j["pending_reason"] or ""), j
    # the agent stops it at its next heartbeat after allotd ended it: its
    # TERM trap writes a moment after the job reads failed
    assert j["spec"]["time_limit"] == 2 and wait_log(agent, jid, "term"), (j, agent.task_log(jid))
    ev = expect(dm.req("GET", "/v1/jobs/%d/events" % jid, token=dm.admin), 200)["events"]
    assert [e["detail"] for e in ev if e["kind"] == "limit"] == \
        ["time limit 600 s -> 3600 s by admin", "time limit 3600 s -> 2 s by research/nlp:tl-member"], ev
    fails(cli(dm, "time-limit", "1h", jid), 4, "conflict")
    # a waiting job: none (admin), then its warning's limit must stay longer
    pend = submit({"gpu_models": ["A100-80GB"], "time_limit": 600, "signal": "USR1@300",
                   "command": sh("true")})
    r = fails(cli(dm, "time-limit", "5m", pend), 6, "invalid")
    assert "keeps its warning" in r.err and "300 s before a time limit of 300 s" in r.err, r
    r = fails(cli(dm, "time-limit", "none", pend), 6, "invalid")
    assert "needs \"time_limit\"" in r.err, r
    ok(cli(dm, "time-limit", "20m", pend))
    assert "time limit:   1200 s" in ok(cli(dm, "show", pend)).out
    fails(cli(dm, "time-limit", "soon", pend), 1, "usage")
    # no limit is no end: a member may give one (and ask for none, which it has)
    free = submit({"gpu_models": ["A100-80GB"], "command": sh("true")})
    assert ok(cli(dm, "time-limit", "none", free, token=member)).out == \
        "job %d: no time limit\n" % free
    ok(cli(dm, "time-limit", "20m", free, token=member))
    fails(cli(dm, "time-limit", "none", free, token=member), 3, "forbidden")
    expect(dm.req("POST", "/v1/jobs/%d/cancel" % free, token=dm.admin), 200)
    viewer = dm.token("viewer", "", "tl-viewer")
    fails(cli(dm, "time-limit", "1h", pend, token=viewer), 3, "forbidden")
    expect(dm.req("POST", "/v1/jobs/%d/time-limit" % pend, {"time_limit": "1h"},
                  token=dm.admin), 400)
    expect(dm.req("POST", "/v1/jobs/%d/cancel" % pend, token=dm.admin), 200)


def test_interrupted_run_says_the_job_goes_on():
    """Ctrl-C stops `allot run`, not its job, and says how to follow or stop it."""
    p = cli_started("run", "-t", "research/nlp", "--gpus", "0", "--", "sh", "-c",
                    "echo hi; sleep 30")
    jid = submitted_by(p)
    wait_state(jid, ("running",))
    assert p.stdout.readline() == "hi\n"
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=10)
    assert p.returncode == -signal.SIGINT, (p.returncode, out, err)  # a shell shows 130
    assert "job %d goes on" % jid in err and "allot cancel %d stops it" % jid in err, err
    assert wait_state(jid, ("running",))["state"] == "running"
    expect(dm.req("POST", "/v1/jobs/%d/cancel" % jid, token=dm.admin), 200)


def cli_started(*args):
    """`allot ARGS` started in the background against dm, as cli() runs it; the process
    (text pipes; the caller collects it with communicate, bounded)."""
    from cli_fixture import ALLOT
    e = {k: v for k, v in os.environ.items() if not k.startswith(("ALLOT_", "XDG_"))}
    e.update(HOME=fx.tempdir(), ALLOT_SERVER="http://127.0.0.1:%d" % dm.port,
             ALLOT_TOKEN=dm.admin)
    p = subprocess.Popen([ALLOT] + [str(a) for a in args], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=e)
    fx._procs.append(p)
    return p


def submitted_by(p):
    """The job `allot run` (process p) submitted, from its first line on stderr."""
    line = p.stderr.readline()
    assert line.startswith("allot: job ") and line.endswith(" submitted\n"), line
    return int(line.split()[2])


# On SIGTERM it writes on for a second (its stop grace, the agent's --grace 2s here).
SLOW_STOP_JOB = sh("trap 'echo TERM; sleep 0.5; echo after1; sleep 0.5; echo after2; exit 0' "
                   "TERM; echo ready; while :; do sleep 0.2; done")


def slow_stop_out(out, jid):
    """Whether out is the whole log of a SLOW_STOP_JOB (the shell may say between that
    its `sleep` was terminated)."""
    return out == agent.task_log(jid) and out.startswith("ready\n") and \
        out.endswith("TERM\nafter1\nafter2\n")


def test_follow_prints_what_a_stopping_job_writes():
    """allotd marks a cancelled job ended at once, but its task writes on through its stop
    grace: `allot logs -f` and `allot run` return only once the node's agent says the
    task's log is complete (its processes ended), with all of it printed. The API says so
    in X-Allot-Log-Complete."""
    jid = submit({"gpus": 0, "command": SLOW_STOP_JOB})
    wait_state(jid, ("running",))
    assert wait_log(agent, jid, "ready")  # its trap is set
    c = dm.conn()
    try:
        c.request("GET", "/v1/jobs/%d/logs" % jid, headers={"Authorization": "Bearer " + dm.admin})
        resp = c.getresponse()
        assert resp.status == 200 and resp.read() == b"ready\n", resp.status
        assert resp.getheader("X-Allot-Log-Complete") == "no", resp.getheaders()
    finally:
        c.close()
    p = cli_started("logs", "-f", jid)
    time.sleep(0.5)  # it follows
    expect(dm.req("POST", "/v1/jobs/%d/cancel" % jid, token=dm.admin), 200)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 0 and slow_stop_out(out, jid), (p.returncode, out, err)
    c = dm.conn()
    try:
        c.request("GET", "/v1/jobs/%d/logs" % jid, headers={"Authorization": "Bearer " + dm.admin})
        resp = c.getresponse()
        assert resp.read() == out.encode(), resp.status
        assert resp.getheader("X-Allot-Log-Complete") == "yes", resp.getheaders()
    finally:
        c.close()
    # allot run of a job cancelled while it runs: all its output, then exit 1
    p = cli_started("run", "-t", "research/nlp", "--gpus", "0", "--", *SLOW_STOP_JOB)
    jid = submitted_by(p)
    assert wait_log(agent, jid, "ready")
    expect(dm.req("POST", "/v1/jobs/%d/cancel" % jid, token=dm.admin), 200)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 1 and slow_stop_out(out, jid), (p.returncode, out, err)
    assert "job %d cancelled" % jid in err, err


def test_follow_through_agent_restart_and_a_move():
    """While `allot logs -f` follows a job: its node's agent killed and restarted (allotd
    answers 502 agent_unreachable meanwhile) is waited for, silently; the job evicted and run
    again on another node, where its log is another file, is read there from its start (the
    follower keeps an offset per node) and stderr says it runs on there, also while the new
    node has no log of it yet (it preempts a job there whose grace keeps the GPU: 404 no_log
    meanwhile). Each agent has a cgroup root of its own, as two nodes have (the task's
    cgroup is named by job and task)."""
    a = Agent(dm, AG, "ag-mv1", emulate="1xA100-40GB",
                  args=["--grace", "1s", "--cgroup-root", "%s-ag-mv1" % fx.CGROUP_ROOT])
    b = None
    try:
        wait_node("ag-mv1")
        # it stays on ag-mv1 until it is evicted; on ag-mv2 it ends after a second
        job = sh('echo start; [ "$ALLOT_NODE" = ag-mv2 ] || sleep 60; sleep 1; echo end')
        jid = submit({"gpu_models": ["A100-40GB"], "priority": "inference", "command": job})
        assert wait_log(a, jid, "start"), a.log()
        p = cli_started("logs", "-f", jid)
        time.sleep(0.5)  # it follows
        assert a.stop(signal.SIGKILL) == -signal.SIGKILL
        end = time.time() + 10
        while time.time() < end and "agent_unreachable" not in \
                dm.req("GET", "/v1/jobs/%d/logs" % jid, token=dm.admin, raw=True)[1]:
            time.sleep(0.1)
        time.sleep(1)  # the follower asks, and is answered agent_unreachable, a few times
        a.start()
        b = Agent(dm, AG, "ag-mv2", emulate="1xA100-40GB",
                  args=["--grace", "3s", "--cgroup-root", "%s-ag-mv2" % fx.CGROUP_ROOT])
        wait_node("ag-mv2")
        # ag-mv2's GPU is busy with a job that takes 2 s to stop when preempted
        filler = submit({"gpu_models": ["A100-40GB"], "priority": "training",
                         "command": sh("trap 'sleep 2; exit 0' TERM; echo f; "
                                       "while :; do sleep 0.2; done")})
        assert wait_log(b, filler, "f"), b.log()
        assert p.poll() is None, p.communicate(timeout=5)
        ok(cli(dm, "drain", "--evict", "ag-mv1"))
        end = time.time() + 10
        while time.time() < end and "no_log" not in \
                dm.req("GET", "/v1/jobs/%d/logs" % jid, token=dm.admin, raw=True)[1]:
            time.sleep(0.05)
        out, err = p.communicate(timeout=30)
        assert p.returncode == 0 and out == "start\nstart\nend\n", (p.returncode, out, err)
        assert "job %d runs again, on node ag-mv2" % jid in err, err
        assert "agent_unreachable" not in err and "no_log" not in err, err
        assert wait_state(jid, ("succeeded",))["state"] == "succeeded"
        expect(dm.req("POST", "/v1/jobs/%d/cancel" % filler, token=dm.admin), 200)
    finally:
        for ag in (a, b):
            if ag:
                ag.stop()
        for n in ("ag-mv1", "ag-mv2"):
            dm.req("POST", "/v1/nodes/%s/cordon" % n, token=dm.admin)


def test_follow_through_an_allotd_restart():
    """allotd restarted while `allot run` follows a job knows the node's log endpoint only
    from the agent's next heartbeat (502 no_agent until then): the CLI waits for it,
    silently, and prints the whole output. The agent is held (SIGSTOP) through the
    restart, so that the CLI surely asks before it is back."""
    global dm
    p = cli_started("run", "-t", "research/nlp", "--gpus", "0", "--", "sh", "-c",
                    "echo one; sleep 4; echo two")
    jid = submitted_by(p)
    assert wait_log(agent, jid, "one")
    port, admin = dm.port, dm.admin
    os.kill(agent.proc.pid, signal.SIGSTOP)
    try:
        dm.stop(signal.SIGKILL)
        dm = Daemon(dm.dir, args=["--listen", "127.0.0.1:%d" % port, "--preempt-grace", "2s",
                                  "--preempt-min-runtime", "0s", "--meter-interval", "300ms"])
        dm.admin = admin
        end = time.time() + 10
        while time.time() < end and "no_agent" not in \
                dm.req("GET", "/v1/jobs/%d/logs" % jid, token=admin, raw=True)[1]:
            time.sleep(0.1)
        time.sleep(1.5)  # the CLI asks, and is answered no_agent, a few times
    finally:
        os.kill(agent.proc.pid, signal.SIGCONT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0 and out == "one\ntwo\n", (p.returncode, out, err)
    # allotd down for a moment: the client's own retries may say so; nothing else
    assert all(l == "allot: job %d submitted" % jid or "retrying in" in l or
               "allotd does not answer" in l or l == "allot: allotd answers again"
               for l in err.splitlines()), err


def test_follow_through_a_long_allotd_outage():
    """allotd down for longer than the client's retries (4, about 4 s): `allot run` and
    `allot events -w` wait for it (saying so once, and when it answers again) instead of
    giving up with exit 5 while the job goes on; run then exits with the job's code."""
    global dm
    p = cli_started("run", "-t", "research/nlp", "--gpus", "0", "--", "sh", "-c",
                    "echo one; sleep 9; echo two; exit 4")
    jid = submitted_by(p)
    ev = cli_started("events", "-w", jid)
    assert wait_log(agent, jid, "one")
    port, admin = dm.port, dm.admin
    dm.stop(signal.SIGKILL)
    time.sleep(6)  # past the retries of both
    assert p.poll() is None and ev.poll() is None, (p.poll(), ev.poll())
    dm = Daemon(dm.dir, args=["--listen", "127.0.0.1:%d" % port, "--preempt-grace", "2s",
                              "--preempt-min-runtime", "0s", "--meter-interval", "300ms"])
    dm.admin = admin
    out, err = p.communicate(timeout=60)
    assert p.returncode == 4 and out == "one\ntwo\n", (p.returncode, out, err)
    assert "allotd does not answer" in err and "allotd answers again" in err, err
    out, eerr = ev.communicate(timeout=30)
    assert ev.returncode == 0 and " failed " in out, (ev.returncode, out, eerr)
    assert eerr.count("allotd does not answer") == 1, eerr


# A job that says when it starts and when SIGTERM reaches it (nanoseconds).
TRAP_JOB = sh("echo start $(date +%s%N); trap 'echo stop $(date +%s%N); exit 143' TERM; "
              "sleep 60 & wait")


def lease_world(name, emulate="1xT4", data_dir=None):
    """An allotd of its own with a 2 s lease (on data_dir, initialised there, when given),
    the test tenants and one agent with a 1 s grace. The agent has a cgroup root of its own:
    its jobs are numbered from 1 as another allotd's are, and a task left running by an
    earlier test (an agent stopped keeps its tasks) must not share a cgroup with a task of
    the same name here, which its supervisor would kill when it ends."""
    admin = fx.init(data_dir) if data_dir else None
    d = Daemon(data_dir, args=["--lease", "2s"])
    d.admin = admin or d.admin
    expect(d.req("PUT", "/v1/tenants", TENANTS, token=d.admin), 200)
    return d, Agent(d, d.token("agent", "", "agents"), name, emulate=emulate,
                    args=["--grace", "1s", "--cgroup-root", "%s-%s" % (fx.CGROUP_ROOT, name)])


def submit_to(d, command, **fields):
    body = dict({"tenant": "research/nlp", "gpus": 1, "command": command}, **fields)
    return expect(d.req("POST", "/v1/jobs", body, token=d.admin), 201)["id"]


def wait_log(ag, job, word, count=1, timeout=15):
    """Waits (bounded) until the job's task log holds word count times; returns whether."""
    path = os.path.join(ag.dir, "logs", str(job), "task-0.log")
    end = time.time() + timeout
    while time.time() < end:
        if os.path.exists(path) and ag.task_log(job).count(word) >= count:
            return True
        time.sleep(0.05)
    return False


def stamps(ag, job, word):
    words = ag.task_log(job).split()
    return [int(words[i + 1]) for i, w in enumerate(words) if w == word]


def test_fencing_never_twice():
    """allotd stops answering (SIGSTOP) for longer than the lease: the agent stops its task
    before allotd counts the node lost and requeues the job, so when allotd is back and
    places the job again, the first run has ended before the second starts."""
    d2, ag = lease_world("fence-1")
    try:
        j = submit_to(d2, TRAP_JOB)
        assert wait_log(ag, j, "start")
        os.kill(d2.proc.pid, signal.SIGSTOP)
        time.sleep(3.5)
        os.kill(d2.proc.pid, signal.SIGCONT)
        wait_log(ag, j, "start", 2, timeout=20)
        starts, stops = stamps(ag, j, "start"), stamps(ag, j, "stop")
        assert len(starts) == 2 and stops and stops[0] < starts[1], (starts, stops, ag.log())
        assert "allotd unreachable for most of the lease: stopping 1 tasks" in ag.log(), ag.log()
        assert [e["kind"] for e in events_of(d2, j)].count("requeued") == 1, events_of(d2, j)
    finally:
        ag.stop()
        if d2.proc.poll() is None:
            os.kill(d2.proc.pid, signal.SIGCONT)
        d2.stop()


def test_allotd_down_past_the_lease():
    """allotd is killed and stays down past the lease: the agent stops its tasks on its own
    (fenced). allotd, started again on its store, hears that they were stopped: the job
    that may be requeued queues again with an event and runs anew, the one that may not
    ends lost; neither is started again behind allotd's back."""
    d2, ag = lease_world("fence-2", emulate="2xT4")
    try:
        again = submit_to(d2, sh("echo start; sleep 60"))
        once = submit_to(d2, sh("echo start; sleep 60"), requeue=False)
        assert wait_log(ag, again, "start") and wait_log(ag, once, "start")
        port, admin = d2.port, d2.admin
        d2.stop(signal.SIGKILL)
        end = time.time() + 10
        while time.time() < end and "stopping 2 tasks" not in ag.log():
            time.sleep(0.1)
        assert "stopping 2 tasks" in ag.log(), ag.log()
        d2 = Daemon(d2.dir, args=["--listen", "127.0.0.1:%d" % port, "--lease", "2s"])
        d2.admin = admin
        end = time.time() + 20
        j = None
        while time.time() < end:
            j = expect(d2.req("GET", "/v1/jobs/%d" % once, token=admin), 200)
            if j["state"] == "lost":
                break
            time.sleep(0.1)
        assert j["state"] == "lost" and "out of reach" in j["pending_reason"], (j, ag.log())
        assert wait_log(ag, again, "start", 2, timeout=20), ag.log()
        ev = [e for e in events_of(d2, again) if e["kind"] == "requeued"]
        assert len(ev) == 1 and "could not reach allotd" in ev[0]["detail"], events_of(d2, again)
        assert ag.task_log(once).count("start") == 1, ag.log()
    finally:
        ag.stop()
        d2.stop()


def test_supervisor_fences_first():
    """A task's supervisor fences it on its own when the agent is slower to (allotd out of
    reach past the lease: the supervisor looks every 200 ms, the agent after a failed
    heartbeat): it writes the task's `fenced` marker, then SIGTERMs the task. Done here by
    hand, as the supervisor does it, so that the supervisor surely comes first. The agent
    reports the task as fenced (lost), not as failed by the fence's SIGTERM, and allotd
    queues the job again instead of ending it failed with exit 143."""
    j = submit({"gpus": 0, "command": sh("echo start; sleep 60")})
    assert wait_log(agent, j, "start")
    d = os.path.join(agent.dir, "tasks", "%d-0" % j)
    with open(os.path.join(d, "pid")) as f:
        pid = int(f.read().split()[1])
    with open(os.path.join(d, "fenced"), "w") as f:
        f.write("agent out of reach\n")
    os.kill(-pid, signal.SIGTERM)
    assert wait_log(agent, j, "start", 2, timeout=20), (events_of(dm, j), agent.log()[-2000:])
    kinds = [e["kind"] for e in events_of(dm, j)]
    assert "failed" not in kinds and kinds.count("requeued") == 1, events_of(dm, j)
    expect(dm.req("POST", "/v1/jobs/%d/cancel" % j, token=dm.admin), 200)
    wait_state(j, ("cancelled",))


def test_adopted_start_held_by_the_agent():
    """A requeued job's next run is placed on node b and held while its last run ends on
    node a (its grace); allotd is killed then and started again. The new allotd does not
    know what the old one held, so it shows the adopted run with "hold": true until every
    node has answered: a's agent lists the job as still stopping, b's agent keeps the run
    unstarted, and starts it only once a's processes are gone."""
    d2 = Daemon(None, args=["--lease", "30s"])
    expect(d2.req("PUT", "/v1/tenants", TENANTS, token=d2.admin), 200)
    tok = d2.token("agent", "", "agents")
    ags = {}
    try:
        for n in ("hold-a", "hold-b"):
            ags[n] = Agent(d2, tok, n, emulate="1xT4",
                           args=["--grace", "15s", "--cgroup-root", "%s-%s" % (fx.CGROUP_ROOT, n)])
        for _ in range(200):
            nodes = expect(d2.req("GET", "/v1/nodes", token=d2.admin), 200)["nodes"]
            if len([n for n in nodes if n["name"] in ags]) == 2:
                break
            time.sleep(0.05)
        j = submit_to(d2, sh("echo start $(date +%s%N); trap 'sleep 6; echo gone $(date +%s%N); "
                             "exit 143' TERM; sleep 60 & wait"))
        end = time.time() + 15
        while time.time() < end and not any(os.path.exists(os.path.join(
                x.dir, "logs", str(j), "task-0.log")) and "start" in x.task_log(j)
                for x in ags.values()):
            time.sleep(0.05)
        first = [x for x in ags.values() if os.path.exists(os.path.join(
            x.dir, "logs", str(j), "task-0.log"))][0]
        then = [x for x in ags.values() if x is not first][0]
        expect(d2.req("POST", "/v1/nodes/%s/cordon" % first.name, token=d2.admin), 200)
        expect(d2.req("POST", "/v1/jobs/%d/requeue" % j, {}, token=d2.admin), 202)
        end = time.time() + 10
        while time.time() < end and "waiting" not in [e["kind"] for e in events_of(d2, j)]:
            time.sleep(0.05)
        assert "waiting" in [e["kind"] for e in events_of(d2, j)], d2.log()[-3000:]
        port, admin = d2.port, d2.admin
        d2.stop(signal.SIGKILL)
        d2 = Daemon(d2.dir, args=["--listen", "127.0.0.1:%d" % port, "--lease", "30s"])
        d2.admin = admin
        assert wait_log(then, j, "start", timeout=30), (then.log(), d2.log()[-3000:])
        assert wait_log(first, j, "gone", timeout=15), first.log()
        gone, started = stamps(first, j, "gone")[0], stamps(then, j, "start")[0]
        assert started > gone, (first.task_log(j), then.task_log(j), d2.log()[-3000:])
        expect(d2.req("POST", "/v1/jobs/%d/cancel" % j, token=d2.admin), 200)
    finally:
        for x in ags.values():
            x.stop()
        d2.stop()


def test_silent_server_first():
    """An agent given two allotd URLs, the first taking connections and answering nothing
    (a frozen allotd, or one cut off from its store, may have lost the lead): after the
    request's timeout it tries the next and registers there, and stays with it."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(16)  # never accepted
    ag = None
    try:
        ag = Agent(dm, AG, "ag-silent", emulate="1xT4",
                   server="http://127.0.0.1:%d,http://127.0.0.1:%d" % (s.getsockname()[1],
                                                                      dm.port),
                   args=["--cgroup-root", "%s-silent" % fx.CGROUP_ROOT])
        end = time.time() + 30
        seen = []
        while time.time() < end and "ag-silent" not in seen:
            seen = [n["name"] for n in
                    expect(dm.req("GET", "/v1/nodes", token=dm.admin), 200)["nodes"]]
            time.sleep(0.2)
        assert "ag-silent" in seen, ag.log()
        t = time.time()  # heartbeats go on (no 10 s timeout each): the node stays ready
        time.sleep(2)
        n = [x for x in expect(dm.req("GET", "/v1/nodes", token=dm.admin), 200)["nodes"]
             if x["name"] == "ag-silent"][0]
        assert n["state"] == "ready" and n["last_heartbeat"] >= int(t), n
    finally:
        if ag:
            ag.stop()
        s.close()
        expect(dm.req("POST", "/v1/nodes/ag-silent/cordon", token=dm.admin), 200)


def test_killed_agent_fences():
    """An agent killed outright cannot fence, so each task's supervisor does: once the
    node's lease is about to run out with no word from the agent it stops the task. The
    job allotd requeues then never runs twice at once, and the agent started again adopts
    the stopped task as fenced and runs the job's new run."""
    d2, ag = lease_world("fence-3")
    try:
        j = submit_to(d2, TRAP_JOB)
        assert wait_log(ag, j, "start")
        ag.stop(signal.SIGKILL)
        assert wait_log(ag, j, "stop", timeout=10), ag.task_log(j)
        assert os.path.exists(os.path.join(ag.dir, "tasks", "%d-0" % j, "fenced"))
        ag.start()
        wait_log(ag, j, "start", 2, timeout=20)
        starts, stops = stamps(ag, j, "start"), stamps(ag, j, "stop")
        assert len(starts) == 2 and stops[0] < starts[1], (starts, stops, ag.log())
        assert [e["kind"] for e in events_of(d2, j)].count("requeued") == 1, events_of(d2, j)
    finally:
        ag.stop()
        d2.stop()


def test_fence_ends_within_the_lease():
    """A fenced task's grace is cut so that it is gone before allotd counts its node lost
    and queues the job again, however long the agent's --grace: with a 10 s lease and a
    30 s grace, a task that ignores SIGTERM is killed before the job is requeued, so the
    job never runs twice."""
    d2 = Daemon(args=["--lease", "10s"])
    expect(d2.req("PUT", "/v1/tenants", TENANTS, token=d2.admin), 200)
    ag = Agent(d2, d2.token("agent", "", "agents"), "fence-5", emulate="1xT4",
               args=["--grace", "30s", "--cgroup-root", "%s-fence-5" % fx.CGROUP_ROOT])
    try:
        j = submit_to(d2, sh("trap '' TERM; echo pid $$; while :; do sleep 0.2; done"))
        assert wait_log(ag, j, "pid")
        pid = int(ag.task_log(j).split("pid ")[1].split()[0])
        ag.stop(signal.SIGKILL)
        end = time.time() + 30
        while time.time() < end and "requeued" not in [e["kind"] for e in events_of(d2, j)]:
            time.sleep(0.05)  # bounded: until allotd counts the node lost
        assert "requeued" in [e["kind"] for e in events_of(d2, j)], events_of(d2, j)
        assert not pid_alive(pid), "the task outlived its node's lease"
        assert os.path.exists(os.path.join(ag.dir, "tasks", "%d-0" % j, "fenced"))
    finally:
        ag.stop()
        d2.stop()


def pid_alive(pid):
    """Whether process pid runs (a zombie does not)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_fence_kills_the_whole_task():
    """A job's process in a session of its own (setsid), which signals to the task's process
    group miss: when the supervisor of a task whose agent was killed fences it, nothing of
    the task is left by the time its exit file says it ended, so no process keeps its GPU
    while allotd places the job elsewhere."""
    d2, ag = lease_world("fence-4")
    try:
        j = submit_to(d2, sh("setsid sleep 60 & echo bg $!; " + TRAP_JOB[2]))
        assert wait_log(ag, j, "start")
        bg = int(ag.task_log(j).split("bg ")[1].split()[0])
        assert pid_alive(bg) and os.getsid(bg) == bg, ag.task_log(j)
        ag.stop(signal.SIGKILL)
        exitf = os.path.join(ag.dir, "tasks", "%d-0" % j, "exit")
        end = time.time() + 15
        while time.time() < end and not os.path.exists(exitf):
            time.sleep(0.05)
        assert os.path.exists(os.path.join(ag.dir, "tasks", "%d-0" % j, "fenced")), ag.log()
        assert os.path.exists(exitf) and not pid_alive(bg), (ag.task_log(j), pid_alive(bg))
    finally:
        ag.stop()
        d2.stop()


def procs_in_cgroup(key):
    """The pids whose cgroup (any hierarchy) is the task's KEY of this test run."""
    found = []
    for p in os.listdir("/proc"):
        try:
            with open("/proc/%s/cgroup" % p) as f:
                if "/%s/%s\n" % (fx.CGROUP_ROOT, key) in f.read() and pid_alive(int(p)):
                    found.append(int(p))
        except (OSError, ValueError):
            pass
    return found


def test_ended_task_leaves_nothing():
    """A job that ends leaving behind a process in a session of its own that forks on and
    on (each child outliving its parent by a moment): nothing of it is left once the task's
    end is reported: the task's cgroup is frozen before its processes are killed."""
    chain = os.path.join(os.path.dirname(fx.AGENT), "fork-chain")
    jid = submit({"gpus": 0, "command": sh("%s 3 30 & sleep 0.5; exit 0" % chain)})
    j = wait_state(jid, ("succeeded", "failed"))
    assert j["state"] == "succeeded", (j, agent.task_log(jid))
    time.sleep(1)
    assert procs_in_cgroup("%d-0" % jid) == [], procs_in_cgroup("%d-0" % jid)


def test_store_full_keeps_jobs_running():
    """allotd's disk fills up: nothing new can be stored (a submission fails, /readyz says
    why), but heartbeats still renew the lease, so the agent does not fence and allotd does
    not count the node lost: the running job goes on untouched, before and after the disk
    has room again."""
    small = os.path.join(fx.tempdir(), "small")
    os.makedirs(small)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", small], check=True)
    d2 = ag = None
    filler = os.path.join(small, "filler")
    try:
        d2, ag = lease_world("full-1", data_dir=small)
        j = submit_to(d2, TRAP_JOB)
        assert wait_log(ag, j, "start")
        with open(filler, "wb") as f:
            try:
                for _ in range(64):  # bounded: the file system holds 8 MiB
                    f.write(b"\0" * (1 << 20))
                    f.flush()
            except OSError:
                pass
        st, _ = d2.req("POST", "/v1/jobs", {"tenant": "research/nlp", "gpus": 1,
                                            "command": ["true"]}, token=d2.admin)
        assert st >= 500, st
        time.sleep(4)  # twice the lease
        st, body = d2.req("GET", "/readyz")
        assert st == 503 and body["error"]["code"] == "store", (st, body)
        assert "stop" not in ag.task_log(j), (ag.task_log(j), ag.log())
        os.unlink(filler)
        end = time.time() + 15
        while time.time() < end and d2.req("GET", "/readyz")[0] != 200:
            time.sleep(0.1)
        assert d2.req("GET", "/readyz")[0] == 200
        time.sleep(1)
        assert expect(d2.req("GET", "/v1/jobs/%d" % j, token=d2.admin), 200)["state"] == \
            "running"
        kinds = [e["kind"] for e in events_of(d2, j)]
        assert "requeued" not in kinds and "stop" not in ag.task_log(j), (kinds, ag.log())
    finally:
        if ag:
            ag.stop()
        if d2:
            d2.stop()
        subprocess.run(["umount", small], check=False)


def test_long_poll_saturated():
    """With every worker allotd lends to long polls taken, the other agents' polls are
    answered at once: they fall back to the heartbeat interval, never to a busy loop."""
    d2 = Daemon(args=["--workers", "3"])  # one long poll at a time
    ags = []
    try:
        tok = d2.token("agent", "", "agents")
        ags = [Agent(d2, tok, "sat-%d" % i, emulate="1xT4", args=["--poll-wait", "2s"])
               for i in range(3)]

        def beats():
            st, text = d2.req("GET", "/metrics", raw=True)
            return sum(float(l.split()[-1]) for l in text.splitlines()
                       if l.startswith("allot_api_requests_total") and "heartbeat" in l)

        time.sleep(1.5)
        b0 = beats()
        time.sleep(2)
        n = beats() - b0
        # 3 agents x 2 s at 200 ms heartbeats at most: 30; a busy loop is thousands
        print("heartbeats in 2 s:", n)
        assert n < 60, n
    finally:
        for ag in ags:
            ag.stop()
        d2.stop()


def test_agent_restart_adopts():
    global agent
    jid = submit({"command": sh("echo run-once; sleep 2; echo done")})
    wait_state(jid, ("running",))
    assert agent.stop(signal.SIGKILL) == -signal.SIGKILL
    # the /tmp of a job the agent no longer has goes at its start; the running job's stays
    stale = os.path.join(agent.dir, "jobfs", "999999", "tmp")
    os.makedirs(stale)
    mine = os.path.join(agent.dir, "jobfs", str(jid), "tmp")
    assert os.path.ismount(mine), mine
    time.sleep(0.5)
    agent.start()
    end = time.time() + 5
    while time.time() < end and os.path.exists(os.path.dirname(stale)):
        time.sleep(0.05)
    assert not os.path.exists(os.path.dirname(stale)) and os.path.ismount(mine)
    j = wait_state(jid, ("succeeded", "failed"), timeout=20)
    assert j["state"] == "succeeded", (j, agent.log())
    out = agent.task_log(jid)
    assert out.count("run-once") == 1 and "done" in out, out
    assert "adopted" in agent.log(), agent.log()
    # restarted, it speaks with its node credential (a new one is not issued)
    assert "speaking with the node credential" in agent.log(), agent.log()
    assert len(node_creds("ag-1")) == 1
    # metered exactly: one run, its whole time, across the agent's kill -9
    end = time.time() + 10
    while time.time() < end:
        rows = expect(dm.req("GET", "/v1/usage?by=job&from=%d" % (j["start_time"] - 1),
                             token=dm.admin), 200)["rows"]
        r = [x for x in rows if x["key"] == str(jid)]
        if r:
            break
        time.sleep(0.1)
    assert r and r[0]["gpu_seconds"] == j["end_time"] - j["start_time"], (r, j)
    # a task whose process vanished while the agent was down is reported lost:
    # its job queues again, as when its node is lost; one that runs once ends lost
    again = submit({"command": sh("sleep 30")})
    jid = submit({"command": sh("sleep 30"), "requeue": False})
    wait_state(again, ("running",))
    wait_state(jid, ("running",))
    agent.stop(signal.SIGKILL)
    for k in (again, jid):
        with open(os.path.join(agent.dir, "tasks", "%d-0" % k, "pid")) as f:
            sup, pid = [int(x) for x in f.read().split()[:2]]
        os.kill(sup, signal.SIGKILL)
        os.kill(-pid, signal.SIGKILL)
    time.sleep(0.3)
    agent.start()
    j = wait_state(jid, ("lost",))
    assert "vanished" in j["pending_reason"], j
    end = time.time() + 15
    while time.time() < end:
        ev = expect(dm.req("GET", "/v1/jobs/%d/events" % again, token=dm.admin), 200)["events"]
        req = [e["detail"] for e in ev if e["kind"] == "requeued"]
        if req:
            break
        time.sleep(0.1)
    assert req and "vanished" in req[0], ev
    expect(dm.req("POST", "/v1/jobs/%d/cancel" % again, token=dm.admin), 200)


def test_usage_samples():
    """The agent samples each task (here: 35 % emulated utilisation, its cgroup's CPU time)
    and allotd meters them: the job's usage shows the utilisation and the CPU it burnt."""
    t0 = int(time.time()) - 1
    jid = submit({"command": sh("i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; sleep 1")})
    j = wait_state(jid, ("succeeded", "failed"), timeout=60)
    assert j["state"] == "succeeded", j
    end = time.time() + 15
    while time.time() < end:
        rows = expect(dm.req("GET", "/v1/usage?by=job&from=%d" % t0, token=dm.admin), 200)["rows"]
        r = [x for x in rows if x["key"] == str(jid)]
        if r and r[0]["sm_util_avg"] is not None:
            break
        time.sleep(0.2)
    assert r and r[0]["sm_util_avg"] == 35.0, rows
    assert r[0]["gpu_seconds"] == j["end_time"] - j["start_time"], (r, j)
    assert r[0]["cpu_used_seconds"] >= 0.0, r


def test_samples_buffered_while_allotd_down():
    """Samples the agent takes while allotd is away are kept and sent later: the job's
    utilisation is measured over the outage too."""
    global dm
    t0 = int(time.time()) - 1
    jid = submit({"command": sh("sleep 5")})
    wait_state(jid, ("running",))
    time.sleep(1)
    port, admin = dm.port, dm.admin
    dm.stop(signal.SIGKILL)
    time.sleep(2.5)  # the agent samples every 200 ms and cannot send
    dm = Daemon(dm.dir, args=["--listen", "127.0.0.1:%d" % port, "--meter-interval", "300ms"])
    dm.admin = admin
    j = wait_state(jid, ("succeeded", "failed"), timeout=30)
    assert j["state"] == "succeeded", j
    end = time.time() + 15
    while time.time() < end:
        rows = expect(dm.req("GET", "/v1/usage?by=job&from=%d" % t0, token=dm.admin), 200)["rows"]
        r = [x for x in rows if x["key"] == str(jid)]
        if r and r[0]["measured_seconds"] >= 4:
            break
        time.sleep(0.2)
    # measured across the outage: without the buffer at most 5 - 2.5 s. The agent samples
    # on its own clock, also while a heartbeat waits on the restarting allotd (about 1.5 s
    # under the sanitizer build), so the restart costs no samples either: at least 4 s
    print("  measured %.1f s of the 5 s job" % (r[0]["measured_seconds"] if r else -1))
    assert r and r[0]["measured_seconds"] >= 4, r


class HoldingProxy:
    """allotd as a slow agent sees it: a proxy on a loopback port of its own that passes
    every request on to allotd and, while `hold` > 0, holds the answer to each heartbeat
    that long (an allotd restarting, or stopped). It records the usage samples the
    heartbeats carry, by (job, task, at)."""

    def __init__(self, upstream_port):
        self.hold = 0.0
        self.held = 0
        self.samples = {}
        self.lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # the agent keeps its connection

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                beat = self.path.endswith("/heartbeat")
                if beat:
                    usage = json.loads(body).get("usage") or {}
                    with proxy.lock:
                        for smp in usage.get("samples") or []:
                            proxy.samples[(smp["job"], smp["task"], smp["at"])] = smp
                c = http.client.HTTPConnection("127.0.0.1", upstream_port, timeout=30)
                try:
                    c.request("POST", self.path, body=body,
                              headers={k: self.headers[k] for k in
                                       ("Authorization", "Content-Type") if self.headers[k]})
                    r = c.getresponse()
                    status, data = r.status, r.read()
                finally:
                    c.close()
                hold = proxy.hold
                if beat and hold > 0:
                    time.sleep(hold)
                    with proxy.lock:
                        proxy.held += 1
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def times(self, job):
        """The sample times (ms) of job seen so far, in order."""
        with self.lock:
            return sorted(at for (j, _, at) in self.samples if j == job)

    def stop(self):
        self.hold = 0.0
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


def test_samples_not_delayed_by_a_slow_allotd():
    """The agent samples its tasks on its own clock: while allotd holds each heartbeat's
    answer for 2 s, samples are still taken every sample-interval (200 ms) and sent later,
    not one per held heartbeat (the gaps between them stay far below the 2 s hold)."""
    proxy = HoldingProxy(dm.port)
    ag = None
    jid = None
    try:
        ag = Agent(dm, AG, "ag-slow", emulate="1xP100", server=proxy.url,
                   args=["--emulate-util", "35", "--sample-interval", "200ms"])
        wait_node("ag-slow")
        jid = submit({"gpu_models": ["P100"], "command": sh("sleep 60")})
        wait_state(jid, ("running",))
        end = time.time() + 15
        while len(proxy.times(jid)) < 3 and time.time() < end:
            time.sleep(0.05)
        assert len(proxy.times(jid)) >= 3, proxy.times(jid)
        start = time.time()
        proxy.hold = 2.0
        end = start + 30  # bounded: two held heartbeats take about 5 s
        while proxy.held < 2 and time.time() < end:
            time.sleep(0.05)
        stop = time.time()
        proxy.hold = 0.0
        assert proxy.held >= 2, proxy.held
        # what was sampled while the heartbeats were held arrives with the next ones
        end = time.time() + 20
        while not [t for t in proxy.times(jid) if t > stop * 1000 + 500] and time.time() < end:
            time.sleep(0.05)
        times = [t for t in proxy.times(jid) if start * 1000 <= t <= stop * 1000]
        gaps = [b - a for a, b in zip(times, times[1:])]
        print("  %d samples in %.1f s of held heartbeats, largest gap %s ms"
              % (len(times), stop - start, max(gaps) if gaps else None))
        # one sample per held heartbeat would leave gaps of 2 s and more; 200 ms apart, with
        # room for a loaded machine
        assert len(times) >= (stop - start) / 0.2 / 3, times
        assert gaps and max(gaps) < 1200, gaps
    finally:
        if jid is not None:
            dm.req("POST", "/v1/jobs/%d/cancel" % jid, token=dm.admin)
            if ag:  # its task stopped (SIGTERM, 2 s grace) and forgotten
                task_dir = os.path.join(ag.dir, "tasks", "%d-0" % jid)
                end = time.time() + 20
                while os.path.exists(task_dir) and time.time() < end:
                    time.sleep(0.1)
        if ag:
            ag.stop()
        proxy.stop()
        dm.req("POST", "/v1/nodes/ag-slow/cordon", token=dm.admin)


def test_late_samples_rolled_up():
    """Samples of hours the roll-up already made final (an agent resending what it
    buffered through an outage longer than an hour) are rolled up again, not only stored.
    The outage is played by marking the hours from two hours ahead final in the store; the
    job is the only one of product/search, so its tenant's roll-up is its own."""
    global dm
    import sqlite3
    t0 = int(time.time()) - 1
    jid = submit({"tenant": "product/search", "command": sh("sleep 4")})
    wait_state(jid, ("running",))
    port, admin = dm.port, dm.admin
    dm.stop(signal.SIGKILL)
    db = sqlite3.connect(os.path.join(dm.dir, "allot.db"))
    db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('meter_final', ?)",
               (str(t0 // 3600 * 3600 + 7200),))
    db.commit()
    db.close()
    dm = Daemon(dm.dir, args=["--listen", "127.0.0.1:%d" % port, "--meter-interval", "300ms"])
    dm.admin = admin
    j = wait_state(jid, ("succeeded", "failed"), timeout=30)
    assert j["state"] == "succeeded", j
    end = time.time() + 15
    r = []
    while time.time() < end:
        rows = expect(dm.req("GET", "/v1/usage?tenant=product/search&from=%d" % t0,
                             token=dm.admin), 200)["rows"]
        r = [x for x in rows if x["key"] == "product/search"]
        if r and r[0]["gpu_seconds"] >= 3.5 and (r[0]["measured_seconds"] or 0) >= 2:
            break
        time.sleep(0.2)
    # the roll-up's own figures (by=job would read the runs and samples directly)
    assert r and r[0]["gpu_seconds"] >= 3.5 and r[0]["measured_seconds"] >= 2, r


def test_allotd_restart():
    global dm
    jid = submit({"command": sh("sleep 2; echo finished")})
    wait_state(jid, ("running",))
    port, admin = dm.port, dm.admin
    dm.stop(signal.SIGKILL)
    dm = Daemon(dm.dir, args=["--listen", "127.0.0.1:%d" % port])
    dm.admin = admin
    j = wait_state(jid, ("succeeded", "failed"), timeout=30)
    assert j["state"] == "succeeded" and agent.task_log(jid).count("finished") == 1, j


if __name__ == "__main__":
    if os.geteuid() != 0:
        print("SKIP: allot-agent needs root for cgroups and user switching")
        raise SystemExit(0)
    # a program the agent's PATH finds and the job's does not
    PROBE_DIR = fx.tempdir()
    os.chmod(PROBE_DIR, 0o755)
    with open(os.path.join(PROBE_DIR, "allot-path-probe"), "w") as f:
        f.write("#!/bin/sh\necho found by the agent\n")
    os.chmod(os.path.join(PROBE_DIR, "allot-path-probe"), 0o755)
    os.environ["PATH"] = PROBE_DIR + ":" + os.environ.get("PATH", "/usr/bin:/bin")
    dm = Daemon(args=["--preempt-grace", "2s", "--preempt-min-runtime", "0s",
                      "--meter-interval", "300ms"])
    try:
        expect(dm.req("PUT", "/v1/tenants", TENANTS, token=dm.admin), 200)
        AG = dm.token("agent", "", "agents")
        agent = Agent(dm, AG, "ag-1", emulate="2xL4",
                      args=["--emulate-util", "35", "--sample-interval", "200ms"])
        fx.run([test_stale_cgroups_removed, test_stopped_agent_leaves_no_cgroup,
                test_token_hidden_from_process_list,
                test_node_credential, test_run_to_completion,
                test_tenants_run_as_their_own_uids, test_workdir_entered_as_the_jobs_user,
                test_private_tmp_and_umask, test_ended_task_leaves_nothing,
                test_exit_code_and_no_command, test_ls_time_nodes_exit,
                test_interrupted_run_says_the_job_goes_on, test_signal,
                test_signal_before_the_time_limit, test_warning_once_across_allotd_restarts,
                test_time_limit_changed, test_labels, test_cpu_bind,
                test_state_folder_held_by_one_agent,
                test_cpu_bind_after_an_unbound_start,
                test_command_found_in_the_jobs_path,
                test_tasks_know_where_the_others_run, test_failed_task_ends_its_gang,
                test_short_tasks_leave_no_zombies,
                test_token_file_wins_over_the_environment,
                test_drained_once_the_processes_are_gone,
                test_job_reports_its_checkpoint,
                test_memory_limit_is_an_oom_kill, test_cpu_quota,
                test_cpu_weight_follows_the_reservation, test_tiny_cpu_ask_starts,
                test_device_access,
                test_root_refused, test_cancel_stops_with_grace, test_nvml_discovery, test_mig, test_mig_instances_not_allots,
                test_log_of_an_id_given_again, test_join_token_read_again,
                test_fence_follows_a_new_lease,
                test_oci_image, test_oci_gpu_fraction, test_scrub_between_tenants, test_scrub_after_a_shared_gpu,
                test_fractions_shim_and_mps,
                test_fraction_metering, test_gpu_memory_cap_held_from_outside,
                test_logs_and_run, test_preemption_with_grace,
                test_preemptor_starts_once_the_victim_is_gone, test_requeue,
                test_gpus_move_after_the_victim_is_gone, test_logs_of_a_requeued_job,
                test_follow_prints_what_a_stopping_job_writes,
                test_follow_through_agent_restart_and_a_move,
                test_follow_through_an_allotd_restart, test_follow_through_a_long_allotd_outage,
                test_fencing_never_twice,
                test_allotd_down_past_the_lease, test_supervisor_fences_first,
                test_adopted_start_held_by_the_agent,
                test_silent_server_first,
                test_killed_agent_fences,
                test_fence_ends_within_the_lease,
                test_fence_kills_the_whole_task, test_log_max, test_log_retention, test_io_limits,
                test_store_full_keeps_jobs_running,
                test_long_poll_saturated,
                test_agent_restart_adopts, test_usage_samples,
                test_samples_buffered_while_allotd_down,
                test_samples_not_delayed_by_a_slow_allotd,
                test_late_samples_rolled_up,
                test_allotd_restart])
    finally:
        if agent:
            agent.stop()
        dm.stop()
