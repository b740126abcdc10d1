"""The `allot` command line against a real allotd: help on every verb,
tenants (apply, prune, round trip through -o yaml), quota, jobs (submit
from flags and from files, ls with paging and filters, show, cancel,
events), output formats, error lines and exit codes, and what a member
token may see and do."""

import json
import os
import re
import subprocess
import time

import allotd_fixture as fx
from allotd_fixture import TENANTS, Daemon, expect
from cli_fixture import ALLOT, cli, fails, ok, write

dm = None

VERBS = ["submit", "ls", "show", "cancel", "signal", "time-limit", "checkpoint", "events", "logs", "run", "tenants", "quota", "apply",
         "nodes",
         "cordon", "drain", "uncordon", "tokens", "audit", "top", "usage", "invoice", "pricebook",
         "idle", "anomalies", "plan", "scheduler"]


def test_help_everywhere():
    r = ok(cli(dm, "--help"))
    for v in VERBS:
        assert ("\n  %s " % v) in r.out, v
        h = ok(cli(dm, v, "--help"), v)
        assert h.out.startswith("usage: allot %s" % v), h
        assert "Global options" in h.out
    for sub in (["tokens", "create"], ["tokens", "ls"], ["tokens", "revoke"], ["audit", "ls"],
                ["audit", "verify"]):
        h = ok(cli(dm, *(sub + ["--help"])), sub)
        assert h.out.startswith("usage: allot %s" % " ".join(sub)), h
    ok(cli(dm, "help", "submit"))
    # a man page per verb, with the usual sections, and the overview lists every verb
    docs = os.path.join(fx.SOURCE, "docs", "cli")
    overview = open(os.path.join(docs, "allot.md")).read()
    for v in VERBS:
        assert "`%s`" % v in overview and "allot-%s.md" % v in overview, v
        page = open(os.path.join(docs, "allot-%s.md" % v)).read()
        for sec in ("NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "EXAMPLES", "EXIT STATUS"):
            assert "\n## %s" % sec in page, (v, sec)
    fails(cli(dm), 1)
    fails(cli(dm, "frobnicate"), 1, "usage")
    fails(cli(dm, "ls", "--frob"), 1, "usage")
    fails(cli(dm, "tokens", "frob"), 1, "usage")
    fails(cli(dm, "ls", "-o", "xml"), 1, "usage")
    fails(cli(dm, "show", "abc"), 1, "usage")
    fails(cli(dm, "-", "ls"), 1, "usage")
    # global options before or after the verb, in every spelling
    for args in (["-ojson", "ls"], ["--output=json", "ls"], ["-o", "json", "ls"],
                 ["ls", "-ojson"], ["ls", "--output", "json"]):
        assert ok(cli(dm, *args), args).out.startswith("["), args


def test_output_format_refused_names_the_verbs_formats():
    """-o csv|html where a verb does not print it: the message lists what
    that verb prints (usage prints csv, invoice csv and html)."""
    r = fails(cli(dm, "usage", "-o", "html"), 1, "usage")
    assert "allot usage prints table, json, yaml or csv\n" in r.err, r
    r = fails(cli(dm, "ls", "-o", "csv"), 1, "usage")
    assert "allot ls prints table, json or yaml\n" in r.err, r
    r = fails(cli(dm, "top", "-o", "html"), 1, "usage")
    assert "allot top prints table, json or yaml\n" in r.err, r


def test_cli_uses_only_served_routes():
    """Every API path in the CLI's source is a route allotd serves."""
    routes = subprocess.run([fx.ALLOTD, "--print-routes"], capture_output=True, text=True,
                            timeout=10, check=True).stdout.split("\n")
    pats = [re.compile("^" + re.sub(r"\\{\w+\\}", "[^/]+", re.escape(r.split(" ", 1)[1])) + "$")
            for r in routes if " " in r]
    src = os.path.join(fx.SOURCE, "src", "cli")
    used = set()
    for f in os.listdir(src):
        with open(os.path.join(src, f)) as fh:
            used |= set(re.findall(r'"(/v1[^"?]*)', fh.read()))
    assert len(used) >= 8, used
    for u in used:
        path = re.sub(r"%[a-z]+", "x", u)
        assert any(p.match(path) for p in pats), "allot uses %s, which allotd does not serve" % u


def test_apply_tenants_and_quota():
    src = os.path.join(fx.SOURCE, "etc", "tenants.example.yaml")
    r = ok(cli(dm, "apply", "-f", src))
    assert "tenant/research/vision created" in r.lines(), r
    assert "priorityclass/training created" in r.lines(), r
    assert ok(cli(dm, "apply", "-f", src)).out == "no changes\n"
    n = ok(cli(dm, "apply", "-f", src, "-o", "json")).json()  # the counts, as a write answers
    assert n == {"tenants": len(ok(cli(dm, "tenants", "-o", "json")).json()["tenants"]),
                 "priority_classes": 3}, n
    # the document as JSON is what the server returns
    st, doc = dm.req("GET", "/v1/tenants", token=dm.admin)
    assert st == 200 and ok(cli(dm, "tenants", "-o", "json")).json() == doc
    # -o yaml reads back unchanged
    y = write(os.path.join(fx.tempdir(), "t.yaml"), ok(cli(dm, "tenants", "-o", "yaml")).out)
    assert ok(cli(dm, "apply", "-f", y)).out == "no changes\n"
    t = ok(cli(dm, "tenants")).lines()
    assert t[0].split()[:3] == ["PATH", "WEIGHT", "ISOLATION"], t
    assert any(l.split()[0] == "product/search" and "exclusive-gpu" in l for l in t), t
    assert ok(cli(dm, "tenants", "research", "-o", "json")).json()["tenants"][0]["path"] == \
        "research"
    fails(cli(dm, "tenants", "nosuch"), 2, "not_found")
    pc = ok(cli(dm, "tenants", "--priority-classes")).lines()
    assert [l.split()[0] for l in pc] == ["NAME", "inference", "notebooks", "training"], pc
    pj = ok(cli(dm, "tenants", "-P", "-o", "json")).json()
    assert [x["name"] for x in pj] == ["inference", "notebooks", "training"], pj
    q = ok(cli(dm, "quota", "research/vision", "-o", "json")).json()
    assert {"tenant": "research/vision", "resource": "memory", "nominal": "8Ti",
            "borrow_limit": "unlimited", "lend_limit": "unlimited"} in q, q
    gpu = [x for x in q if x["resource"] == "gpu"][0]
    assert (gpu["nominal"], gpu["borrow_limit"]) == (128, 64), gpu
    assert "research/speech  gpu:V100-32GB" in ok(cli(dm, "quota")).out
    fails(cli(dm, "quota", "nosuch"), 2, "not_found")
    # --prune with the fixture's tree replaces the example's; a dry run changes nothing
    f = write(os.path.join(fx.tempdir(), "t.json"), json.dumps(TENANTS))
    r = ok(cli(dm, "apply", "-f", f, "--prune", "--dry-run"))
    assert "tenant/interns pruned" in r.lines() and "dry run" in r.out, r
    assert "interns" in ok(cli(dm, "tenants")).out
    m = dm.req("GET", "/metrics", raw=True)[1]
    assert 'allot_tenant_gpus{tenant="interns"}' in m, m
    r = ok(cli(dm, "apply", "-f", f, "--prune"))
    assert "tenant/interns pruned" in r.lines(), r
    # a pruned tenant leaves the gauges (the core keeps its index, with no quota)
    end = time.time() + 10
    while time.time() < end and 'tenant="interns"' in dm.req("GET", "/metrics", raw=True)[1]:
        time.sleep(0.1)
    m = dm.req("GET", "/metrics", raw=True)[1]
    assert 'tenant="interns"' not in m, [l for l in m.splitlines() if "interns" in l]
    got = ok(cli(dm, "tenants", "-o", "json")).json()
    assert sorted(t["path"] for t in got["tenants"]) == sorted(
        t["path"] for t in TENANTS["tenants"])
    # a file of priority classes alone is merged (tenants stay); with --prune it would
    # remove every tenant: refused
    pcf = write(os.path.join(fx.tempdir(), "pc.yaml"),
                "priority_classes:\n  - {name: urgent, value: 2000, preemptible: false}\n")
    r = ok(cli(dm, "apply", "-f", pcf))
    assert r.lines() == ["priorityclass/urgent created"], r
    assert "urgent" in ok(cli(dm, "tenants", "-P")).out
    assert "research/vision" in ok(cli(dm, "tenants")).out
    fails(cli(dm, "apply", "-f", pcf, "--prune"), 1, "usage")
    # bad files: usage; a tree the server refuses: invalid
    fails(cli(dm, "apply", "-f", "/nonexistent.yaml"), 1, "usage")
    bad = write(os.path.join(fx.tempdir(), "bad.yaml"), "tenants: [\n")
    fails(cli(dm, "apply", "-f", bad), 1, "usage")
    bad = write(os.path.join(fx.tempdir(), "bad2.yaml"),
                "version: 1\ntenants:\n  - path: x\n    isolation: paranoid\n")
    fails(cli(dm, "apply", "-f", bad), 6, "invalid")
    fails(cli(dm, "apply"), 1)


def submit(*args, **kw):
    if "--" not in args and "-f" not in args:  # a job needs a command
        args = args + ("--", "true")
    r = ok(cli(dm, "submit", *args, **kw), args)
    assert r.out.strip().isdigit(), r
    return int(r.out)


def test_submit_show_cancel_events():
    jid = submit("--tenant", "research/nlp", "--gpus", "2", "--tasks", "2", "--cpus", "4",
                 "--mem", "16G", "--priority", "training", "--name", "train-1", "--image",
                 "pytorch:2", "-e", "EPOCHS=3", "-l", "team=nlp", "--time-limit", "1h",
                 "--gpu-model", "A100-80GB", "--checkpointable", "--no-requeue", "--qos",
                 "best-effort", "--", "python3",
                 "train.py",
                 "--lr", "0.1")
    j = ok(cli(dm, "show", jid, "-o", "json")).json()
    assert j["id"] == jid and j["state"] == "pending" and j["name"] == "train-1", j
    assert j["spec"] == {"tenant": "research/nlp", "name": "train-1", "priority": "training",
                         "image": "pytorch:2", "tasks": 2, "gpus": 2, "memory": 16384,
                         "cpus": 4.0, "time_limit": 3600, "checkpointable": True, "requeue": False,
                         "env": {"EPOCHS": "3"}, "labels": {"team": "nlp"},
                         "gpu_models": ["A100-80GB"], "qos": "best-effort",
                         "command": ["python3", "train.py", "--lr", "0.1"]}, j["spec"]
    assert j["idempotency_key"].startswith("allot-"), j
    t = ok(cli(dm, "show", jid)).out
    assert "state:        pending" in t and "command:      python3 train.py --lr 0.1" in t, t
    assert "qos:          best-effort" in t, t
    ls = ok(cli(dm, "ls", "-o", "json")).json()
    assert [x["id"] for x in ls if x["id"] == jid] == [jid]
    rows = ok(cli(dm, "ls")).lines()
    assert rows[0].split() == ["ID", "NAME", "USER", "TENANT", "STATE", "GPUS", "PRIORITY",
                               "SUBMITTED", "TIME", "NODES", "EXIT", "REASON"], rows
    # pending: it has not run (TIME), has no nodes and no exit code
    row = [l.split() for l in rows if l.split()[0] == str(jid)][0]
    assert row[:6] == [str(jid), "train-1", j["user"], "research/nlp", "pending", "2x2"], rows
    assert row[8:11] == ["-", "-", "-"], rows
    r = ok(cli(dm, "cancel", jid))
    assert r.out == "cancelled job %d\n" % jid, r
    assert ok(cli(dm, "show", jid, "-o", "json")).json()["state"] == "cancelled"
    fails(cli(dm, "cancel", jid), 4, "conflict")
    ev = ok(cli(dm, "events", jid, "-o", "json")).json()
    assert [e["kind"] for e in ev] == ["submitted", "cancelled"], ev
    after = ok(cli(dm, "events", jid, "--after", ev[0]["seq"], "-o", "json")).json()
    assert [e["kind"] for e in after] == ["cancelled"], after
    t = ok(cli(dm, "events", jid)).lines()
    assert t[0].split() == ["SEQ", "TIME", "KIND", "DETAIL"] and len(t) == 3, t
    # --follow ends once the job has ended, after its last event
    t = ok(cli(dm, "events", jid, "--follow", timeout=10)).lines()
    assert t[0].split() == ["SEQ", "TIME", "KIND", "DETAIL"] and len(t) == 3, t
    assert t[2].split()[2] == "cancelled" and t[2].index("cancelled") == t[0].index("KIND"), t
    f = ok(cli(dm, "events", jid, "--follow", "-o", "json", timeout=10)).lines()
    assert [json.loads(l)["kind"] for l in f] == ["submitted", "cancelled"], f
    fails(cli(dm, "show", 999999), 2, "not_found")
    # a bad id is named as what it is, not as an option
    r = fails(cli(dm, "show", "0"), 1, "usage")
    assert 'job id: "0"' in r.err and "--id" not in r.err, r
    r = fails(cli(dm, "plan", "--forecast", "--horizon", "0"), 1, "usage")
    assert '--horizon: "0"' in r.err and "----" not in r.err, r
    assert "memory 16384 MiB" in ok(cli(dm, "show", jid)).out
    fails(cli(dm, "events", 999999), 2, "not_found")
    fails(cli(dm, "cancel", 999999), 2, "not_found")
    # several ids: every one tried, the first failure decides
    a, b = submit("-t", "research/nlp"), submit("-t", "research/nlp")
    r = fails(cli(dm, "cancel", a, 999998, b), 2, "not_found")
    assert r.lines() == ["cancelled job %d" % a, "cancelled job %d" % b], r
    two = ok(cli(dm, "show", a, b, "-o", "json")).json()
    assert [x["id"] for x in two] == [a, b]
    t = ok(cli(dm, "show", a)).out  # no memory asked for: no unit after the dash
    assert "memory -\n" in t, t


def test_no_escape_sequences_reach_the_terminal():
    """Another tenant's job name or command may hold escape sequences: tables and `show`
    print them defanged; JSON keeps them exactly."""
    evil = "x\x1b]0;pwned\x07\x1b[31mred\u009b2J"
    jid = submit("-t", "research/nlp", "--name", evil, "--", "echo", evil)
    for args in (("ls",), ("show", jid)):
        out = ok(cli(dm, *args)).out
        assert "\x1b" not in out and "\x07" not in out and "\u009b" not in out, (args, out)
        assert "x?]0;pwned??[31mred?2J" in out, (args, out)
    assert ok(cli(dm, "show", jid, "-o", "json")).json()["name"] == evil
    ok(cli(dm, "cancel", jid))


def test_submit_shapes_and_files():
    m = submit("-t", "research/nlp", "--mig", "1g.10gb")
    f = submit("-t", "research/nlp", "--gpu-milli", "250", "--gpu-memory", "10G")
    assert ok(cli(dm, "show", m, "-o", "json")).json()["spec"]["mig"] == "1g.10gb"
    assert ok(cli(dm, "show", f, "-o", "json")).json()["spec"]["gpu_memory"] == 10240
    # a fraction of both compute and memory shows both, in show and ls
    assert "each gpus 0.25+10240MiB," in ok(cli(dm, "show", f)).out
    assert "0.25+10240MiB" in ok(cli(dm, "ls")).out
    d = fx.tempdir()
    y = write(os.path.join(d, "job.yaml"),
              "tenant: research/nlp\nname: from-yaml\ngpus: 1\ncpus: 2.5\n"
              "command: [python3, eval.py]\nenv: {SEED: \"7\"}\nlabels:\n  tier: \"1\"\n")
    jid = submit("-f", y)
    s = ok(cli(dm, "show", jid, "-o", "json")).json()["spec"]
    assert s["name"] == "from-yaml" and s["gpus"] == 1 and s["cpus"] == 2.5, s
    assert s["env"] == {"SEED": "7"} and s["labels"] == {"tier": "1"}, s
    # flags override the file; -- replaces the command
    jid = submit("-f", y, "--name", "renamed", "--", "sleep", "1")
    s = ok(cli(dm, "show", jid, "-o", "json")).json()["spec"]
    assert s["name"] == "renamed" and s["command"] == ["sleep", "1"], s
    js = write(os.path.join(d, "job.json"), json.dumps({"tenant": "research/vision", "gpus": 1,
                                                     "command": ["true"]}))
    jid = submit("-f", js)
    assert ok(cli(dm, "show", jid, "-o", "json")).json()["tenant"] == "research/vision"
    jid = submit("-f", "-", stdin='{"tenant": "research/vision", "name": "stdin", '
                 '"command": ["true"]}')
    assert ok(cli(dm, "show", jid, "-o", "json")).json()["name"] == "stdin"
    # a file's durations and begin time as the options take them, sent in seconds
    t = write(os.path.join(d, "times.yaml"),
              "tenant: research/nlp\ngpus: 0\ncommand: [\"true\"]\ntime_limit: 90m\n"
              "checkpointable: true\ncheckpoint_interval: \"1:00:00\"\nbegin_time: now+2h\n")
    t0 = int(time.time())
    s = ok(cli(dm, "show", submit("-f", t), "-o", "json")).json()["spec"]
    assert s["time_limit"] == 5400 and s["checkpoint_interval"] == 3600, s
    assert t0 + 7200 <= s["begin_time"] <= int(time.time()) + 7200, s
    bad = write(os.path.join(d, "bad.yaml"),
                "tenant: research/nlp\ncommand: [\"true\"]\ntime_limit: soon\n")
    r = fails(cli(dm, "submit", "-f", bad), 1, "usage")
    assert 'time_limit (in %s): "soon" is not a duration' % bad in r.err, r
    # -o yaml prints the job
    r = ok(cli(dm, "submit", "-t", "research/nlp", "-o", "yaml", "--", "true"))
    assert r.out.startswith("id: ") and "\nstate: pending\n" in r.out, r


def test_per_gpu_and_per_cpu():
    """sbatch's --cpus-per-gpu, --mem-per-gpu and --mem-per-cpu give the
    task's CPUs and memory, from the command line or a script's #SBATCH
    lines; with --cpus or --mem, or without whole GPUs, a usage error."""
    def spec(jid):
        return ok(cli(dm, "show", jid, "-o", "json")).json()["spec"]

    s = spec(submit("-t", "research/nlp", "-g", "2", "--cpus-per-gpu", "4", "--mem-per-gpu",
                    "8G"))
    assert (s["cpus"], s["memory"]) == (8, 16384), s
    s = spec(submit("-t", "research/nlp", "-c", "3", "--mem-per-cpu", "1G"))
    assert (s["cpus"], s["memory"]) == (3, 3072), s
    d = fx.tempdir()
    sc = write(os.path.join(d, "per.sh"),
               "#!/bin/sh\n#SBATCH --gres=gpu:4 --cpus-per-gpu=2 --mem-per-cpu=512\ntrue\n")
    s = spec(ok(cli(dm, "submit", "-t", "research/nlp", sc)).out.strip())
    assert (s["gpus"], s["cpus"], s["memory"]) == (4, 8, 4096), s
    for args, text in ((["-g", "1", "-c", "2", "--cpus-per-gpu", "2"],
                        "--cpus-per-gpu and --cpus exclude each other"),
                       (["-g", "1", "--mem", "1G", "--mem-per-gpu", "1G"], "exclude each other"),
                       (["--cpus-per-gpu", "2"], "the job asks for no whole GPUs"),
                       (["-g", "1", "--mem-per-gpu", "lots"], "--mem-per-gpu")):
        r = fails(cli(dm, "submit", "-t", "research/nlp", *args, "--", "true"), 1, "usage")
        assert text in r.err, (args, r)


def test_wrap():
    """--wrap COMMAND is sbatch's: the job runs /bin/sh -c COMMAND; with a
    command after -- it is a usage error."""
    s = ok(cli(dm, "show", submit("-t", "research/nlp", "--wrap", "echo a | wc -c", "-f",
                                  write(os.path.join(fx.tempdir(), "w.yaml"), "gpus: 0\n")),
              "-o", "json")).json()["spec"]
    assert s["command"] == ["/bin/sh", "-c", "echo a | wc -c"], s
    r = fails(cli(dm, "submit", "-t", "research/nlp", "--wrap", "true", "--", "false"), 1, "usage")
    assert "--wrap gives the command" in r.err, r


def test_cancel_by_filter():
    """allot cancel as scancel -n/-u/-t/--state: the matching jobs that wait
    or run, each alone (one member, not its whole array); filters without
    whom, or beside ids, are a usage error."""
    tag = "flt-%d" % int(time.time() * 1000)
    a = [submit("-t", "research/nlp", "-n", tag, "-H") for _ in range(2)]
    b = submit("-t", "research/vision", "-n", tag, "-H")
    other = submit("-t", "research/nlp", "-n", tag + "-x", "-H")
    arr = submit("-t", "research/nlp", "-n", tag + "-arr", "-H", "--array", "0-2")

    def state(j):
        return ok(cli(dm, "show", j, "-o", "json")).json()["state"]

    r = ok(cli(dm, "cancel", "-n", tag, "-t", "research/nlp"))
    assert r.out.count("cancelled job") == 2, r
    assert [state(j) for j in a] == ["cancelled"] * 2 and state(b) == "pending"
    assert state(other) == "pending"
    r = ok(cli(dm, "cancel", "--name", tag, "--state", "pending", "--mine"))
    assert state(b) == "cancelled" and state(other) == "pending", r
    # one member of an array alone: the others stay
    ok(cli(dm, "cancel", "%d_1" % arr))
    r = ok(cli(dm, "cancel", "-n", tag + "-arr"))
    assert r.out.count("cancelled job") == 2, r
    r = ok(cli(dm, "cancel", "-n", tag + "-none"))
    assert "no job that waits or runs matches" in r.err, r
    fails(cli(dm, "cancel", "-s", "pending"), 1, "usage")
    fails(cli(dm, "cancel", "-n", tag, str(other)), 1, "usage")
    r = fails(cli(dm, "cancel", "-n", tag, "-s", "failed"), 1, "usage")
    assert "only pending, starting or running" in r.err, r
    ok(cli(dm, "cancel", str(other)))


def test_yaml_round_trip():
    """Strings YAML could misread come back unchanged: -o yaml of a job's spec,
    read again by submit -f, gives the same spec."""
    tricky = ["true", "no", "null", "~", "1.5", "0x1f", "-3", "", " lead", "trail ", "a: b",
              "#hash", "x #y", "- dash", "[list]", "{map}", "multi\nline", "tab\there",
              "quote'\"s", "back\\slash", "\u00fcnicode", "@at", "`tick`", "12:30", ".5",
              "Yes", "NULL", "*star", "&amp", "!bang", "%pct", "|pipe", ">gt", "?q", ":colon"]
    spec = {"tenant": "research/nlp", "name": "yaml: round trip", "gpus": 0, "cpus": 0.5,
            "labels": {"k%d" % i: v for i, v in enumerate(tricky)},
            "env": {"a:b": "1", "true": "x", "0": "zero", "~": "tilde key", "#h": "hash"},
            "command": tricky}
    f = write(os.path.join(fx.tempdir(), "j.json"), json.dumps(spec))
    a = submit("-f", f)
    y = ok(cli(dm, "show", a, "-o", "yaml")).out
    lines = y.splitlines()
    start = lines.index("spec:") + 1
    body = []
    for l in lines[start:]:
        if not l.startswith("  "):
            break
        body.append(l[2:])
    b = submit("-f", "-", stdin="\n".join(body) + "\n")
    sa = ok(cli(dm, "show", a, "-o", "json")).json()["spec"]
    sb = ok(cli(dm, "show", b, "-o", "json")).json()["spec"]
    assert sa == sb == spec, (sa, sb)


def test_relative_workdir():
    """A relative --workdir is the submitter's folder, as sbatch --chdir:
    allot submit sends it whole; allotd refuses a relative one (the node's
    agent would take it against its own folder)."""
    here = fx.tempdir()
    for given, stored in (("sub/dir", here + "/sub/dir"), (".", here), ("/abs", "/abs")):
        jid = ok(cli(dm, "submit", "-t", "research/nlp", "--workdir", given, "--", "true",
                     cwd=here)).out.strip()
        spec = expect(dm.req("GET", "/v1/jobs/" + jid, token=dm.admin), 200)["spec"]
        assert spec["workdir"] == stored, (given, spec)
    b = expect(dm.req("POST", "/v1/jobs", {"tenant": "research/nlp", "workdir": "data",
                                          "command": ["true"]}, token=dm.admin), 422)
    assert "absolute path" in b["error"]["message"], b


def test_show_how_it_runs():
    """allot show gives the time limit, working folder, image, the names of
    the environment's variables (not their values) and the labels."""
    jid = ok(cli(dm, "submit", "-t", "research/nlp", "--time-limit", "1h", "--workdir", "/tmp",
                 "-e", "A=secret", "-e", "B=2", "-l", "team=x", "--", "true")).out.strip()
    out = ok(cli(dm, "show", jid)).out
    for line in ("time limit:   3600 s (1:00:00)", "workdir:      /tmp", "env:          A, B",
                 "labels:       team=x"):
        assert line in out, (line, out)
    assert "secret" not in out and "image:" not in out, out
    expect(dm.req("POST", "/v1/jobs/%s/cancel" % jid, token=dm.admin), 200)
    # the GPU models it may run on, as it asked
    jid = ok(cli(dm, "submit", "-t", "research/nlp", "-g", "1", "--gpu-model", "A100-80GB",
                 "--gpu-model", "H100-80GB", "--", "true")).out.strip()
    assert "gpu models:   A100-80GB, H100-80GB\n" in ok(cli(dm, "show", jid)).out
    expect(dm.req("POST", "/v1/jobs/%s/cancel" % jid, token=dm.admin), 200)


def test_run_says_why_it_waits():
    """allot run (and logs -f) says on stderr why the job waits, as srun's
    "queued and waiting for resources", instead of nothing: this allotd has
    no node."""
    import select
    import subprocess
    from cli_fixture import ALLOT
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ALLOT_", "XDG_"))}
    env.update(HOME=fx.tempdir(), ALLOT_SERVER="http://127.0.0.1:%d" % dm.port,
               ALLOT_TOKEN=dm.admin)
    p = subprocess.Popen([ALLOT, "run", "-t", "research/nlp", "--", "true"], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    said, end = "", time.time() + 15
    try:
        while "waits:" not in said and time.time() < end:  # bounded
            if select.select([p.stderr], [], [], 0.5)[0]:
                line = p.stderr.readline()
                if not line:
                    break
                said += line
    finally:
        p.kill()
        p.wait()
    assert "allot: job " in said and " waits: " in said, said
    jid = said.split("allot: job ")[1].split()[0]
    expect(dm.req("POST", "/v1/jobs/%s/cancel" % jid, token=dm.admin), 200)


def test_submit_errors():
    # found here: usage (1)
    fails(cli(dm, "submit", "--gpus", "1"), 1, "usage")
    fails(cli(dm, "submit", "-t", "research/nlp", "--gpus", "1", "--mig", "1g.10gb"), 1, "usage")
    fails(cli(dm, "submit", "-t", "research/nlp", "--mem", "lots"), 1, "usage")
    fails(cli(dm, "submit", "-t", "research/nlp", "--gpu-milli", "1000"), 1, "usage")
    # a task with no CPU is refused here as allotd refuses it (not exit 6 from the server)
    r = fails(cli(dm, "submit", "-t", "research/nlp", "--cpus", "0", "--", "true"), 1, "usage")
    assert "0.001..65536" in r.err, r
    fails(cli(dm, "submit", "-t", "research/nlp", "python3"), 1, "usage")
    # no command, neither after -- nor in the file: nothing is sent
    r = fails(cli(dm, "submit", "-t", "research/nlp", "--gpus", "1"), 1, "usage")
    assert "needs a command" in r.err, r
    fails(cli(dm, "submit", "-t", "research/nlp", "--"), 1, "usage")
    fails(cli(dm, "run", "-t", "research/nlp", "--"), 1, "usage")
    # one job's output and exit code: an array is submitted, not run
    n = len(ok(cli(dm, "ls", "-o", "json")).json())
    r = fails(cli(dm, "run", "-t", "research/nlp", "--array", "0-1", "--", "true"), 1, "usage")
    assert "follows one job" in r.err and len(ok(cli(dm, "ls", "-o", "json")).json()) == n, r
    f = write(os.path.join(fx.tempdir(), "arr.json"),
              '{"tenant": "research/nlp", "array": "0-1", "command": ["true"]}')
    r = fails(cli(dm, "run", "-f", f, "--", "true"), 1, "usage")  # in the job file too
    assert "follows one job" in r.err and len(ok(cli(dm, "ls", "-o", "json")).json()) == n, r
    nocmd = write(os.path.join(fx.tempdir(), "nocmd.json"), '{"tenant": "research/nlp"}')
    fails(cli(dm, "submit", "-f", nocmd), 1, "usage")
    fails(cli(dm, "submit", "-t", "research/nlp", "--idempotency-key", "x" * 129), 1, "usage")
    fails(cli(dm, "submit", "-f", "/nonexistent.yaml"), 1, "usage")
    # one YAML document per file: a second one is refused, not ignored
    two = write(os.path.join(fx.tempdir(), "two.yaml"),
                "tenant: research/nlp\ncommand: [\"true\"]\n---\nname: b\n")
    r = fails(cli(dm, "submit", "-f", two), 1, "usage")
    assert "two.yaml:4: a second document" in r.err, r
    end = write(os.path.join(fx.tempdir(), "end.yaml"),
                "tenant: research/nlp\nname: dashes\ncommand: [\"true\"]\n---\n")
    assert cli(dm, "submit", "-f", end).rc == 0
    # refused by the server: invalid (6), with the server's code and message
    r = fails(cli(dm, "submit", "-t", "nosuch/team", "--", "true"), 6, "invalid")
    assert 'unknown tenant \\"nosuch/team\\"' in r.err or 'unknown tenant "nosuch/team"' in r.err
    fails(cli(dm, "submit", "-t", "research/nlp", "--gpus", "17", "--", "true"), 6, "invalid")
    fails(cli(dm, "submit", "-t", "research/nlp", "--mig", "9g.900gb", "--", "true"), 6, "invalid")
    fails(cli(dm, "submit", "-t", "research", "--gpus", "1", "--", "true"), 6, "invalid")
    bad = write(os.path.join(fx.tempdir(), "j.json"),
                '{"tenant": "research/nlp", "gpu": 1, "command": ["true"]}')
    r = fails(cli(dm, "submit", "-f", bad), 6, "bad_request")
    assert '"gpu"' in r.err, r


def test_submit_env_names_and_command_type():
    """-e takes only variable names (allotd's rule: printable ASCII, no space or '=') and
    says so (exit 1, nothing sent); a job file whose command is a string, not a
    list, is told that (YAML and JSON), not that it has no command."""
    for bad in ("A B=x", "=x", "\u00e9t\u00e9=x", "A\tB=x"):
        r = fails(cli(dm, "submit", "-t", "research/nlp", "-e", bad, "--", "true"), 1, "usage")
        assert "--env" in r.err, (bad, r)
        if not bad.startswith("="):
            assert "is not a variable name" in r.err, (bad, r)
    jid = submit("-t", "research/nlp", "-e", "_X=1", "-e", "GOOD_2=a b=c", "-e", "a.b-c=2",
                 "--", "true")
    env = ok(cli(dm, "show", jid, "-o", "json")).json()["spec"]["env"]
    assert env == {"_X": "1", "GOOD_2": "a b=c", "a.b-c": "2"}, env
    # labels keep any key
    submit("-t", "research/nlp", "-l", "a.b/c-d=1", "--", "true")
    d = fx.tempdir()
    y = write(os.path.join(d, "str.yaml"), "tenant: research/nlp\ncommand: python3 train.py\n")
    j = write(os.path.join(d, "str.json"), '{"tenant": "research/nlp", "command": "true"}')
    n = write(os.path.join(d, "num.json"), '{"tenant": "research/nlp", "command": ["sleep", 1]}')
    for f in (y, j):
        r = fails(cli(dm, "submit", "-f", f), 1, "usage")
        assert 'field "command" must be a list of strings' in r.err and "not a string" in r.err, r
        assert "needs a command" not in r.err, r
    r = fails(cli(dm, "submit", "-f", n), 1, "usage")
    assert "item 1 is a number" in r.err, r
    # -- replaces a wrong command of the file
    submit("-f", y, "--", "true")


def test_arrays_and_dependencies():
    r = ok(cli(dm, "submit", "-t", "research/nlp", "--name", "sweep", "--array", "0-4%2",
               "--", "run", "x"))
    aid = int(r.out)
    assert "array %d: 5 jobs" % aid in r.err, r
    ls = ok(cli(dm, "ls", "--array", str(aid), "-o", "json")).json()
    assert [j["array_index"] for j in ls] == [0, 1, 2, 3, 4], ls
    table = ok(cli(dm, "ls", "--array", str(aid))).out
    assert "(%d_3)" % aid in table, table
    m3 = ls[3]["id"]
    assert ok(cli(dm, "show", "%d_3" % aid, "-o", "json")).json()["id"] == m3
    assert "array:" in ok(cli(dm, "show", "%d_3" % aid)).out
    r = fails(cli(dm, "show", "%d_9" % aid), 2, "not_found")
    assert "array %d has no index 9" % aid in r.err, r
    r = fails(cli(dm, "show", "%d_0" % m3), 2, "not_found")  # a member is no array
    assert "job %d is not an array" % m3 in r.err, r
    # a failed id prints nothing, not even the blank line between jobs
    r = cli(dm, "show", "999999", str(m3))
    assert r.rc == 2 and r.out.startswith("id:"), r
    fails(cli(dm, "show", "%d_x" % aid), 1, "usage")
    ok(cli(dm, "events", "%d_3" % aid))
    dep = submit("-t", "research/nlp", "--dependency", "afterok:%d" % m3)
    assert ok(cli(dm, "show", str(dep), "-o", "json")).json()["depends_on"] == [m3]
    fails(cli(dm, "submit", "-t", "research/nlp", "--dependency", "after:1", "--", "true"), 6,
          "invalid")
    fails(cli(dm, "submit", "-t", "research/nlp", "--array", "9-1", "--", "true"), 6, "invalid")
    # one member by ARRAYID_INDEX, then the rest through the array's id
    assert "cancelled job %d_3" % aid in ok(cli(dm, "cancel", "%d_3" % aid)).out
    r = ok(cli(dm, "cancel", str(aid)))
    assert "cancelled array %d (4 jobs)\n" % aid in r.out, r
    states = [j["state"] for j in ok(cli(dm, "ls", "--array", str(aid), "-o", "json")).json()]
    assert states == ["cancelled"] * 5, states
    # its dependency can never hold now: the dependant ends cancelled
    j = ok(cli(dm, "show", str(dep), "-o", "json")).json()
    for _ in range(100):
        if j["state"] == "cancelled":
            break
        time.sleep(0.05)
        j = ok(cli(dm, "show", str(dep), "-o", "json")).json()
    assert j["state"] == "cancelled" and "never" in j["pending_reason"], j


def test_idempotency_key_flag():
    a = submit("-t", "research/nlp", "--idempotency-key", "cli-key-1")
    r = ok(cli(dm, "submit", "-t", "research/nlp", "--idempotency-key", "cli-key-1", "--",
               "true"))
    assert int(r.out) == a and "already submitted" in r.err, r
    # the key of another request: refused, nothing submitted
    fails(cli(dm, "submit", "-t", "research/nlp", "--idempotency-key", "cli-key-1", "--",
              "false"), 6, "idempotency_key_reused")
    assert submit("-t", "research/nlp", "--idempotency-key", "cli-key-2") != a
    ls = ok(cli(dm, "ls", "-o", "json")).json()
    assert sum(1 for j in ls if j.get("idempotency_key") == "cli-key-1") == 1


def test_ls_pages_and_filters():
    for i in range(23):
        st, _ = dm.req("POST", "/v1/jobs", {"tenant": "research/vision", "name": "bulk-%d" % i},
                       token=dm.admin)
        assert st == 201
    direct = []
    cursor = 0
    for _ in range(100):
        st, b = dm.req("GET", "/v1/jobs?limit=1000&cursor=%d" % cursor, token=dm.admin)
        direct += b["jobs"]
        cursor = b["next_cursor"]
        if not cursor:
            break
    small = {"ALLOT_CLI_PAGE": "4"}
    got = ok(cli(dm, "ls", "--all", "-o", "json", env=small)).json()
    assert [j["id"] for j in got] == [j["id"] for j in direct] and len(got) > 30, len(got)
    # by default, as squeue: the jobs that wait or run
    live = ok(cli(dm, "ls", "-o", "json", env=small)).json()
    assert [j["id"] for j in live] == [j["id"] for j in got if j["state"] in
                                       ("pending", "starting", "running")], live
    assert len(live) < len(got), (len(live), len(got))  # some ended (cancelled) before
    two = ok(cli(dm, "ls", "-s", "pending,cancelled", "-o", "json")).json()
    assert {j["state"] for j in two} == {"pending", "cancelled"}, two
    fails(cli(dm, "ls", "-s", "pending", "--all"), 1, "usage")
    fails(cli(dm, "ls", "-s", "pending,"), 6, "bad_query")
    # one page or many: the same jobs (states and reasons may move on meanwhile)
    again = ok(cli(dm, "ls", "-A", "-o", "json")).json()
    assert [(j["id"], j["name"], j["spec"]) for j in again] == \
        [(j["id"], j["name"], j["spec"]) for j in got]
    assert len(ok(cli(dm, "ls", "-A", "--limit", "7", "-o", "json", env=small)).json()) == 7
    # the latest jobs first, across pages
    newest = ok(cli(dm, "ls", "-A", "--newest", "-o", "json", env=small)).json()
    assert [j["id"] for j in newest] == [j["id"] for j in got][::-1], newest
    latest = ok(cli(dm, "ls", "-A", "-n", "--limit", "5", "-o", "json", env=small)).json()
    assert [j["id"] for j in latest] == [j["id"] for j in got][::-1][:5], latest
    vis = ok(cli(dm, "ls", "--tenant", "research/vision", "-o", "json", env=small)).json()
    assert len(vis) >= 23 and {j["tenant"] for j in vis} == {"research/vision"}
    sub = ok(cli(dm, "ls", "--tenant", "research", "--subtree", "-o", "json")).json()
    assert {j["tenant"] for j in sub} == {"research/vision", "research/nlp"}, sub
    canc = ok(cli(dm, "ls", "--state", "cancelled", "-o", "json")).json()
    assert canc and {j["state"] for j in canc} == {"cancelled"}
    fails(cli(dm, "ls", "--state", "sleeping"), 6, "bad_query")
    fails(cli(dm, "ls", "--subtree"), 1, "usage")
    # table: a header and one row per job; yaml: one list item per job
    assert len(ok(cli(dm, "ls", "-A", env=small)).lines()) == len(got) + 1
    y = ok(cli(dm, "ls", "-A", "-o", "yaml", env=small)).out
    assert sum(1 for l in y.splitlines() if l.startswith("- id: ")) == len(got)
    assert ok(cli(dm, "ls", "--state", "lost", "-o", "json")).out.strip() == "[]"
    assert ok(cli(dm, "ls", "--state", "lost", "-o", "yaml")).out.strip() == "[]"
    # a tenant that is not there is an error; one with no jobs lists none
    r = fails(cli(dm, "ls", "--tenant", "research/nosuch"), 2, "not_found")
    assert "no tenant research/nosuch" in r.err and not r.out, r
    fails(cli(dm, "ls", "-t", "nosuch", "-o", "json"), 2, "not_found")
    assert ok(cli(dm, "ls", "-t", "research", "-o", "json")).out.strip() == "[]"


def test_who_submitted():
    """Each job names its user (the token's name, TENANT:NAME for a token
    bound to a tenant); ls lists one user's jobs, or the caller's own."""
    ann = dm.token("member", "research/nlp", "ann")
    bob = dm.token("member", "research/nlp", "bob")
    st, b = dm.req("POST", "/v1/jobs", {"tenant": "research/nlp", "name": "by-ann"}, token=ann)
    assert st == 201 and b["user"] == "research/nlp:ann", b
    assert expect(dm.req("GET", "/v1/whoami", token=ann), 200)["user"] == "research/nlp:ann"
    a2 = submit("-t", "research/nlp", token=ann)
    by_bob = submit("-t", "research/nlp", token=bob)
    by_admin = submit("-t", "research/nlp")
    admin_name = ok(cli(dm, "show", by_admin, "-o", "json")).json()["user"]
    assert admin_name and ":" not in admin_name, admin_name  # a cluster-wide token
    mine = ok(cli(dm, "ls", "--mine", "-o", "json", token=ann)).json()
    assert [j["id"] for j in mine] == [b["id"], a2], mine
    assert {j["user"] for j in mine} == {"research/nlp:ann"}, mine
    assert [j["id"] for j in ok(cli(dm, "ls", "-m", "-o", "json", token=bob)).json()] == [by_bob]
    by = ok(cli(dm, "ls", "--user", "research/nlp:ann", "--newest", "-o", "json")).json()
    assert [j["id"] for j in by] == [a2, b["id"]], by
    # with the other filters, and one page at a time
    small = {"ALLOT_CLI_PAGE": "1"}
    by = ok(cli(dm, "ls", "-u", "research/nlp:ann", "-t", "research", "-r", "-s", "pending",
                "-o", "json", env=small)).json()
    assert [j["id"] for j in by] == [b["id"], a2], by
    assert ok(cli(dm, "ls", "-u", "research/nlp:ann", "-t", "research/vision", "-o",
                  "json")).json() == []
    r = ok(cli(dm, "ls", "-u", "ann", "-o", "json"))  # not that ann: how users are named
    assert r.json() == [] and "TENANT:NAME" in r.err, r
    rows = ok(cli(dm, "ls", "--mine", token=ann)).lines()
    assert len(rows) == 3 and all(r.split()[2] == "research/nlp:ann" for r in rows[1:]), rows
    assert "user:         research/nlp:ann" in ok(cli(dm, "show", a2)).out
    r = fails(cli(dm, "ls", "--mine", "--user", "x"), 1, "usage")
    assert "--mine and --user" in r.err, r
    expect(dm.req("GET", "/v1/jobs?user=", token=dm.admin), 400)
    ok(cli(dm, "cancel", b["id"], a2, by_bob, by_admin))


def test_default_tenant():
    """A token bound to a leaf submits there without --tenant; one bound
    to a tenant with sub-tenants, or a cluster-wide one, must name it."""
    leaf = dm.token("member", "research/nlp", "leafy")
    jid = submit(token=leaf)
    assert ok(cli(dm, "show", jid, "-o", "json")).json()["tenant"] == "research/nlp"
    other = submit("-t", "research/nlp", token=leaf)  # naming it is still fine
    fails(cli(dm, "submit", "-t", "research/vision", "--", "true", token=leaf), 3, "forbidden")
    org = dm.token("tenant-admin", "research", "orgy")
    r = fails(cli(dm, "submit", "--", "true", token=org), 6, "invalid")
    assert "no field \"tenant\", so this token's own" in r.err, r
    assert '"research" has sub-tenants' in r.err, r
    r = fails(cli(dm, "submit", "--", "true"), 6, "bad_request")
    assert 'field "tenant" is required' in r.err, r
    ok(cli(dm, "cancel", jid, other))


def test_member_scope_and_denied():
    member = dm.token("member", "research/nlp", "m")
    viewer = dm.token("viewer", "", "v")
    mine = submit("-t", "research/nlp", token=member)
    other = submit("-t", "research/vision")
    ls = ok(cli(dm, "ls", "-o", "json", token=member)).json()
    assert ls and {j["tenant"] for j in ls} == {"research/nlp"}
    fails(cli(dm, "show", other, token=member), 2, "not_found")  # 404, never 403
    fails(cli(dm, "cancel", other, token=member), 2, "not_found")
    fails(cli(dm, "submit", "-t", "research/vision", "--", "true", token=member), 3, "forbidden")
    fails(cli(dm, "cancel", mine, token=viewer), 3, "forbidden")
    fails(cli(dm, "audit", "ls", token=member), 3, "forbidden")
    fails(cli(dm, "apply", "-f", os.path.join(fx.SOURCE, "etc", "tenants.example.yaml"),
              "--prune", token=viewer), 3, "forbidden")
    fails(cli(dm, "ls", token="allot_" + "0" * 64), 3, "unauthorized")
    ok(cli(dm, "cancel", mine, token=member))


def test_token_hidden_from_process_list():
    """--token, before or after the verb, is not left in /proc/PID/cmdline of a command
    that runs for long (events --follow of a pending job)."""
    jid = ok(cli(dm, "submit", "-t", "research/nlp", "--gpus", "1", "--", "true")).out.strip()
    e = {k: v for k, v in os.environ.items() if not k.startswith(("ALLOT_", "XDG_"))}
    e.update(HOME=fx.tempdir(), ALLOT_SERVER="http://127.0.0.1:%d" % dm.port)
    server = "http://127.0.0.1:%d" % dm.port
    for args in (["--token", dm.admin, "events", jid, "--follow"],
                 ["events", jid, "--follow", "--token=" + dm.admin, "--server", server]):
        p = subprocess.Popen([ALLOT] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=e)
        fx._procs.append(p)
        try:
            assert p.stdout.readline(), p.stderr.read()  # it has parsed and asked allotd
            with open("/proc/%d/cmdline" % p.pid, "rb") as f:
                line = f.read()
            assert dm.admin.encode() not in line and b"*" * len(dm.admin) in line, line
        finally:
            p.kill()
            p.wait(timeout=10)
    ok(cli(dm, "cancel", jid))


def test_checkpoint():
    """allot checkpoint reports a save of the ids given, or of $ALLOT_JOB_ID
    (what a job runs after it saved); the server's refusals are its exit
    status. Its own daemon, with a node, so that a job runs."""
    d = Daemon()
    try:
        fx.expect(d.req("PUT", "/v1/tenants", TENANTS, token=d.admin), 200)
        ag = d.token("agent", "", "agents")
        fx.expect(d.req("POST", "/v1/nodes/register", {
            "name": "c1", "cpus": 8, "memory": 64000, "gpus": [{"model": "A100-80GB"}]},
            token=ag), 201)
        run = ok(cli(d, "submit", "-t", "research/nlp", "--gpus", "1", "--checkpointable",
                     "--checkpoint-interval", "1h", "--", "true"))
        jid = int(run.out.strip())
        end = time.time() + 10
        while time.time() < end and ok(cli(d, "show", jid, "-o", "json")).json()["state"] == \
                "pending":  # bounded: until it is placed
            time.sleep(0.05)
        r = ok(cli(d, "checkpoint", env={"ALLOT_JOB_ID": str(jid)}))
        assert re.fullmatch(r"job %d saved at \d+\n" % jid, r.out), r
        j = ok(cli(d, "checkpoint", "-o", "json", env={"ALLOT_JOB_ID": str(jid)})).json()
        assert j["id"] == jid and abs(j["saved_at"] - time.time()) < 10, j
        ev = ok(cli(d, "events", jid, "-o", "json")).json()
        # the second, within the minute of the first, is counted but not stored again
        assert [e["kind"] for e in ev].count("checkpoint") == 1, ev
        assert "\nlast save:    " in ok(cli(d, "show", jid)).out
        fails(cli(d, "checkpoint"), 1, "usage")  # neither an id nor $ALLOT_JOB_ID
        waits = ok(cli(d, "submit", "-t", "research/nlp", "--gpus", "1", "--checkpointable",
                       "--", "true")).out.strip()
        r = fails(cli(d, "checkpoint", waits), 4, "conflict")
        assert "does not run (pending)" in r.err, r
        plain = ok(cli(d, "submit", "-t", "research/nlp", "--", "true")).out.strip()
        r = fails(cli(d, "checkpoint", plain), 6, "invalid")
        assert "not checkpointable" in r.err, r
        # from inside a job that is not checkpointable (no credential of its own, no
        # token configured): why, not "no token"
        r = fails(cli(d, "checkpoint", no_env=True,
                      env={"ALLOT_JOB_ID": plain, "ALLOT_SERVER": "http://127.0.0.1:%d" % d.port}),
                  6, "invalid")
        assert "no credential of its own" in r.err and "--checkpointable" in r.err, r
        fails(cli(d, "checkpoint", 999999), 2, "not_found")
        # the job's own credential: reports of $ALLOT_JOB_ID go with it, even
        # when the configured token may not report (a viewer); other ids do not
        jobs = fx.expect(d.req("POST", "/v1/nodes/c1/heartbeat", {}, token=d.admin),
                         200)["jobs"]
        own = next(x["job_token"] for x in jobs if x["job"] == jid)
        viewer = d.token("viewer", "research", "v")
        env = {"ALLOT_JOB_ID": str(jid), "ALLOT_JOB_TOKEN": own}
        ok(cli(d, "checkpoint", token=viewer, env=env))
        ok(cli(d, "checkpoint", jid, token=viewer, env=env))
        fails(cli(d, "checkpoint", jid, waits, token=viewer, env=env), 3, "forbidden")
        fails(cli(d, "checkpoint", token=viewer, env=dict(env, ALLOT_JOB_TOKEN=own[:-1])),
              3, "unauthorized")
        fails(cli(d, "checkpoint", token=viewer, env=dict(env, ALLOT_JOB_TOKEN="")), 3,
              "forbidden")  # empty: the configured token
    finally:
        assert d.stop() == 0


if __name__ == "__main__":
    dm = Daemon()
    try:
        fx.run([test_help_everywhere, test_output_format_refused_names_the_verbs_formats,
                test_cli_uses_only_served_routes,
                test_apply_tenants_and_quota, test_submit_show_cancel_events,
                test_no_escape_sequences_reach_the_terminal, test_submit_shapes_and_files,
                test_per_gpu_and_per_cpu, test_cancel_by_filter, test_wrap,
                test_yaml_round_trip, test_relative_workdir, test_show_how_it_runs,
                test_run_says_why_it_waits,
                test_submit_errors, test_submit_env_names_and_command_type,
                test_idempotency_key_flag, test_arrays_and_dependencies,
                test_ls_pages_and_filters, test_who_submitted, test_default_tenant,
                test_member_scope_and_denied, test_token_hidden_from_process_list,
                test_checkpoint])
    finally:
        assert dm.stop() == 0
