#!/usr/bin/env python3
"""scripts/plot-tradeoff.py on the project's small replay trace: the SVG
holds one panel per window with a point per cap, las's point and the
target region; the CSV's figures agree with the replays; bad arguments
and a failing replay stop it with a message naming the problem.

usage: test_plot_tradeoff.py ALLOT_SIM SOURCE_DIR
"""
import csv
import json
import os
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET

SIM, SRC = sys.argv[1], sys.argv[2]
SCRIPT = os.path.join(SRC, "scripts", "plot-tradeoff.py")
JOBS = os.path.join(SRC, "tests", "data", "philly", "replay_jobs.csv")
VCS = os.path.join(SRC, "tests", "data", "philly", "replay_vcs.csv")
NS = "{http://www.w3.org/2000/svg}"


def plot(*extra, sim=SIM, jobs=JOBS):
    cmd = [sys.executable, SCRIPT, "--sim", sim, "--jobs", jobs, "--vcs", VCS, *extra]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def replay_avg_jct(policy, cap=None):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "r.json")
        cmd = [SIM, "replay", "--jobs", JOBS, "--vcs", VCS, "--from", "2017-10-01", "--to",
               "2017-10-02", "--load", "0.8", "--policy", policy, "--drain", "--json", out]
        if cap is not None:
            cmd += ["--fair-cap", cap]
        subprocess.run(cmd, check=True, capture_output=True, timeout=60)
        with open(out) as f:
            return json.load(f)["policies"][0]["avg_jct_s"]


