"""The `allot` command line's administrative verbs and its settings against
a real allotd: tokens (create prints the secret last, ls, revoke), the
audit log (ls with paging, verify, and a tampered log found broken), nodes
and top with a node registered by a test agent, cordon/drain/uncordon,
delete-node (refused while the node's agent runs, then forgotten once lost),
output formats, where server and token come from (flags,
ALLOT_SERVER/ALLOT_TOKEN, the config file, --config) with the exit codes of
each failure, and HTTPS with --cacert."""

import fcntl
import http.server
import json
import os
import pty
import select
import shutil
import sqlite3
import struct
import subprocess
import termios
import threading
import time
import unicodedata

import allotd_fixture as fx
from allotd_fixture import TENANTS, Daemon, expect
from cli_fixture import ALLOT, cli, fails, ok, write

dm = None



def width(text):
    """Display columns of text: East Asian wide characters take two."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def top_on_terminal(dm, cols):
    """What `allot top --count 1` writes to a terminal `cols` columns wide."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, cols, 0, 0))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ALLOT_", "XDG_", "COLUMNS"))}
    env.update(HOME=fx.tempdir(), ALLOT_SERVER="http://127.0.0.1:%d" % dm.port,
               ALLOT_TOKEN=dm.admin)
    p = subprocess.Popen([ALLOT, "top", "--count", "1"], stdin=slave, stdout=slave,
                         stderr=subprocess.DEVNULL, env=env)
    os.close(slave)
    out = b""
    end = time.time() + 20
    try:
        while time.time() < end:
            r, _, _ = select.select([master], [], [], 1)
            if r:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # the terminal's other end closed
                    break
                if not chunk:
                    break
                out += chunk
    finally:
        os.close(master)
        p.wait(timeout=10)
    assert p.returncode == 0, out
    return out.decode()

def test_tokens():
    r = ok(cli(dm, "tokens", "create", "--role", "member", "--tenant", "research/nlp",
               "--name", "alice"))
    secret = r.lines()[-1]
    assert secret.startswith("allot_") and len(secret) == 70, r
    tid = int([l for l in r.lines() if l.startswith("id:")][0].split()[1])
    # the new token works
    assert ok(cli(dm, "ls", "-o", "json", token=secret)).out.strip() == "[]"
    ls = ok(cli(dm, "tokens", "ls", "-o", "json")).json()
    mine = [t for t in ls if t["id"] == tid][0]
    assert (mine["name"], mine["role"], mine["tenant"], mine["revoked"]) == \
        ("alice", "member", "research/nlp", 0), mine
    assert all("token" not in t for t in ls), "never secrets"
    rows = ok(cli(dm, "tokens", "ls")).lines()
    assert rows[0].split() == ["ID", "NAME", "ROLE", "TENANT", "CREATED", "REVOKED",
                               "EXPIRES"], rows
    assert rows[-1].split()[-1] == "-", rows  # does not expire
    r = ok(cli(dm, "tokens", "create", "--role", "viewer", "--duration", "1h"))
    exp = [l for l in r.lines() if l.startswith("expires:")]
    assert len(exp) == 1 and exp[0].split()[1].endswith("Z"), r
    fails(cli(dm, "tokens", "create", "--role", "viewer", "--duration", "soon"), 1, "usage")
    y = ok(cli(dm, "tokens", "ls", "-o", "yaml")).out
    assert "  name: alice\n" in y and "  role: member\n" in y, y
    j = ok(cli(dm, "tokens", "create", "--role", "viewer", "-o", "json")).json()
    assert j["role"] == "viewer" and j["token"].startswith("allot_"), j
    assert ok(cli(dm, "tokens", "revoke", tid)).out == "revoked token %d\n" % tid
    fails(cli(dm, "ls", token=secret), 3, "unauthorized")
    fails(cli(dm, "tokens", "revoke", tid), 4, "conflict")
    fails(cli(dm, "tokens", "revoke", 99999), 2, "not_found")
    fails(cli(dm, "tokens", "create", "--role", "wizard"), 6, "invalid")
    fails(cli(dm, "tokens", "create", "--role", "member"), 6, "invalid")  # needs a tenant
    fails(cli(dm, "tokens", "create"), 1, "usage")
    # a tenant-admin creates members in its subtree only
    ta = dm.token("tenant-admin", "research", "ta")
    ok(cli(dm, "tokens", "create", "--role", "member", "--tenant", "research/nlp", token=ta))
    fails(cli(dm, "tokens", "create", "--role", "member", "--tenant", "product/search",
              token=ta), 3, "forbidden")


