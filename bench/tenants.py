#!/usr/bin/env python3
"""bench/tenants: how long `allot apply` takes on a large tenant tree.

Writes a tenants file of --tenants leaves (org<i/10>/team<i>, one GPU of
nominal quota each; 10,000 is the most a file may hold), starts allotd on
loopback in a temporary folder, and times, through the `allot` command
line as a user runs it:

  create    the first apply (every tenant created)
  change    an apply that changes every quota (every tenant configured)
  same      the same file again (no change: the diff and a check only)
  dry       apply --dry-run of a changed file (diff and allotd's check)
  list      allot tenants -o json

then stops allotd by its pid. Prints one line per build:

  build=.. tenants=.. create_s=.. change_s=.. same_s=.. dry_s=.. list_s=..

With --against OTHER_BUILD the same runs on another build's allot and
allotd as well, side by side in one run (a before and after). Figures
only; no target is asserted (machines here are shared).
"""

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time


def tenants_file(path, n, gpus):
    with open(path, "w") as f:
        f.write("version: 1\ntenants:\n")
        for i in range(n):
            f.write("  - path: org%d/team%d\n    quotas:\n      gpu: {nominal: %d}\n"
                    % (i // 10, i, gpus))


def timed(cmd, env):
    t = time.monotonic()
    r = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       timeout=600)
    if r.returncode != 0:
        raise SystemExit("%s failed: %s" % (" ".join(cmd), r.stderr.decode(errors="replace")))
    return time.monotonic() - t


def run(build, n, work):
    d = tempfile.mkdtemp(prefix="bench-tenants-", dir=work)
    files = [os.path.join(d, "t%d.yaml" % k) for k in (1, 2, 3)]
    for k, f in enumerate(files):
        tenants_file(f, n, k + 1)
    admin = subprocess.run([os.path.join(build, "allotd"), "init", "--data-dir", d],
                           capture_output=True, text=True, check=True,
                           timeout=60).stdout.strip().splitlines()[-1]
    log = open(os.path.join(d, "allotd.log"), "w+")
    p = subprocess.Popen([os.path.join(build, "allotd"), "--data-dir", d, "--listen",
                          "127.0.0.1:0"], stderr=log)
    try:
        port = None
        for _ in range(100):  # bounded: allotd listens within a second
            log.seek(0)
            for line in log:
                if line.startswith("listening on 127.0.0.1:"):
                    port = int(line.rsplit(":", 1)[1])
            if port:
                break
            time.sleep(0.1)
        if not port:
            raise SystemExit("allotd did not start (%s)" % log.name)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ALLOT_", "XDG_"))}
        env.update(ALLOT_SERVER="http://127.0.0.1:%d" % port, ALLOT_TOKEN=admin)
        allot = os.path.join(build, "allot")
        fig = {
            "create_s": timed([allot, "apply", "-f", files[0]], env),
            "change_s": timed([allot, "apply", "-f", files[1]], env),
            "same_s": timed([allot, "apply", "-f", files[1]], env),
            "dry_s": timed([allot, "apply", "--dry-run", "-f", files[2]], env),
            "list_s": timed([allot, "tenants", "-o", "json"], env),
        }
    finally:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        log.close()
        shutil.rmtree(d, ignore_errors=True)
    return fig


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.environ.get("BUILD", "build"),
                    help="the build folder with allot and allotd (default build)")
    ap.add_argument("--against", help="another build folder to run side by side")
    ap.add_argument("--tenants", type=int, default=10000, help="leaf tenants (default 10000)")
    a = ap.parse_args()
    if not 1 <= a.tenants <= 10000:
        ap.error("--tenants: 1..10000 (the most a tenants file holds)")
    work = tempfile.mkdtemp(prefix="bench-tenants-")
    try:
        for b in [a.build] + ([a.against] if a.against else []):
            fig = run(b, a.tenants, work)
            print("build=%s tenants=%d %s" % (b, a.tenants, " ".join(
                "%s=%.3f" % kv for kv in fig.items())), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
