"""The monitoring files: etc/prometheus/allot-rules.yml passes `promtool
check rules` and its unit tests (`promtool test rules
allot-rules.test.yml`); etc/grafana/allot-dashboard.json is a well-formed
Grafana dashboard (unique panel ids, grid positions, a query per target
with unique refIds, variables it uses defined); and every metric either
file names is one a real allotd serves on /metrics, or one of the series
listed below (metering and health series of allotd, NVIDIA dcgm-exporter's
GPU series, Prometheus' own `up`). promtool is skipped, with a message,
only when it is not installed (Debian package prometheus)."""

import json
import os
import re
import shutil
import subprocess
import time

import allotd_fixture as fx
from allotd_fixture import Daemon

RULES = os.path.join(fx.SOURCE, "etc", "prometheus", "allot-rules.yml")
RULES_TEST = os.path.join(fx.SOURCE, "etc", "prometheus", "allot-rules.test.yml")
DASHBOARD = os.path.join(fx.SOURCE, "etc", "grafana", "allot-dashboard.json")

# Series the files may name beyond what this allotd serves with no node and
# no usage yet: allotd's metering, budget, idle and GPU health series, the
# dcgm-exporter GPU series (labels gpu, UUID, Hostname, modelName), `up`.
KNOWN = {
    "allot_tenant_gpu_seconds_total", "allot_tenant_month_cost_minor",
    "allot_tenant_budget_minor", "allot_tenant_budget_used_ratio", "allot_idle_jobs",
    "allot_gpu_health",
    "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
    "up",
}

PROMQL_WORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or",
    "unless", "offset", "inf", "nan",
}

served = set()