def test_audit():
    ent = ok(cli(dm, "audit", "ls", "-o", "json", env={"ALLOT_CLI_PAGE": "3"})).json()
    assert len(ent) > 10 and [e["seq"] for e in ent] == list(range(1, len(ent) + 1)), ent
    assert ok(cli(dm, "audit", "ls", "-o", "json")).json() == ent
    assert any(e["action"] == "token.create" for e in ent)
    assert len(ok(cli(dm, "audit", "ls", "--limit", "5", "-o", "json")).json()) == 5
    tail = ok(cli(dm, "audit", "ls", "--after", ent[-3]["seq"], "-o", "json")).json()
    assert [e["seq"] for e in tail] == [e["seq"] for e in ent[-2:]], tail
    rows = ok(cli(dm, "audit", "ls")).lines()
    assert rows[0].split() == ["SEQ", "TIME", "TOKEN", "ACTION", "TARGET", "RESULT"], rows
    r = ok(cli(dm, "audit", "verify"))
    assert r.out.startswith("audit log intact: "), r
    v = ok(cli(dm, "audit", "verify", "-o", "json")).json()
    assert v["ok"] is True and v["entries"] >= len(ent), v


def test_audit_tampered():
    d = Daemon()
    try:
        expect(d.req("PUT", "/v1/tenants", TENANTS, token=d.admin), 200)
        ok(cli(d, "submit", "-t", "research/nlp", "--", "true"))
        assert d.stop() == 0
        db = sqlite3.connect(os.path.join(d.dir, "allot.db"))
        # someone with the file edits an entry behind the store's back
        db.execute("DROP TRIGGER audit_no_update")
        db.execute("UPDATE audit SET target = 'job/999' WHERE action = 'job.submit'")
        db.commit()
        db.close()
        admin = d.admin
        d = Daemon(data_dir=d.dir)
        d.admin = admin
        r = fails(cli(d, "audit", "verify"), 7, "audit_broken")
        assert "audit log BROKEN at entry" in r.out, r
        j = cli(d, "audit", "verify", "-o", "json")
        assert j.rc == 7 and j.json()["ok"] is False, j
    finally:
        assert d.stop() == 0


def register(name, n_gpus, model="A100-80GB"):
    agent = dm.token("agent", "", "agent-" + name)
    inv = {"name": name, "cpus": 64, "memory": 512000,
           "gpus": [{"model": model} for _ in range(n_gpus)]}
    expect(dm.req("POST", "/v1/nodes/register", inv, token=agent), 201)


