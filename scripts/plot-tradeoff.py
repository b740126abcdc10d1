#!/usr/bin/env python3
"""Plot allot's fairness against its job completion time on Philly replays.

For each replay window it runs `allot-sim replay --drain` once with las
and once with allot per fair-share cap, and draws one panel per window:
Jain's index across (x) against allot's average JCT relative to las's
(y), one point per cap, las at (its Jain's index, 0 %), and the target
region of docs/benchmarks.md (Jain's index >= 0.9, average JCT within
3 % of las). The panels show what docs/benchmarks.md, "Fair-share cap",
gives as a table: which caps a window's targets allow, if any.

Standard library only. Writes one SVG; --csv also writes the figures.
"""
import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from xml.sax.saxutils import escape

JAIN_TARGET = 0.9
JCT_TARGET_PCT = 3.0
YMAX_PCT = 40.0  # points above sit on the top edge, their value beside them
PANEL_W, PANEL_H = 340, 300
MARGIN_L, MARGIN_R, MARGIN_T, MARGIN_B = 56, 16, 40, 46


def fail(msg, code=1):
    print(f"plot-tradeoff: {msg}", file=sys.stderr)
    sys.exit(code)


def parse_run(text):
    """FROM,TO,LOAD -> (from, to, load)."""
    parts = text.split(",")
    if len(parts) != 3 or not parts[0] or not parts[1]:
        raise argparse.ArgumentTypeError(f'--run "{text}": want FROM,TO,LOAD '
                                         '(e.g. 2017-09-01,2017-11-01,0.95)')
    try:
        load = float(parts[2])
    except ValueError:
        load = -1.0
    if not 0 < load <= 10:
        raise argparse.ArgumentTypeError(f'--run "{text}": load "{parts[2]}" is not a '
                                         'number in (0, 10]')
    return parts[0], parts[1], load


def parse_caps(text):
    caps = []
    for p in text.split(","):
        try:
            c = float(p)
        except ValueError:
            raise argparse.ArgumentTypeError(f'--caps: "{p}" is not a number')
        if c != 0 and not 1 <= c <= 100:
            raise argparse.ArgumentTypeError(f'--caps: {p} is neither 0 (off) nor in [1, 100]')
        if c in caps:
            raise argparse.ArgumentTypeError(f'--caps: {p} is given twice')
        caps.append(c)
    return caps


def replay(args, run, policy, cap):
    """One drained replay; returns the policy's figures from its JSON."""
    frm, to, load = run
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "r.json")
        cmd = [args.sim, "replay", "--jobs", args.jobs, "--vcs", args.vcs, "--from", frm,
               "--to", to, "--load", str(load), "--policy", policy, "--drain", "--json", out]
        if cap is not None:
            cmd += ["--fair-cap", str(cap)]
        p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if p.returncode != 0:
            fail(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr.strip()}")
        with open(out) as f:
            fig = json.load(f)["policies"][0]
    for key, what in (("jain", "Jain's index"), ("avg_jct_s", "average JCT")):
        if fig.get(key) is None:  # replay writes null for a figure with nothing to stand on
            fail(f"{frm}..{to} load {load:g}, {policy}: the replay has no {what} (null: too "
                 f"few jobs finished, or of too few VCs, in the window); choose a longer window")
    return {"jain": fig["jain"], "avg_jct_s": fig["avg_jct_s"]}


def cap_label(c):
    return "off" if c == 0 else f"{c:g}"