class PlotTradeoff(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.svg = os.path.join(self.tmp.name, "t.svg")
        self.csv = os.path.join(self.tmp.name, "t.csv")

    def tearDown(self):
        self.tmp.cleanup()

    def test_panels_points_and_figures(self):
        p = plot("--run", "2017-10-01,2017-10-02,0.8", "--run", "2017-10-01,2017-10-02,0.95",
                 "--caps", "1,2,0", "--out", self.svg, "--csv", self.csv)
        self.assertEqual(p.returncode, 0, p.stderr)
        # progress: one line per replay, 2 x (las + 3 caps)
        self.assertEqual(p.stderr.count("] 2017-10-01..2017-10-02"), 8, p.stderr)
        root = ET.parse(self.svg).getroot()
        circles = [c for c in root.iter(NS + "circle") if c.get("class") == "allot"]
        las = [r for r in root.iter(NS + "rect") if r.get("class") == "las"]
        target = [r for r in root.iter(NS + "rect") if r.get("class") == "target"]
        self.assertEqual((len(circles), len(las), len(target)), (6, 2, 2))
        titles = [t.text for t in root.iter(NS + "text") if t.get("class") == "title"]
        self.assertEqual(titles, ["2017-10-01..2017-10-02, load 0.8",
                                  "2017-10-01..2017-10-02, load 0.95"])
        labels = [t.text for t in root.iter(NS + "text") if t.get("class") == "cap"]
        self.assertEqual(sorted(t.split()[0] for t in labels),
                         sorted(["1", "2", "off", "las"] * 2))
        with open(self.csv) as f:
            rows = list(csv.DictReader(f))
        # a point above the panel's +40 % sits on its edge with its value beside it
        high = sorted(f'{r["fair_cap"]} ({float(r["jct_vs_las_pct"]):+.0f} %)' for r in rows
                      if float(r["jct_vs_las_pct"]) > 40)
        self.assertTrue(high, "the small trace has a cap far above las")
        self.assertEqual(sorted(t for t in labels if "(" in t), high)
        self.assertEqual([(r["load"], r["fair_cap"]) for r in rows],
                         [("0.8", "1"), ("0.8", "2"), ("0.8", "off"),
                          ("0.95", "1"), ("0.95", "2"), ("0.95", "off")])
        # the figures are the replays' own
        las08 = replay_avg_jct("las")
        allot08 = replay_avg_jct("allot", "2")
        r = rows[1]
        self.assertEqual(r["las_avg_jct_s"], f"{las08:.0f}")
        self.assertEqual(r["avg_jct_s"], f"{allot08:.0f}")
        self.assertEqual(r["jct_vs_las_pct"], f"{(allot08 / las08 - 1) * 100:+.1f}")
        met = float(r["jain"]) >= 0.9 and float(r["jct_vs_las_pct"]) <= 3.0
        self.assertEqual(r["targets_met"], "yes" if met else "no")

    def test_replot_from_figures(self):
        p = plot("--run", "2017-10-01,2017-10-02,0.8", "--caps", "1,2", "--out", self.svg,
                 "--csv", self.csv)
        self.assertEqual(p.returncode, 0, p.stderr)
        again = os.path.join(self.tmp.name, "again.svg")
        p = subprocess.run([sys.executable, SCRIPT, "--figures", self.csv, "--out", again],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stderr, "")  # no replay ran
        labels = [[t.text for t in ET.parse(f).getroot().iter(NS + "text")
                   if t.get("class") in ("cap", "title")] for f in (self.svg, again)]
        self.assertEqual(labels[0], labels[1])
        with open(self.csv) as f:
            good = f.read().splitlines()
        bad = [
            ("header", [good[0].replace("las_jain", "jain_las")] + good[1:],
             "is not the one --csv writes"),
            ("number", [good[0], good[1].replace(good[1].split(",")[4], "fair", 1)] + good[2:],
             ":2: could not convert string to float"),
            ("missing", good + [good[1].replace(",0.8,", ",0.9,")],
             "no row for cap 2 of 2017-10-01..2017-10-02 load 0.9"),
            ("twice", good[:2] + good[1:2], ":3: cap 1 of 2017-10-01..2017-10-02 load 0.8 again"),
            ("empty", good[:1], "no figures"),
        ]
        for name, lines, msg in bad:
            path = os.path.join(self.tmp.name, name + ".csv")
            with open(path, "w") as f:
                f.write("\n".join(lines) + "\n")
            p = subprocess.run([sys.executable, SCRIPT, "--figures", path, "--out", again],
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(p.returncode, 1, (name, p.stderr))
            self.assertIn(msg, p.stderr, name)

    def test_bad_arguments(self):
        cases = [
            (["--run", "2017-10-01,0.8"], "want FROM,TO,LOAD"),
            (["--run", "2017-10-01,2017-10-02,heavy"], 'load "heavy" is not a number'),
            (["--run", "2017-10-01,2017-10-02,0.8", "--caps", "0.5"],
             "0.5 is neither 0 (off) nor in [1, 100]"),
            (["--run", "2017-10-01,2017-10-02,0.8", "--caps", "2,2"], "2 is given twice"),
            (["--run", "2017-10-01,2017-10-02,0.8", "--workers", "0"], "--workers 0"),
            (["--caps", "2"], "want --run (or --figures)"),
        ]
        for args, msg in cases:
            p = plot(*args, "--out", self.svg)
            self.assertEqual(p.returncode, 2, (args, p.stderr))
            self.assertIn(msg, p.stderr)
            self.assertFalse(os.path.exists(self.svg))

    def test_window_without_a_jain_index(self):
        # one job in the window: Jain's index has nothing to stand on (null)
        p = plot("--run", "2017-10-02,2017-10-03,0.8", "--caps", "2", "--out", self.svg)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("2017-10-02..2017-10-03 load 0.8, las: the replay has no Jain's index",
                      p.stderr)
        self.assertNotIn("Traceback", p.stderr)
        self.assertFalse(os.path.exists(self.svg))

    def test_missing_files_and_failing_replay(self):
        p = plot("--run", "2017-10-01,2017-10-02,0.8", "--out", self.svg,
                 jobs=os.path.join(self.tmp.name, "nope.csv"))
        self.assertEqual(p.returncode, 1)
        self.assertIn("nope.csv: no such file", p.stderr)
        p = plot("--run", "2017-10-01,2017-10-02,0.8",
                 "--out", os.path.join(self.tmp.name, "no", "dir", "t.svg"))
        self.assertEqual(p.returncode, 1)
        self.assertIn("cannot write in", p.stderr)
        # the window backwards: the replay's own message comes through
        p = plot("--run", "2017-10-02,2017-10-01,0.8", "--caps", "2", "--out", self.svg)
        self.assertEqual(p.returncode, 1)
        self.assertIn("--from must come before --to", p.stderr)
        self.assertFalse(os.path.exists(self.svg))


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]], verbosity=2)
