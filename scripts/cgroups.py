"""Removing what an allot-agent run leaves (tests, benchmarks, the demo):
the cgroup tree of its --cgroup-root folder in every hierarchy (cgroup v1
controllers and the v2 mount), the task folders below it first (a task
still in one is killed by its pid), and the mounts below its state folder
(the /tmp and /dev/shm of jobs still running when it stopped, its MPS
daemons' shared memory). Every wait is bounded. Standard library only."""

import os
import signal
import subprocess
import time

BASE = "/sys/fs/cgroup"


def roots(prefix):
    """The root names starting with prefix in any hierarchy, sorted."""
    names = set()
    for d in [BASE] + ([os.path.join(BASE, c) for c in sorted(os.listdir(BASE))]
                       if os.path.isdir(BASE) else []):
        try:
            names.update(n for n in os.listdir(d) if n.startswith(prefix))
        except OSError:
            pass
    return sorted(names)


def stale_roots(prefix):
    """The root names PREFIX<pid> (or PREFIX<pid>-NAME) in any hierarchy whose run (pid)
    is gone: left by a test run that was killed before it could clean up."""
    stale = []
    for n in roots(prefix):
        pid = n[len(prefix):].split("-", 1)[0]
        if pid.isdigit() and not os.path.exists("/proc/" + pid):
            stale.append(n)
    return stale


def remove_tree(root_name):
    """Kills what is left in root_name's task cgroups and removes them and
    root_name, in every hierarchy. Returns the folders that could not be
    removed (empty when all went)."""
    tops = [os.path.join(BASE, root_name)]
    if os.path.isdir(BASE):
        tops += [os.path.join(BASE, c, root_name) for c in sorted(os.listdir(BASE))]
    left = []
    for root in tops:
        if not os.path.isdir(root):
            continue
        subs = [os.path.join(root, s) for s in sorted(os.listdir(root))]
        for d in [s for s in subs if os.path.isdir(s)] + [root]:
            if not _remove(d):
                left.append(d)
    return left


def _remove(d):
    for _ in range(50):  # bounded: killed processes leave in milliseconds
        try:
            with open(os.path.join(d, "cgroup.procs")) as f:
                for pid in f.read().split():
                    os.kill(int(pid), signal.SIGKILL)
        except (OSError, ValueError):
            pass
        try:
            os.rmdir(d)
            return True
        except FileNotFoundError:
            return True
        except OSError:
            time.sleep(0.02)
    return False


def unmount_below(d):
    """Unmounts (lazily) what is mounted below folder d, deepest first."""
    with open("/proc/self/mounts") as f:
        points = [line.split()[1] for line in f]
    d = os.path.realpath(d)
    for m in sorted((m for m in points if m.startswith(d + "/")), key=len, reverse=True):
        subprocess.run(["umount", "-l", m], stderr=subprocess.DEVNULL, timeout=30)
