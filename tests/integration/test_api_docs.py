"""docs/api.yaml lists exactly the routes allotd registers (its route
table, printed by `allotd --print-routes`), and docs/allotd.md names
every option of the option table."""

import os
import re
import subprocess

import allotd_fixture as fx
from allotd_fixture import ALLOTD, SOURCE

METHODS = ("get", "put", "post", "delete", "patch")


def spec_routes():
    routes, path = set(), None
    with open(os.path.join(SOURCE, "docs", "api.yaml")) as f:
        in_paths = False
        for line in f:
            if line.startswith("paths:"):
                in_paths = True
                continue
            if in_paths and re.match(r"^\S", line):
                break
            m = re.match(r"^  (/\S*):\s*$", line)
            if in_paths and m:
                path = m.group(1)
                continue
            m = re.match(r"^    (\w+):", line)
            if in_paths and path and m and m.group(1) in METHODS:
                routes.add((m.group(1).upper(), path))
    return routes


def test_every_route_is_documented():
    out = subprocess.run([ALLOTD, "--print-routes"], capture_output=True, text=True, timeout=10)
    assert out.returncode == 0
    served = {tuple(line.split(" ", 1)) for line in out.stdout.splitlines()}
    assert served, "no routes"
    spec = spec_routes()
    assert served - spec == set(), "served but not in docs/api.yaml: %s" % (served - spec)
    assert spec - served == set(), "in docs/api.yaml but not served: %s" % (spec - served)


def test_every_option_is_documented():
    out = subprocess.run([ALLOTD, "--help"], capture_output=True, text=True, timeout=10)
    opts = set(re.findall(r"^\s+--([a-z-]+)", out.stdout, re.M))
    assert "data-dir" in opts, out.stdout
    with open(os.path.join(SOURCE, "docs", "allotd.md")) as f:
        doc = f.read()
    missing = [o for o in opts if "--" + o not in doc]
    assert not missing, "options missing from docs/allotd.md: %s" % missing


if __name__ == "__main__":
    fx.run([test_every_route_is_documented, test_every_option_is_documented])
