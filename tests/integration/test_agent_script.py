"""Batch scripts (sbatch job.sh): `allot submit SCRIPT [-- ARGS]` sends the
script with the job and a real agent runs it (no shared file system),
with the interpreter of its #! line, the job's arguments and exit code;
its #ALLOT and #SBATCH directive lines give the options the command line
does not; Slurm options allot has no use for are named and left out;
`allot run SCRIPT` streams it; what is not a script is refused by the
CLI and by allotd."""

import json
import os

import allotd_fixture as fx
from allotd_fixture import TENANTS, Agent, Daemon, expect
from cli_fixture import cli, fails, ok, write

SCRIPT = """#!/bin/bash
# set up (a comment: directives go on)

#SBATCH -J trainer --time=30
#SBATCH --gres=gpu:2 -c 2
#SBATCH --output=slurm-%j.out --mail-type=END
#SBATCH --export=FOO=bar,ALL
#ALLOT --label team=nlp -e 'GREETING=hello world'
echo "args: $*"
echo "foo=$FOO greeting=$GREETING gpus=$(echo $CUDA_VISIBLE_DEVICES | tr , '\\n' | wc -l)"
echo "slurm: $SLURM_JOB_ID $SLURM_PROCID $SLURM_NTASKS $SLURM_JOB_NAME ${SLURM_ARRAY_TASK_ID-none}"
#SBATCH --gres=gpu:4
exit 3
"""