def panel_svg(x0, run, las, points):
    """One panel: axes, target region, las and allot's points by cap."""
    frm, to, load = run
    w = PANEL_W - MARGIN_L - MARGIN_R
    h = PANEL_H - MARGIN_T - MARGIN_B
    xs = [las["jain"]] + [p["jain"] for p in points]
    ys = [0.0] + [p["pct"] for p in points]
    xlo = min(0.5, min(xs) - 0.02)
    xhi = 1.0
    ylo = min(-2.0, min(ys) - 2)
    yhi = min(max(10.0, max(ys) * 1.1 + 2), YMAX_PCT)

    def X(v):
        return x0 + MARGIN_L + (v - xlo) / (xhi - xlo) * w

    def Y(v):  # a point above the panel sits on its top edge
        return MARGIN_T + (yhi - min(v, yhi)) / (yhi - ylo) * h

    s = []
    s.append(f'<text x="{x0 + PANEL_W / 2:.1f}" y="20" text-anchor="middle" '
             f'class="title">{escape(frm)}..{escape(to)}, load {load:g}</text>')
    # the target region: Jain >= 0.9 and JCT <= +3 %
    s.append(f'<rect class="target" x="{X(JAIN_TARGET):.1f}" y="{Y(JCT_TARGET_PCT):.1f}" '
             f'width="{X(xhi) - X(JAIN_TARGET):.1f}" '
             f'height="{Y(ylo) - Y(JCT_TARGET_PCT):.1f}" fill="#dff3df"/>')
    s.append(f'<rect x="{X(xlo):.1f}" y="{Y(yhi):.1f}" width="{w:.1f}" height="{h:.1f}" '
             'fill="none" stroke="#444"/>')
    # ticks
    t = round(xlo * 10) / 10
    while t <= xhi + 1e-9:
        if t >= xlo - 1e-9:
            s.append(f'<line x1="{X(t):.1f}" y1="{Y(ylo):.1f}" x2="{X(t):.1f}" '
                     f'y2="{Y(ylo) + 4:.1f}" stroke="#444"/>')
            s.append(f'<text x="{X(t):.1f}" y="{Y(ylo) + 16:.1f}" text-anchor="middle">'
                     f'{t:.1f}</text>')
        t += 0.1
    step = 5 if yhi - ylo <= 40 else 10 if yhi - ylo <= 80 else 20
    t = step * int(ylo / step)
    while t <= yhi:
        if t >= ylo:
            s.append(f'<line x1="{X(xlo) - 4:.1f}" y1="{Y(t):.1f}" x2="{X(xlo):.1f}" '
                     f'y2="{Y(t):.1f}" stroke="#444"/>')
            s.append(f'<text x="{X(xlo) - 6:.1f}" y="{Y(t) + 4:.1f}" text-anchor="end">'
                     f'{t:+d} %</text>')
        t += step
    s.append(f'<text x="{X((xlo + xhi) / 2):.1f}" y="{PANEL_H - 8}" text-anchor="middle">'
             "Jain's index</text>")
    s.append(f'<text transform="translate({x0 + 14},{Y((ylo + yhi) / 2):.1f}) rotate(-90)" '
             'text-anchor="middle">avg JCT vs las</text>')
    # allot's points joined in cap order (off last: no cap at all)
    order = sorted(points, key=lambda p: p["cap"] if p["cap"] > 0 else float("inf"))
    path = " ".join(f"{X(p['jain']):.1f},{Y(p['pct']):.1f}" for p in order)
    if len(order) > 1:
        s.append(f'<polyline points="{path}" fill="none" stroke="#3465a4" '
                 'stroke-dasharray="3,3"/>')
    for p in order:
        s.append(f'<circle class="allot" cx="{X(p["jain"]):.1f}" cy="{Y(p["pct"]):.1f}" r="4" '
                 f'fill="#3465a4"><title>cap {cap_label(p["cap"])}: Jain {p["jain"]:.3f}, '
                 f'JCT {p["pct"]:+.1f} %</title></circle>')
        label = cap_label(p["cap"])
        if p["pct"] > yhi:
            label += f' ({p["pct"]:+.0f} %)'
        right = X(p["jain"]) > x0 + PANEL_W - MARGIN_R - 70  # near the edge: label on the left
        s.append(f'<text x="{X(p["jain"]) + (-6 if right else 6):.1f}" '
                 f'y="{Y(p["pct"]) - 5:.1f}" text-anchor="{"end" if right else "start"}" '
                 f'class="cap">{label}</text>')
    s.append(f'<rect class="las" x="{X(las["jain"]) - 4:.1f}" y="{Y(0) - 4:.1f}" width="8" '
             f'height="8" fill="#cc0000"><title>las: Jain {las["jain"]:.3f}</title></rect>')
    s.append(f'<text x="{X(las["jain"]) + 7:.1f}" y="{Y(0) + 14:.1f}" class="cap">las</text>')
    return "\n".join(s)


FIELDS = ["from", "to", "load", "fair_cap", "jain", "avg_jct_s", "las_jain", "las_avg_jct_s",
          "jct_vs_las_pct", "targets_met"]


def replay_all(args):
    """las once per run, allot once per run and cap, --workers at a time."""
    tasks = [(r, "las", None) for r in args.run]
    tasks += [(r, "allot", c) for r in args.run for c in args.caps]
    results = {}
    t0 = time.monotonic()

    def one(task):
        results[task] = replay(args, *task)
        return task

    with ThreadPoolExecutor(max_workers=args.workers) as ex:
        futures = [ex.submit(one, t) for t in tasks]
        for k, fut in enumerate(as_completed(futures), 1):
            run, pol, cap = fut.result()
            what = pol if cap is None else f"allot --fair-cap {cap:g}"
            print(f"[{k}/{len(tasks)}] {run[0]}..{run[1]} load {run[2]:g}: {what} "
                  f"({time.monotonic() - t0:.0f} s)", file=sys.stderr)
    return results