def test_nodes_and_top():
    expect(dm.req("PUT", "/v1/tenants", TENANTS, token=dm.admin), 200)
    register("gpu-node-1", 8)
    register("gpu-node-2", 8)
    rows = ok(cli(dm, "nodes")).lines()
    assert rows[0].split() == ["NAME", "STATE", "MODEL", "GPUS", "MODE", "HEALTH", "CPUS", "MEMORY",
                               "TASKS", "LAST-HEARTBEAT"], rows
    assert rows[1].split()[4] == "shared", rows  # registered without a gpu_mode: shared
    assert rows[1].split()[:4] == ["gpu-node-1", "ready", "A100-80GB", "8"], rows
    n = ok(cli(dm, "nodes", "gpu-node-2", "-o", "json")).json()
    assert [x["name"] for x in n] == ["gpu-node-2"], n
    fails(cli(dm, "nodes", "nosuch"), 2, "not_found")
    r = fails(cli(dm, "nodes", "gpu-node-2", "nosuch"), 2, "not_found")
    assert "no such node: nosuch" in r.err, r
    a = int(ok(cli(dm, "submit", "-t", "research/nlp", "--gpus", "4", "-n", "big", "--",
                   "true")).out)
    b = int(ok(cli(dm, "submit", "-t", "research/vision", "--gpu-milli", "500", "--", "true")).out)
    # no node of this model: stays pending
    c = int(ok(cli(dm, "submit", "-t", "research/vision", "--gpus", "1", "--gpu-model",
                   "V100-32GB", "--", "true")).out)
    snap = None
    for _ in range(50):  # bounded: the loop places within a few cycles
        snap = ok(cli(dm, "top", "-o", "json")).json()
        if snap["gpus"]["allocated"] == 4.5 and all(q["pending_reason"] for q in snap["queue"]):
            break
        time.sleep(0.1)
    assert snap["nodes"] == {"total": 2, "ready": 2} and snap["gpus"]["total"] == 16, snap
    assert snap["gpus"]["allocated"] == 4.5, snap
    names = [t["tenant"] for t in snap["tenants"]]
    assert names == sorted(names), names
    by = {t["tenant"]: t for t in snap["tenants"]}
    assert by["research/nlp"]["gpus"] == 4 and by["research/vision"]["gpus"] == 0.5, by
    assert by["research/vision"]["pending"] == 1, by
    assert by["research/nlp"]["gpu_quota"] == 8 and by["research/vision"]["gpu_quota"] == 8, by
    assert [q["id"] for q in snap["queue"]] == [c] and snap["queue"][0]["pending_reason"], snap
    t = ok(cli(dm, "top", "--count", "1")).out
    assert "nodes 2 (2 ready)  GPUs 16, 4.5 allocated" in t and "QUEUE" in t, t
    rows = [l.split() for l in t.splitlines()]
    assert ["TENANT", "GPUS", "QUOTA", "MIG", "RUNNING", "STARTING", "PENDING"] in rows, t
    assert [r[:4] for r in rows if r[:1] == ["research/nlp"]] == [["research/nlp", "4", "8", "0"]]
    one = ok(cli(dm, "top", "--tenant", "research/nlp", "-o", "json")).json()
    assert one["queue"] == [] and one["scope"] == "research/nlp" and snap["scope"] is None, one
    # a tenant's view says whose allocation it counts, beside the cluster's GPUs
    t = ok(cli(dm, "top", "--tenant", "research/vision", "--count", "1")).out
    assert "GPUs 16  tenant research/vision:, 0.5 allocated" not in t, t
    assert "GPUs 16  tenant research/vision: 0.5 allocated" in t, t
    # a tenant that is not in the tree is a mistyped name (as for ls)
    r = fails(cli(dm, "top", "--tenant", "research/nosuch", "--count", "1"), 2, "not_found")
    assert "no tenant research/nosuch" in r.err and not r.out, r
    two = ok(cli(dm, "top", "--count", "2", "--interval", "1", "-o", "json")).out
    assert two.count('"queue"') == 2
    # on a terminal every line of the live view fits its width (a long name
    # and reason are cut), so a redraw does not scroll its header away
    long = int(ok(cli(dm, "submit", "-t", "research/vision", "--gpus", "1", "--gpu-model",
                      "V100-32GB", "-n", "x" * 80, "--", "true")).out)
    screen = top_on_terminal(dm, 60)
    lines = [l for l in screen.replace("\033[H\033[2J", "").split("\r\n") if l]
    assert len(lines) > 6 and all(width(l) <= 60 for l in lines), lines
    assert any(l.startswith(str(long) + " ") and "xxx..." in l for l in lines), lines
    assert "QUEUE (pending, oldest first)" in lines, lines
    # names are aligned by display width: wide characters take two columns
    uni = int(ok(cli(dm, "submit", "-t", "research/vision", "--gpus", "1", "--gpu-model",
                     "V100-32GB", "-n", "ünïcode-名前", "--", "true")).out)
    ls = ok(cli(dm, "ls", "--state", "pending")).lines()
    row = [l for l in ls if l.startswith(str(uni) + " ")][0]
    col = ls[0].index("TENANT")
    assert width(row[:row.index("research/vision")]) == col, (ls[0], row)
    ok(cli(dm, "cancel", long, uni))
    s = ok(cli(dm, "show", a)).out
    assert "placement:    task 0 on gpu-node-" in s, s
    ok(cli(dm, "cancel", a, b, c))
    # cordon, drain, uncordon
    r = ok(cli(dm, "cordon", "gpu-node-2"))
    assert r.out == "node gpu-node-2 cordoned (was ready)\n", r
    assert ok(cli(dm, "nodes", "gpu-node-2", "-o", "json")).json()[0]["state"] == "cordoned"
    # draining, or drained once no task is left there (the jobs just cancelled may still
    # be stopping): as allot nodes says it
    j = ok(cli(dm, "drain", "gpu-node-2", "-o", "json")).json()
    assert j["name"] == "gpu-node-2" and j["previous"] == "cordoned", j
    assert j["state"] in ("draining", "drained"), j
    r = ok(cli(dm, "uncordon", "gpu-node-2"))
    assert r.out in ("node gpu-node-2 ready (was draining)\n",
                     "node gpu-node-2 ready (was drained)\n"), r
    two = ok(cli(dm, "cordon", "gpu-node-1", "gpu-node-2", "-o", "json")).json()
    assert [x["state"] for x in two] == ["cordoned", "cordoned"], two
    assert "cordoned" in ok(cli(dm, "nodes")).out
    ok(cli(dm, "uncordon", "gpu-node-1", "gpu-node-2"))
    # a Slurm host list names several nodes, each once
    r = ok(cli(dm, "cordon", "gpu-node-[1-2]", "gpu-node-2"))
    assert r.out == ("node gpu-node-1 cordoned (was ready)\n"
                     "node gpu-node-2 cordoned (was ready)\n"), r
    ok(cli(dm, "uncordon", "gpu-node-[1-2]"))
    r = fails(cli(dm, "cordon", "gpu-node-[2-1]"), 1, "usage")
    assert 'node "gpu-node-[2-1]"' in r.err, r
    # drain lets the node's tasks end, then shows it drained; --wait waits for that
    d = int(ok(cli(dm, "submit", "-t", "research/nlp", "--gpus", "8", "--", "true")).out)
    node, j = None, None
    for _ in range(50):  # bounded: placed within a few cycles
        j = ok(cli(dm, "show", d, "-o", "json")).json()
        if j["placement"]:
            node = j["placement"]["tasks"][0]["node"]
            break
        time.sleep(0.1)
    assert node, j
    r = fails(cli(dm, "drain", node, "--wait", "--timeout", "1"), 4, "timeout")
    assert "(1 task left)" in r.err, r
    n = ok(cli(dm, "nodes", node, "-o", "json")).json()[0]
    assert n["state"] == "draining" and n["tasks"] == 1, n
    ok(cli(dm, "cancel", d))
    assert ok(cli(dm, "drain", node, "--wait", "--timeout", "10")).lines()[-1] == "drained"
    assert ok(cli(dm, "nodes", node, "-o", "json")).json()[0]["state"] == "drained"
    ok(cli(dm, "uncordon", node))
    fails(cli(dm, "drain", node, "--wait", "--timeout", "x"), 1, "usage")
    r = fails(cli(dm, "drain", node, "--timeout", "3s"), 1, "usage")  # it waits for nothing
    assert "--wait" in r.err, r
    fails(cli(dm, "cordon", "nosuch"), 2, "not_found")
    fails(cli(dm, "drain"), 1, "usage")
    viewer = dm.token("viewer", "", "v2")
    fails(cli(dm, "drain", "gpu-node-1", token=viewer), 3, "forbidden")