def metric_names(expr):
    """The metric names a PromQL expression reads (functions, label
    matchers, strings, durations and Grafana variables left out)."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)           # strings
    e = re.sub(r"\$\{[^}]*\}|\$\w+", "", e)                  # Grafana variables
    e = re.sub(r"\{[^}]*\}", "", e)                          # label matchers
    e = re.sub(r"\[[^\]]*\]", "", e)                         # ranges
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    e = re.sub(r"\boffset\s+\w+", " ", e)
    names = set()
    for m in re.finditer(r"(?<![\w.])([A-Za-z_:][\w:]*)(\s*\()?", e):
        if m.group(2) or m.group(1).lower() in PROMQL_WORDS:
            continue
        names.add(m.group(1))
    return names


def rule_exprs(path):
    """The expr of every rule in a rules file (single-line or a folded/literal
    block), without a YAML library: the file keeps to those two forms."""
    out = []
    lines = open(path).read().splitlines()
    i = 0
    while i < len(lines):
        m = re.match(r"^(\s*)expr:\s*(.*)$", lines[i])
        i += 1
        if not m:
            continue
        indent, rest = len(m.group(1)), m.group(2).strip()
        if rest and rest[0] not in "|>":
            out.append(rest)
            continue
        block = []
        while i < len(lines) and (not lines[i].strip() or
                                  len(lines[i]) - len(lines[i].lstrip()) > indent):
            block.append(lines[i].strip())
            i += 1
        out.append(" ".join(block))
    return out


def check_names(where, exprs):
    unknown = {}
    for e in exprs:
        for n in metric_names(e) - served - KNOWN:
            unknown.setdefault(n, e)
    assert not unknown, "%s names metrics allotd does not serve: %r" % (where, unknown)


def test_metric_name_parser():
    assert metric_names('sum by (tenant) (rate(allot_x_total{a="b"}[5m])) / on (i) up') == \
        {"allot_x_total", "up"}
    assert metric_names('count(allot_gpu_health offset 10m) unless count by (node) '
                        '(allot_gpu_health == 2) or vector(0)') == {"allot_gpu_health"}
    assert metric_names('histogram_quantile(0.9, sum by (le) (rate(a_bucket[$__rate_interval])))'
                        ' > 1e3') == {"a_bucket"}


def test_rules_promtool():
    exprs = rule_exprs(RULES)
    assert len(exprs) >= 10, exprs
    check_names("allot-rules.yml", exprs)
    text = open(RULES).read()
    for alert in ("AllotQueueWaitHigh", "AllotNodeLost", "AllotGPUUnhealthy",
                  "AllotBudgetWarning", "AllotIdleJobs", "AllotApiErrorRate"):
        assert "alert: " + alert + "\n" in text, alert
    promtool = shutil.which("promtool")
    if not promtool:
        print("SKIP promtool checks: promtool is not installed (Debian package prometheus)")
        return
    r = subprocess.run([promtool, "check", "rules", RULES], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    r = subprocess.run([promtool, "test", "rules", os.path.basename(RULES_TEST)],
                       cwd=os.path.dirname(RULES_TEST), capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and "SUCCESS" in r.stdout, r.stdout + r.stderr


def test_grafana_dashboard():
    with open(DASHBOARD) as f:
        d = json.load(f)
    for k in ("title", "uid", "schemaVersion", "panels", "templating", "time"):
        assert k in d, k
    assert isinstance(d["schemaVersion"], int) and d["schemaVersion"] >= 27, d["schemaVersion"]
    variables = {v["name"] for v in d["templating"]["list"]}
    assert {"datasource", "tenant", "node"} <= variables, variables
    builtin = {"__rate_interval", "__range", "__interval", "DS_PROMETHEUS"}
    ids, exprs, cells = set(), [], set()
    for p in d["panels"]:
        assert isinstance(p.get("id"), int) and p["id"] not in ids, p.get("id")
        ids.add(p["id"])
        assert p.get("type") and p.get("title"), p
        g = p["gridPos"]
        assert set(g) == {"x", "y", "w", "h"} and 0 <= g["x"] and g["x"] + g["w"] <= 24, p
        for yy in range(g["y"], g["y"] + g["h"]):  # no two panels on one grid cell
            for xx in range(g["x"], g["x"] + g["w"]):
                assert (xx, yy) not in cells, "panel %s overlaps another at %s" % (p["title"],
                                                                                   (xx, yy))
                cells.add((xx, yy))
        if p["type"] == "row":
            continue
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p
        refs = [t["refId"] for t in p["targets"]]
        assert p["targets"] and len(refs) == len(set(refs)), p
        for t in p["targets"]:
            assert t["expr"].strip(), p
            for v in re.findall(r"\$\{?(\w+)", t["expr"]):
                assert v in variables or v in builtin, (v, t["expr"])
            exprs.append(t["expr"])
    check_names("allot-dashboard.json", exprs)
    panel_names = set().union(*(metric_names(e) for e in exprs))
    for must in ("allot_tenant_gpus", "allot_tenant_month_cost_minor", "allot_gpu_health",
                 "DCGM_FI_DEV_GPU_UTIL", "allot_queue_wait_seconds_bucket"):
        assert must in panel_names, must


def served_names(dm):
    """Metric names on allotd's /metrics (histograms with their series)."""
    names = set()
    end = time.time() + 10
    while time.time() < end:  # the per-tenant gauges come with the first cycle
        st, text = dm.req("GET", "/metrics", raw=True)
        assert st == 200, st
        if "allot_model_gpus" in text:
            break
        time.sleep(0.1)
    for line in text.splitlines():
        m = re.match(r"# TYPE (\S+) (\w+)", line)
        if m:
            names.add(m.group(1))
            if m.group(2) == "histogram":
                names |= {m.group(1) + s for s in ("_bucket", "_sum", "_count")}
        elif line and not line.startswith("#"):
            names.add(re.match(r"[\w:]+", line).group(0))
    return names


if __name__ == "__main__":
    dm = Daemon()
    try:
        served = served_names(dm)
        assert "allot_queue_wait_seconds_bucket" in served, sorted(served)
        fx.run([test_metric_name_parser, test_rules_promtool, test_grafana_dashboard])
    finally:
        dm.stop()