def read_figures(path):
    """The runs, caps and figures of a CSV that --csv wrote."""
    runs, caps, results = [], [], {}
    try:
        with open(path, newline="") as f:
            rd = csv.DictReader(f)
            if rd.fieldnames != FIELDS:
                fail(f"{path}: header {rd.fieldnames} is not the one --csv writes: {FIELDS}")
            for n, r in enumerate(rd, 2):
                try:
                    run = parse_run(f"{r['from']},{r['to']},{r['load']}")
                    cap = 0.0 if r["fair_cap"] == "off" else parse_caps(r["fair_cap"])[0]
                    a = {"jain": float(r["jain"]), "avg_jct_s": float(r["avg_jct_s"])}
                    las = {"jain": float(r["las_jain"]), "avg_jct_s": float(r["las_avg_jct_s"])}
                except (argparse.ArgumentTypeError, ValueError, TypeError) as e:
                    fail(f"{path}:{n}: {e}")
                if run not in runs:
                    runs.append(run)
                if cap not in caps:
                    caps.append(cap)
                if (run, "allot", cap) in results:
                    fail(f"{path}:{n}: cap {r['fair_cap']} of {r['from']}..{r['to']} "
                         f"load {r['load']} again")
                results[(run, "allot", cap)] = a
                results[(run, "las", None)] = las
    except OSError as e:
        fail(f"{path}: {e.strerror}")
    for run in runs:
        for cap in caps:
            if (run, "allot", cap) not in results:
                fail(f"{path}: no row for cap {cap_label(cap)} of {run[0]}..{run[1]} "
                     f"load {run[2]:g}")
    if not runs:
        fail(f"{path}: no figures")
    return runs, caps, results


def main():
    ap = argparse.ArgumentParser(
        prog="plot-tradeoff.py",
        description="Replays Philly windows with las and with allot at several fair-share "
        "caps (drained) and plots Jain's index against allot's average JCT relative to "
        "las's, one panel per window, with the targets of docs/benchmarks.md.")
    ap.add_argument("--sim", help="the allot-sim binary (build/allot-sim)")
    ap.add_argument("--jobs", help="Philly job digest (philly_jobs.csv)")
    ap.add_argument("--vcs", help="the VC list (philly_vc_nodes.csv)")
    ap.add_argument("--run", action="append", type=parse_run, metavar="FROM,TO,LOAD",
                    help="a window and load; repeat for more panels")
    ap.add_argument("--caps", type=parse_caps, default=parse_caps("1,1.5,2,3,0"),
                    help="fair-share caps to run allot with, 0 = off (default 1,1.5,2,3,0)")
    ap.add_argument("--workers", type=int, default=2, help="replays run at once (default 2)")
    ap.add_argument("--figures", metavar="CSV",
                    help="plot the figures an earlier --csv wrote instead of replaying "
                    "(then --sim, --jobs, --vcs, --run and --caps are not used)")
    ap.add_argument("--out", required=True, help="the SVG to write")
    ap.add_argument("--csv", help="also write the figures as CSV")
    args = ap.parse_args()
    if not 1 <= args.workers <= 64:
        fail(f"--workers {args.workers}: want 1..64", 2)
    if args.figures:
        need = [args.figures]
    else:
        missing = [o for o in ("sim", "jobs", "vcs", "run") if not getattr(args, o)]
        if missing:
            fail("want --" + ", --".join(missing) + " (or --figures)", 2)
        need = [args.sim, args.jobs, args.vcs]
    for f in need:
        if not os.path.isfile(f):
            fail(f"{f}: no such file")
    for f in (args.out, args.csv):
        d = os.path.dirname(os.path.abspath(f)) if f else None
        if d and not os.access(d, os.W_OK):
            fail(f"{f}: cannot write in {d}")

    if args.figures:
        runs, caps, results = read_figures(args.figures)
    else:
        runs, caps, results = args.run, args.caps, replay_all(args)

    rows = []
    panels = []
    for i, run in enumerate(runs):
        las = results[(run, "las", None)]
        pts = []
        for c in caps:
            a = results[(run, "allot", c)]
            pct = (a["avg_jct_s"] / las["avg_jct_s"] - 1) * 100 if las["avg_jct_s"] > 0 else 0
            pts.append({"cap": c, "jain": a["jain"], "pct": pct})
            rows.append([run[0], run[1], run[2], cap_label(c), f"{a['jain']:.3f}",
                         f"{a['avg_jct_s']:.0f}", f"{las['jain']:.3f}", f"{las['avg_jct_s']:.0f}",
                         f"{pct:+.1f}",
                         "yes" if a["jain"] >= JAIN_TARGET and pct <= JCT_TARGET_PCT else "no"])
        panels.append(panel_svg(i * PANEL_W, run, las, pts))

    width = PANEL_W * len(runs)
    svg = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{PANEL_H + 24}" '
           f'viewBox="0 0 {width} {PANEL_H + 24}" font-family="sans-serif" font-size="11">\n'
           '<style>.title{font-weight:bold;font-size:12px}.cap{fill:#333}</style>\n'
           f'<rect width="{width}" height="{PANEL_H + 24}" fill="white"/>\n'
           + "\n".join(panels) +
           f'\n<text x="8" y="{PANEL_H + 16}" fill="#555">blue: allot by fair-share cap '
           '(off: none); red: las; green: Jain\'s index &gt;= 0.9 and average JCT within '
           '3 % of las (drained runs)</text>\n</svg>\n')
    with open(args.out, "w") as f:
        f.write(svg)
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(FIELDS)
            w.writerows(rows)
    for r in rows:
        met = "both targets met" if r[9] == "yes" else "not both targets met"
        print(f"{r[0]}..{r[1]} load {r[2]:g} cap {r[3]}: Jain {r[4]}, avg JCT {r[5]} s "
              f"({r[8]} % vs las {r[7]} s), {met}")


if __name__ == "__main__":
    main()