def test_delete_node():
    d = Daemon(args=["--lease", "1s"])
    try:
        agent = d.token("agent", "", "agent-del")
        for name in ("del-1", "del-2"):
            inv = {"name": name, "cpus": 8, "memory": 64000, "gpus": [{"model": "L4"}]}
            expect(d.req("POST", "/v1/nodes/register", inv, token=agent), 201)
        r = fails(cli(d, "delete-node", "del-1", "nosuch"), 4, "conflict")
        assert "only a lost node can be removed" in r.err and "allot drain --wait del-1" in r.err, r
        # drained already: not told to drain it
        expect(d.req("POST", "/v1/nodes/del-2/heartbeat", {}, token=agent), 200)
        ok(cli(d, "drain", "del-2"))
        r = fails(cli(d, "delete-node", "del-2"), 4, "conflict")
        assert "is draining" in r.err and "drain it" not in r.err and \
            "stop allot-agent there" in r.err, r
        end = time.time() + 10  # bounded: both leases end within a second or two
        while time.time() < end and {n["state"] for n in ok(cli(d, "nodes", "-o", "json")).json()} \
                != {"lost"}:
            time.sleep(0.1)
        r = ok(cli(d, "delete-node", "del-1"))
        assert r.out == "node del-1 removed (was lost)\n", r
        fails(cli(d, "delete-node", "del-1"), 2, "not_found")
        j = ok(cli(d, "delete-node", "del-2", "-o", "json")).json()
        assert j == {"name": "del-2", "state": "removed", "previous": "lost"}, j
        assert ok(cli(d, "nodes", "-o", "json")).json() == []
        fails(cli(d, "delete-node"), 1, "usage")
        fails(cli(d, "delete-node", "del-1", token=d.token("viewer", "", "v")), 3, "forbidden")
        assert "lost" in ok(cli(d, "delete-node", "--help")).out
    finally:
        d.stop()


def cli_env(d):
    """The environment cli_fixture.cli() gives `allot`, for a Popen."""
    e = {k: v for k, v in os.environ.items() if not k.startswith(("ALLOT_", "XDG_"))}
    e.update(HOME=fx.tempdir(), ALLOT_SERVER="http://127.0.0.1:%d" % d.port, ALLOT_TOKEN=d.admin)
    return e