def test_scripts():
    dm = Daemon()
    ag = None
    try:
        expect(dm.req("PUT", "/v1/tenants", TENANTS, token=dm.admin), 200)
        ag = Agent(dm, dm.token("agent", "", "agent"), "sc1", emulate="4xL4")
        d = fx.tempdir()
        os.chmod(d, 0o755)
        path = write(os.path.join(d, "job.sh"), SCRIPT)

        # directives after the first command (the second --gres) are not read
        r = ok(cli(dm, "submit", "-t", "research/nlp", path, "--", "one", "two words", cwd=d))
        for opt in ("--output", "--mail-type", "--export=ALL"):
            assert "job.sh:%d: #SBATCH %s: not taken" % (7 if "export" in opt else 6, opt) \
                in r.err, r
        jid = int(r.out.strip())
        j = fx.wait_job(dm, jid, "failed", timeout=30)
        s = j["spec"]
        assert (s["name"], s["gpus"], s["cpus"], s["time_limit"]) == ("trainer", 2, 2, 1800), s
        assert s["env"] == {"FOO": "bar", "GREETING": "hello world", "SLURM_SUBMIT_DIR": d}, s
        assert s["labels"] == {"team": "nlp"} and s["command"] == ["one", "two words"], s
        assert s["script"] == SCRIPT and j["exit_code"] == 3, j
        log = ag.task_log(jid)
        assert "args: one two words\n" in log, log
        assert "foo=bar greeting=hello world gpus=2\n" in log, log
        # Slurm's names for what the node tells every task
        assert "slurm: %d 0 1 trainer none\n" % jid in log, log
        # a list gives the script's size, the job itself the script
        listed = [x for x in expect(dm.req("GET", "/v1/jobs?all=true", token=dm.admin),
                                    200)["jobs"] if x["id"] == jid][0]
        assert "script" not in listed["spec"] and listed["spec"]["script_bytes"] == len(SCRIPT), \
            listed
        show = ok(cli(dm, "show", jid)).out
        assert "\nscript:       13 lines, %d bytes: #!/bin/bash" % len(SCRIPT) in show, show
        assert "\narguments:    one two words\n" in show, show

        # the command line wins over the directives; the name is the script's without -J
        py = write(os.path.join(d, "count.py"),
                   "#!/usr/bin/env python3\n#ALLOT -g 2 --time-limit 5m\n"
                   "import os, sys\nprint('py', sys.argv[1:], os.environ.get('ALLOT_JOB_NAME'))\n")
        r = ok(cli(dm, "submit", "-t", "research/nlp", "-g", "1", py, "--", "x"))
        jid = int(r.out.strip())
        j = fx.wait_job(dm, jid, "succeeded", timeout=30)
        assert (j["spec"]["gpus"], j["spec"]["time_limit"]) == (1, 300), j
        assert j["spec"]["name"] == "count.py", j
        assert "py ['x'] count.py\n" in ag.task_log(jid), ag.task_log(jid)

        # allot run streams a script and exits with its code
        r = cli(dm, "run", "-t", "research/nlp", path, timeout=60)
        assert r.rc == 3 and "args: \n" in r.out, r

        # refused by the CLI: no #!, too long, two scripts, a bad directive
        plain = write(os.path.join(d, "plain.sh"), "echo hi\n")
        r = fails(cli(dm, "submit", "-t", "research/nlp", plain), 1)
        assert "does not start with #!" in r.err, r
        big = write(os.path.join(d, "big.sh"), "#!/bin/sh\n" + "#" * 70000 + "\n")
        r = fails(cli(dm, "submit", "-t", "research/nlp", big), 1)
        assert "is over 64 KiB" in r.err, r
        # every word after the script is its argument (as sbatch), -- or not
        for words in (["-c", "3", plain], ["--", "-c", "3", plain]):
            r = ok(cli(dm, "submit", "-t", "research/nlp", "-H", path, *words))
            s = json.loads(ok(cli(dm, "-o", "json", "show", r.out.strip())).out)["spec"]
            assert s["command"] == ["-c", "3", plain] and s["cpus"] == 2, (words, s)
        quote = write(os.path.join(d, "quote.sh"), "#!/bin/sh\n#SBATCH -J 'open\ntrue\n")
        r = fails(cli(dm, "submit", "-t", "research/nlp", quote), 1)
        assert "quote.sh:2: an unclosed quote" in r.err, r
        bad = write(os.path.join(d, "bad.sh"), "#!/bin/sh\n#ALLOT --gpus many\ntrue\n")
        r = fails(cli(dm, "submit", "-t", "research/nlp", bad), 1)
        assert "#ALLOT and #SBATCH lines of %s" % bad in r.err, r
        r = fails(cli(dm, "submit", "-t", "research/nlp", write(
            os.path.join(d, "pos.sh"), "#!/bin/sh\n#ALLOT stray\ntrue\n")), 1)
        assert "a directive holds \"stray\", which is no option" in r.err, r

        # directives may not reach the global options, nor ask for help
        for line in ("#ALLOT --server http://127.0.0.1:1", "#ALLOT -o json", "#ALLOT --help",
                     "#ALLOT --token=x"):
            g = write(os.path.join(d, "g.sh"), "#!/bin/sh\n%s\ntrue\n" % line)
            r = fails(cli(dm, "submit", "-t", "research/nlp", g), 1)
            assert "which a script may not" in r.err and not r.out, (line, r)
        for line, text in (("#ALLOT -f /etc/passwd", "which a script may not"),
                           ("#ALLOT --idempotency-key k", "which a script may not"),
                           ("#SBATCH -H2", "#SBATCH -H2 takes no value")):
            g = write(os.path.join(d, "g.sh"), "#!/bin/sh\n%s\ntrue\n" % line)
            r = fails(cli(dm, "submit", "-t", "research/nlp", g), 1)
            assert text in r.err, (line, r)
        # DOS line breaks: refused, as sbatch does
        crlf = write(os.path.join(d, "crlf.sh"), "#!/bin/sh\r\n#SBATCH -J x\r\ntrue\r\n")
        r = fails(cli(dm, "submit", "-t", "research/nlp", crlf), 1)
        assert "DOS line breaks" in r.err, r

        def spec_of(text, *args):
            f = write(os.path.join(d, "t.sh"), "#!/bin/sh\n" + text + "true\n")
            r = ok(cli(dm, "submit", "-t", "research/nlp", *args, f))
            return ok(cli(dm, "-o", "json", "show", r.out.strip())).json()["spec"], r.err

        s, err = spec_of("#SBATCH --exclusive\n#SBATCH --exclusive -J ex -L lic:1\n")
        assert s["name"] == "ex" and "--exclusive: not taken" in err and "-L: not taken" in err, \
            (s, err)
        # the command line wins whole, and its group: --mem over --mem-per-cpu, -g over --gres
        s, _ = spec_of("#SBATCH --mem-per-cpu=2G --gres=gpu:L4:4\n", "--mem", "1G", "-g", "1")
        assert (s["memory"], s["gpus"], s.get("gpu_models")) == (1024, 1, None), s
        s, _ = spec_of("#SBATCH --job-name=a7# a comment\n#SBATCH -J 'my job'\\ x -t 5\n")
        assert (s["name"], s["time_limit"]) == ("my job x", 300), s
        s, err = spec_of("#SBATCH -N 2-4 -t 1\n")
        assert (s["tasks"], s["time_limit"]) == (2, 60) and "taken as its least, 2" in err, (s, err)
        s, err = spec_of("#SBATCH --gpus=L4:2 -t unlimited\n")
        assert (s["gpus"], s["gpu_models"], s.get("time_limit", 0)) == (2, ["L4"], 0), s
        assert "taken per task" in err, err
        s, err = spec_of("#SBATCH -t 10 --signal=B:USR1@60\n")
        assert s["time_limit"] == 600 and "signal" not in s, s  # it would reach the shell too
        assert "--signal: not taken (allot's --signal reaches every process" in err, err
        r = fails(cli(dm, "submit", "-t", "research/nlp", write(
            os.path.join(d, "two.sh"), "#!/bin/sh\n#SBATCH --gres=gpu:1,gpu:L4:2\ntrue\n")), 1)
        assert "GPUs of two kinds" in r.err, r

        # a long file name is cut to the 128 bytes of a name
        long = write(os.path.join(d, "x" * 140 + ".sh"), "#!/bin/sh\ntrue\n")
        r = ok(cli(dm, "submit", "-t", "research/nlp", "-H", long))
        assert ok(cli(dm, "-o", "json", "show", r.out.strip())).json()["name"] == "x" * 128
        # one argument the kernel could not take
        e = expect(dm.req("POST", "/v1/jobs", {"tenant": "research/nlp",
                                               "command": ["echo", "a" * 131072]},
                          token=dm.admin), 400)
        assert "the kernel's limit for one argument" in e["error"]["message"], e

        # refused by allotd: not a script, a NUL, too long, a wrong type
        for body, status, text in (
                ({"script": "echo hi\n"}, 422, 'must start with "#!"'),
                ({"script": "#!/bin/sh\n\u0000"}, 400, "is not allowed"),
                ({"script": "#!/bin/sh\n" + "x" * 65536}, 422, "longer than 65536 bytes"),
                ({"script": ["#!/bin/sh"]}, 400, 'field "script" must be a string'),
                ({"script": "#!/bin/sh\r\ntrue\r\n"}, 422, "DOS line breaks")):
            e = expect(dm.req("POST", "/v1/jobs", dict({"tenant": "research/nlp"}, **body),
                              token=dm.admin), status)
            assert text in e["error"]["message"], (body, e)
        # a script needs no command
        jid = expect(dm.req("POST", "/v1/jobs", {"tenant": "research/nlp",
                                                 "script": "#!/bin/sh\necho api\n"},
                            token=dm.admin), 201)["id"]
        fx.wait_job(dm, jid, "succeeded", timeout=30)
        assert ag.task_log(jid) == "api\n", ag.task_log(jid)
        assert json.loads(ok(cli(dm, "-o", "json", "show", jid)).out)["spec"]["script"]
    finally:
        if ag:
            ag.stop()
        dm.stop()


if __name__ == "__main__":
    fx.run([test_scripts])
