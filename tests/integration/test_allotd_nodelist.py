"""Jobs that name their nodes (sbatch -w / -x): "nodelist" keeps a job to
the nodes listed, "exclude_nodes" off the nodes listed, both through
allotd restarts; names that are no registered node, no node at all or
no node name are refused; the pending reason speaks of the job's nodes;
`allot submit -w/-x` take Slurm host lists (gpu[01-04]) from the command
line and from job files, and `allot show` prints them."""

import json
import os
import time

import allotd_fixture as fx
from allotd_fixture import TENANTS, Daemon, expect
from cli_fixture import cli, fails, ok, write


def node(name):
    return {"name": name, "cpus": 32, "memory": 131072, "gpus": [{"model": "L4"}] * 4}


poll = fx.poll


def nodes_of(j):
    return sorted({t["node"] for t in j["placement"]["tasks"]})


def submit(dm, body, status=201):
    body = dict({"tenant": "research/nlp", "command": ["true"]}, **body)
    return expect(dm.req("POST", "/v1/jobs", body, token=dm.admin), status)


def test_nodelist_and_exclude():
    dm = Daemon()
    try:
        expect(dm.req("PUT", "/v1/tenants", TENANTS, token=dm.admin), 200)
        ag = dm.token("agent", "", "agent")
        for n in ("nl1", "nl2", "nl3"):
            expect(dm.req("POST", "/v1/nodes/register", node(n), token=ag), 201)

        # without a list the first node by rank would do; listed, only nl3
        a = submit(dm, {"gpus": 2, "nodelist": ["nl3"]})["id"]
        assert nodes_of(fx.wait_job(dm, a, "starting")) == ["nl3"]
        b = submit(dm, {"gpus": 1, "exclude_nodes": ["nl1", "nl2"]})["id"]
        assert nodes_of(fx.wait_job(dm, b, "starting")) == ["nl3"]
        # a list less its exclusions: nl2 alone
        c = submit(dm, {"gpus": 1, "nodelist": ["nl1", "nl2"], "exclude_nodes": ["nl1"]})["id"]
        assert nodes_of(fx.wait_job(dm, c, "starting")) == ["nl2"]
        # its nodes full, the others free: it waits, and says of which nodes
        d = submit(dm, {"gpus": 2, "nodelist": ["nl3"]})["id"]
        why = poll(lambda: fx.job(dm, d).get("pending_reason") or "")
        assert fx.job(dm, d)["state"] == "pending"
        assert why.startswith("among the nodes of its node list: "), why

        # refused: no such node, an empty list, no node name, wrong types
        for body, status, text in (
                ({"nodelist": ["nl9"]}, 422, 'no node "nl9" is registered'),
                ({"exclude_nodes": ["nl1", "zz"]}, 422, 'field "exclude_nodes[1]"'),
                ({"nodelist": []}, 422, "names no node"),
                ({"nodelist": ["a b"]}, 422, "is not a node name"),
                ({"nodelist": "nl1"}, 400, "must be an array of strings"),
                ({"exclude_nodes": [3]}, 400, 'field "exclude_nodes[0]" must be a string')):
            e = submit(dm, dict({"gpus": 1}, **body), status)
            assert text in e["error"]["message"], (body, e)

        # through a restart: the pending job still waits for nl3 alone
        dm.stop()
        admin, dm = dm.admin, Daemon(data_dir=dm.dir)
        dm.admin = admin
        time.sleep(0.6)
        assert fx.job(dm, d)["state"] == "pending"
        expect(dm.req("POST", "/v1/jobs/%d/cancel" % c, token=dm.admin), 200)  # frees nl2
        time.sleep(0.6)
        assert fx.job(dm, d)["state"] == "pending"
        expect(dm.req("POST", "/v1/jobs/%d/cancel" % a, token=dm.admin), 200)  # frees nl3
        assert nodes_of(fx.wait_job(dm, d, "starting")) == ["nl3"]

        # the command line: host lists, a job file, show, refusals
        def cli_on(*args):
            out = ok(cli(dm, "submit", "-t", "research/nlp", "-g", "1", *args, "--", "true"))
            jid = int(out.out.strip())
            return jid, nodes_of(fx.wait_job(dm, jid, "starting"))

        e, where = cli_on("-w", "nl[2-3]", "-x", "nl3")
        assert where == ["nl2"], where
        show = ok(cli(dm, "show", e)).out
        assert "\nnodes:        nl[2-3] (2 nodes)\n" in show, show
        assert "\nexclude:      nl3 (1 node)\n" in show, show
        # a value with a '/' names a file of host lists, as sbatch's
        nf = write(os.path.join(fx.tempdir(), "nodes"), "nl1\n nl[2-3]\n")
        e2, where = cli_on("-w", nf, "-x", "nl[2-3]")
        assert where == ["nl1"], where
        assert ok(cli(dm, "-o", "json", "show", e2)).json()["spec"]["nodelist"] == \
            ["nl1", "nl2", "nl3"]
        r = fails(cli(dm, "submit", "-t", "research/nlp", "-w", "/nonexistent/list", "--",
                      "true"), 1)
        assert "cannot read the node file /nonexistent/list" in r.err, r
        spec = json.loads(ok(cli(dm, "-o", "json", "show", e)).out)["spec"]
        assert spec["nodelist"] == ["nl2", "nl3"] and spec["exclude_nodes"] == ["nl3"], spec
        f = write(os.path.join(fx.tempdir(), "job.yaml"),
                  "nodelist: nl[1-2]\nexclude_nodes: [nl2]\n")
        _, where = cli_on("-f", f)
        assert where == ["nl1"], where
        _, where = cli_on("-f", f, "--exclude", "nl1")  # flags override the file's
        assert where == ["nl2"], where
        r = fails(cli(dm, "submit", "-t", "research/nlp", "-w", "nl[3-1]", "--", "true"), 1)
        assert "--nodelist: " in r.err and "HI < LO" in r.err, r
        # each value a host list of its own, not glued to the next
        r = fails(cli(dm, "submit", "-t", "research/nlp", "-w", "nl[1", "-w", "3]", "--",
                      "true"), 1)
        assert 'unbalanced "["' in r.err, r
        empty = write(os.path.join(fx.tempdir(), "empty.yaml"), "exclude_nodes: []\n")
        _, where = cli_on("-f", empty, "-w", "nl3")
        assert where == ["nl3"], where
        r = fails(cli(dm, "submit", "-t", "research/nlp", "-x", "nl7", "--", "true"), 6)
        assert 'no node "nl7" is registered' in r.err, r
        bad = write(os.path.join(fx.tempdir(), "bad.yaml"), "nodelist: {a: 1}\n")
        r = fails(cli(dm, "submit", "-t", "research/nlp", "-f", bad, "--", "true"), 1)
        assert 'field "nodelist" must be a host list' in r.err, r
    finally:
        dm.stop()