# A daemon with node f1 (4 A100-80GB, registered, no health report yet),
# a tenant product/nlp beside research/nlp, and two fractions placed on f1:
# 10 GiB of GPU memory alone (research/nlp) and 250 milli with 40 GiB
# (research/vision). Made by the first test that needs it; the drain test
# ends the jobs; stopped at exit.
FRAC = {}


def frac():
    if FRAC:
        return FRAC["d"]
    d = FRAC["d"] = Daemon()
    tenants = dict(TENANTS, tenants=TENANTS["tenants"] + [
        {"path": "product/nlp", "quotas": {"gpu": 4}}])
    expect(d.req("PUT", "/v1/tenants", tenants, token=d.admin), 200)
    agent = d.token("agent", "", "agent-f1")
    inv = {"name": "f1", "cpus": 64, "memory": 512000,
           "gpus": [{"model": "A100-80GB", "uuid": "GPU-f1-%d" % i} for i in range(4)]}
    expect(d.req("POST", "/v1/nodes/register", inv, token=agent), 201)
    FRAC["jobs"] = [
        int(ok(cli(d, "submit", "-t", "research/nlp", "--gpu-memory", "10G", "--", "true")).out),
        int(ok(cli(d, "submit", "-t", "research/vision", "--gpu-milli", "250", "--gpu-memory",
                   "40G", "--", "true")).out)]
    for _ in range(50):  # bounded: placed within a few cycles
        if all(fx.job(d, j)["placement"] for j in FRAC["jobs"]):
            break
        time.sleep(0.1)
    return d


def test_nodes_gpus_without_health_report():
    """nodes --gpus lists the GPUs of a node whose agent has not reported
    their health yet (from its inventory), health "-"."""
    d = frac()
    rows = [l.split() for l in ok(cli(d, "nodes", "--gpus")).lines()]
    assert rows[0] == ["NODE", "GPU", "MODEL", "UUID", "HEALTH", "MIG", "WHY"], rows
    assert rows[1:] == [["f1", str(i), "A100-80GB", "GPU-f1-%d" % i, "-", "-", "-"]
                        for i in range(4)], rows


def test_top_counts_memory_fractions():
    """A fraction of GPU memory alone (--gpu-memory, no --gpu-milli) counts
    in top as its share of the GPU's memory (its GPU-equivalents, as
    metering counts them), not as a whole GPU."""
    d = frac()
    snap = ok(cli(d, "top", "-o", "json")).json()
    by = {t["tenant"]: t for t in snap["tenants"]}
    # 10 GiB of an 80 GB GPU; 250 milli with half its memory: 0.5
    assert by["research/nlp"]["gpus"] == 0.125, snap
    assert by["research/vision"]["gpus"] == 0.5, snap
    assert snap["gpus"]["allocated"] == 0.625, snap
    assert "GPUs 4, 0.625 allocated" in ok(cli(d, "top")).out


def test_plan_replays_memory_fractions():
    """plan replays a memory-only fraction as a fraction (one whole GPU),
    like one by thousandths, instead of dropping it."""
    h = ok(cli(frac(), "plan", "-o", "json")).json()["history"]
    assert h["jobs"] == 2 and h["fractional_as_whole_gpus"] == 2 and h["no_gpus"] == 0, h


def test_plan_quota_names_one_tenant():
    """plan --quota takes one tenant the tenants document lists, by path or
    last element: a leaf, or a listed parent (research: nominal 16 over nlp
    8 and vision 8), whose leaves' nominals must still fit in it. An
    unknown tenant, a parent only implied (product), a last element of
    several tenants, and nominals that no longer fit are usage errors
    (`allot: usage:`); option values are named with their own dashes."""
    d = frac()
    ok(cli(d, "plan", "--quota", "research/nlp=gpu:2", "--quota", "vision=gpu:1"))
    js = ok(cli(d, "-o", "json", "plan", "--quota", "research=gpu:40", "--quota",
                "research/nlp=gpu:32")).json()
    assert js["changed"]["tenants"]["research/nlp"]["nominal_gpus"] == 32, js
    r = fails(cli(d, "plan", "--quota", "nosuch=gpu:4"), 1, "usage")
    assert 'no tenant "nosuch"' in r.err, r
    r = fails(cli(d, "plan", "--quota", "product=gpu:4"), 1, "usage")
    assert "is not listed in the tenants document" in r.err, r
    for args in (["--quota", "research=gpu:4"], ["--quota", "research/nlp=gpu:20"]):
        r = fails(cli(d, "plan", *args), 1, "usage")
        assert 'below "research" add up to' in r.err and "raise it too" in r.err, (args, r)
    r = fails(cli(d, "plan", "--quota", "nlp=gpu:4"), 1, "usage")
    assert "names several tenants" in r.err, r
    for args in (["--quota", "research/nlp=gpu:-1"], ["--since", "1x"],
                 ["--forecast", "--wait-target", "1x"]):
        r = fails(cli(d, "plan", *args), 1, "usage")
        assert "allot: usage: %s: " % args[-2] in r.err and "----" not in r.err, r