def test_deleted_node_comes_back():
    """A node a waiting job names, deleted, allotd restarted, the name
    registered again: it is the node the job waits for; a job that
    excludes it keeps off it."""
    dm = Daemon(args=["--lease", "2s"])
    try:
        expect(dm.req("PUT", "/v1/tenants", TENANTS, token=dm.admin), 200)
        ag = dm.token("agent", "", "agent")
        for n in ("nl-a", "nl-b"):
            expect(dm.req("POST", "/v1/nodes/register", node(n), token=ag), 201)

        def state(name):
            beat = dm.req("POST", "/v1/nodes/nl-b/heartbeat", {}, token=ag)  # nl-b lives
            assert beat[0] == 200, beat
            nodes = expect(dm.req("GET", "/v1/nodes", token=dm.admin), 200)["nodes"]
            return [x["state"] for x in nodes if x["name"] == name]

        poll(lambda: state("nl-a") == ["lost"], timeout=15)
        w = submit(dm, {"gpus": 1, "nodelist": ["nl-a"]})["id"]
        e = submit(dm, {"gpus": 4, "exclude_nodes": ["nl-a"]})["id"]
        assert nodes_of(fx.wait_job(dm, e, "starting")) == ["nl-b"]
        e2 = submit(dm, {"gpus": 1, "exclude_nodes": ["nl-a"]})["id"]
        expect(dm.req("DELETE", "/v1/nodes/nl-a", token=dm.admin), 200)
        # no such node now
        err = submit(dm, {"gpus": 1, "nodelist": ["nl-a"]}, 422)
        assert 'no node "nl-a" is registered' in err["error"]["message"], err
        dm.stop()
        admin, dm = dm.admin, Daemon(data_dir=dm.dir, args=["--lease", "2s"])
        dm.admin = admin
        time.sleep(0.6)
        state("nl-b")
        assert fx.job(dm, w)["state"] == "pending"
        why = fx.job(dm, w)["pending_reason"]
        assert why == "no node of its node list is ready (1 lost, cordoned or draining)", why
        # the name kept for it is no node to other jobs' reasons: nl-b alone
        expect(dm.req("POST", "/v1/nodes/nl-b/cordon", token=dm.admin), 200)
        c = submit(dm, {"gpus": 0, "cpus": 0.1})["id"]
        poll(lambda: state("nl-b") and fx.job(dm, c).get("pending_reason"))
        why = fx.job(dm, c)["pending_reason"]
        assert why == "no ready node (1 lost, cordoned or draining)", why
        expect(dm.req("POST", "/v1/jobs/%d/cancel" % c, token=dm.admin), 200)
        expect(dm.req("POST", "/v1/nodes/nl-b/uncordon", token=dm.admin), 200)
        # the name again: the job's node, where it starts; e2 stays off it
        expect(dm.req("POST", "/v1/nodes/register", node("nl-a"), token=ag), 201)
        poll(lambda: state("nl-a") == ["ready"] and fx.job(dm, w)["state"] == "starting")
        assert nodes_of(fx.job(dm, w)) == ["nl-a"]
        time.sleep(0.6)
        state("nl-b")
        assert fx.job(dm, e2)["state"] == "pending", fx.job(dm, e2)
        assert fx.job(dm, e2)["pending_reason"].startswith(
            "among the nodes it does not exclude: "), fx.job(dm, e2)
        # a list its exclusions empty is refused
        err = submit(dm, {"gpus": 1, "nodelist": ["nl-a"], "exclude_nodes": ["nl-a"]}, 422)
        assert "every node listed is excluded" in err["error"]["message"], err
    finally:
        dm.stop()


if __name__ == "__main__":
    fx.run([test_nodelist_and_exclude, test_deleted_node_comes_back])