def test_drain_wait_writes_before_waiting():
    """drain --wait writes `node N draining` before it waits, also into a
    pipe (not only at exit)."""
    d = frac()
    p = subprocess.Popen([ALLOT, "drain", "f1", "--wait", "--timeout", "30"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=cli_env(d))
    try:
        ready, _, _ = select.select([p.stdout], [], [], 10)
        assert ready and p.poll() is None, "no output while waiting"
        assert p.stdout.readline() == "node f1 draining (was ready)\n"
        ok(cli(d, "cancel", *FRAC["jobs"]))
        out, err = p.communicate(timeout=20)
        assert p.returncode == 0 and out == "drained\n", (p.returncode, out, err)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(timeout=10)


def test_pricebook_conflict_exit_status():
    """A price book that would reprice an invoiced month (a changed past
    version, or another currency) is a conflict: exit status 4, as the
    man page says."""
    page = open(os.path.join(fx.SOURCE, "docs", "cli", "allot-pricebook.md")).read()
    assert "4 conflict" in page.split("## EXIT STATUS", 1)[1], page
    d = Daemon()
    try:
        book = {"currency": "EUR",
                "books": [{"effective": "2020-01-01", "gpu_hour": {"H100-80GB": 400}}]}
        f = write(os.path.join(fx.tempdir(), "book.json"), json.dumps(book))
        ok(cli(d, "pricebook", "apply", "-f", f))
        book["books"][0]["gpu_hour"]["H100-80GB"] = 300
        write(f, json.dumps(book))
        r = fails(cli(d, "pricebook", "apply", "-f", f), 4, "conflict")
        assert "2020-01-01" in r.err, r
        book["books"][0]["gpu_hour"]["H100-80GB"] = 400
        book["currency"] = "USD"
        write(f, json.dumps(book))
        fails(cli(d, "pricebook", "apply", "-f", f), 4, "conflict")
        # a new version from a month to come is fine
        book["currency"] = "EUR"
        book["books"].append({"effective": "2100-01-01", "gpu_hour": {"H100-80GB": 500}})
        write(f, json.dumps(book))
        ok(cli(d, "pricebook", "apply", "-f", f))
    finally:
        assert d.stop() == 0


def test_config_sources():
    good, server = dm.admin, "http://127.0.0.1:%d" % dm.port
    home = fx.tempdir()
    os.makedirs(os.path.join(home, ".config", "allot"))
    cfg = os.path.join(home, ".config", "allot", "config")
    # nothing anywhere: no token (usage)
    fails(cli(dm, "ls", no_env=True, home=home), 1, "usage")
    # a home of "/" (a tenant's own uid, in a job) names its file without "//"
    r = fails(cli(dm, "ls", no_env=True, home="/"), 1, "usage")
    assert "in /.config/allot/config" in r.err and "//" not in r.err, r
    # the config file alone
    write(cfg, "# allot\nserver %s\ntoken %s\noutput json\n" % (server, good))
    r = ok(cli(dm, "tokens", "ls", no_env=True, home=home))
    assert isinstance(json.loads(r.out), list) and "warning" not in r.err, r
    # a token in a file others can read draws a warning
    os.chmod(cfg, 0o644)
    r = ok(cli(dm, "ls", no_env=True, home=home))
    assert "readable by others" in r.err, r
    os.chmod(cfg, 0o600)
    # the environment beats the file, flags beat the environment
    fails(cli(dm, "ls", home=home, token="allot_" + "1" * 64), 3, "unauthorized")
    ok(cli(dm, "ls", "--token", good, home=home, token="allot_" + "1" * 64))
    ok(cli(dm, "--token", good, "ls", home=home, token="allot_" + "1" * 64))
    assert ok(cli(dm, "ls", "-o", "table", home=home, no_env=True)).out.startswith("ID ")
    # --config and ALLOT_CONFIG name another file; XDG_CONFIG_HOME moves the default
    other = write(os.path.join(fx.tempdir(), "cfg"), "server %s\ntoken %s\n" % (server, good))
    ok(cli(dm, "--config", other, "ls", no_env=True))
    ok(cli(dm, "ls", "--config=" + other, no_env=True))
    ok(cli(dm, "ls", no_env=True, env={"ALLOT_CONFIG": other}))
    xdg = fx.tempdir()
    os.makedirs(os.path.join(xdg, "allot"))
    write(os.path.join(xdg, "allot", "config"), "server %s\ntoken %s\n" % (server, good))
    ok(cli(dm, "ls", no_env=True, env={"XDG_CONFIG_HOME": xdg}))
    fails(cli(dm, "--config", "/nonexistent/cfg", "ls", no_env=True), 1, "usage")
    bad = write(os.path.join(fx.tempdir(), "bad"), "colour blue\n")
    r = fails(cli(dm, "--config", bad, "ls", no_env=True), 1, "usage")
    assert bad + ":1" in r.err, r
    # ALLOT_SERVER takes host:port too; a closed port is a connection error (5)
    ok(cli(dm, "ls", server="127.0.0.1:%d" % dm.port))
    fails(cli(dm, "ls", server="127.0.0.1:1", env={"ALLOT_OUTPUT": "json"}), 5, "connection")
    fails(cli(dm, "ls", "--retries", "0", server="gopher://127.0.0.1:1"), 1, "usage")
    fails(cli(dm, "ls", "--retries", "99"), 1, "usage")


def test_https():
    if not shutil.which("openssl"):
        print("skip: no openssl command")
        return
    d = fx.tempdir()
    cert, key = os.path.join(d, "cert.pem"), os.path.join(d, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key,
                    "-out", cert, "-days", "2", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True, timeout=30)
    t = Daemon(args=["--tls-cert", cert, "--tls-key", key], ready=False)
    try:
        url = "https://127.0.0.1:%d" % t.port
        # retried through the 503s of start-up, over HTTPS
        r = ok(cli(t, "tokens", "ls", "-o", "json", "--cacert", cert, server=url))
        assert len(r.json()) == 1, r
        ok(cli(t, "ls", server=url, env={"ALLOT_CACERT": cert}))
        r = fails(cli(t, "ls", "--retries", "0", server=url), 5, "connection")
        assert "--cacert" in r.err, r
        fails(cli(t, "ls", "--retries", "0", server="http://127.0.0.1:%d" % t.port), 5,
              "connection")
        fails(cli(t, "ls", server="ftp://127.0.0.1:%d" % t.port), 1, "usage")
    finally:
        assert t.stop() == 0


def test_scheduler():
    """allot scheduler shows allotd's scheduling options by their option
    names, as this allotd was started (here with --fair-cap 150 and
    --lending-hold 30m); -o json is the server's reply."""
    d = Daemon(args=["--fair-cap", "150", "--lending-hold", "30m", "--no-reserve-gangs"])
    try:
        r = ok(cli(d, "scheduler"))
        rows = dict(line.split(None, 1) for line in r.out.splitlines()[1:])
        assert rows["fair-cap"].startswith("150 % "), rows
        assert rows["lending-hold"].startswith("1800s"), rows
        assert rows["reserve-gangs"] == "false" and rows["order"] == "fair", rows
        assert rows["las-threshold"].startswith("28800s of GPU-time"), rows
        js = ok(cli(d, "-o", "json", "scheduler")).json()
        assert js == expect(d.req("GET", "/v1/scheduler", token=d.admin), 200), js
        viewer = d.token("viewer")
        assert ok(cli(d, "-o", "json", "scheduler", token=viewer)).json() == js
        fails(cli(d, "scheduler", "extra"), 1, "usage")
        fails(cli(d, "scheduler", token="nope"), 3)
    finally:
        d.stop()


def test_not_allotd():
    """A --server that is not allotd (a web server's HTML 404 page) is named
    as such, exit 5, not printed raw as "not found"; a URL ending in /v1
    (the routes begin with it) is a usage error."""
    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = b"<!DOCTYPE HTML><html><body>404 Not Found</body></html>"
            self.send_response(404)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass
    srv = http.server.HTTPServer(("127.0.0.1", 0), Page)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        url = "http://127.0.0.1:%d" % srv.server_address[1]
        r = fails(cli(dm, "ls", server=url), 5, "http")
        assert "HTML page, not allotd's JSON" in r.err and "<html" not in r.err, r
    finally:
        srv.shutdown()
        srv.server_close()
    r = fails(cli(dm, "ls", server="http://127.0.0.1:%d/v1" % dm.port), 1, "usage")
    assert "without /v1" in r.err, r


def test_constraint():
    """Node labels in `allot nodes --labels`, `--constraint` picking the nodes a job with it
    may run on; `allot submit --constraint` runs a job there and `allot show` says so; bad
    or doubled labels are usage errors."""
    d = Daemon()
    try:
        expect(d.req("PUT", "/v1/tenants", TENANTS, token=d.admin), 200)
        agent = d.token("agent", "", "agents")
        for name, labels in (("lab-a", {"zone": "a", "nvlink": ""}), ("lab-b", {"zone": "b"}),
                             ("lab-0", {})):
            inv = {"name": name, "cpus": 8, "memory": 64000, "gpus": [{"model": "L4"}],
                   "labels": labels}
            expect(d.req("POST", "/v1/nodes/register", inv, token=agent), 201)
        fails(cli(d, "nodes", "-g", "-L"), 1, "usage")  # GPU lines have no labels
        rows = [r.split() for r in ok(cli(d, "nodes", "--labels")).lines()]
        assert rows[0][-1] == "LABELS" and len(rows) == 4, rows
        assert {r[0]: r[-1] for r in rows[1:]} == {"lab-a": "nvlink,zone=a", "lab-b": "zone=b",
                                                   "lab-0": "-"}, rows
        rows = [r.split() for r in ok(cli(d, "nodes", "-L", "-C", "zone=a", "-C",
                                          "nvlink")).lines()]
        assert [r[0] for r in rows[1:]] == ["lab-a"], rows
        assert ok(cli(d, "nodes", "-C", "zone=c")).lines()[1:] == []
        fails(cli(d, "nodes", "-C", "a b"), 1, "usage")
        fails(cli(d, "nodes", "-C", "zone=a", "-C", "zone=b"), 1, "usage")  # as submit reads it
        fails(cli(d, "nodes", "-C", "nvlink&ib"), 1, "usage")
        jid = int(ok(cli(d, "submit", "-t", "research/nlp", "--gpus", "1", "-C", "zone=b",
                         "--", "true")).out)
        for _ in range(100):  # bounded: the loop places within a few cycles
            j = ok(cli(d, "show", str(jid), "-o", "json")).json()
            if j["state"] == "starting":
                break
            time.sleep(0.05)
        assert [t["node"] for t in j["placement"]["tasks"]] == ["lab-b"], j
        assert j["spec"]["node_selector"] == {"zone": "b"}, j
        assert "constraint:   zone=b\n" in ok(cli(d, "show", str(jid))).out
        # an empty value shows bare, as -C takes it; either order is one shape
        jid2 = int(ok(cli(d, "submit", "-t", "research/nlp", "--gpus", "1", "-C", "nvlink,zone=a",
                          "--", "true")).out)
        assert "constraint:   nvlink, zone=a\n" in ok(cli(d, "show", str(jid2))).out
        r = fails(cli(d, "submit", "-t", "research/nlp", "-C", "zone=a", "-C", "zone=b",
                      "--", "true"), 1, "usage")
        assert 'label "zone" given twice' in r.err, r
        r = fails(cli(d, "submit", "-t", "research/nlp", "-C", "nvlink&ib", "--", "true"), 1,
                  "usage")
        assert "Slurm's & and | are not taken" in r.err, r
        r = fails(cli(d, "submit", "-t", "research/nlp", "-C", "a,b,c,d,e", "--", "true"), 1,
                  "usage")
        assert "more than 4 labels" in r.err, r
        r = fails(cli(d, "submit", "-t", "research/nlp", "-C", "k=\x01", "--", "true"), 1,
                  "usage")
        assert "control character" in r.err, r
        assert len(expect(d.req("GET", "/v1/jobs", token=d.admin), 200)["jobs"]) == 2
    finally:
        assert d.stop() == 0


if __name__ == "__main__":
    dm = Daemon()
    try:
        expect(dm.req("PUT", "/v1/tenants", TENANTS, token=dm.admin), 200)
        fx.run([test_tokens, test_audit, test_audit_tampered, test_nodes_and_top,
                test_nodes_gpus_without_health_report, test_top_counts_memory_fractions,
                test_plan_replays_memory_fractions, test_plan_quota_names_one_tenant,
                test_drain_wait_writes_before_waiting, test_delete_node,
                test_pricebook_conflict_exit_status,
                test_config_sources, test_https, test_scheduler, test_not_allotd,
                test_constraint])
    finally:
        frac_rc = FRAC["d"].stop() if FRAC else 0
        assert dm.stop() == 0 and frac_rc == 0
