#!/bin/sh
# Real-trace checks (make test-data), on the public traces in DATA_DIR:
#  1. openb fill reproduction (docs/benchmarks.md, "openb fill: reproducing
#     the FGD paper"): the six published policies within 0.5 pp of the FGD
#     authors' 10-seed means at arrived = 100 % (the tolerance the README
#     claims; one documented exception, see `exceptions` below);
#  2. allot against fgd, in sample (seeds 42-51, which allot was tuned on)
#     and out of sample (seeds 1-10 and perturbed workloads): allot must
#     leave less GPU unallocated than fgd on every run; the ratio is printed
#     next to the 0.9 target;
#  3. the Philly multi-tenant replay at load 0.8 (the window and load the
#     queue was tuned on), at load 0.95, on a second window at 0.8 and
#     0.95, and on a third, held-out window at both loads: every target is
#     printed as met or MISSED; the run fails on the
#     targets listed as required for that run (docs/benchmarks.md, "Philly
#     replay: targets in and out of sample", says which and why);
#  4. allot-sim replay --sacct on an export made by a real Slurm from the
#     shared baseline harness (bench/sacct-export.sh, root only): every job
#     that ran is read and replayed; skipped with a message when Slurm
#     cannot be set up here (docs/planning.md).
#
# usage: tests/data-checks.sh BUILD_DIR DATA_DIR
# Runs about 11 minutes on two cores (the six Philly replays take most).
set -eu

if [ $# -ne 2 ]; then
    echo "usage: $0 BUILD_DIR DATA_DIR" >&2
    exit 2
fi
sim="$1/allot-sim"
root="$2" # the positional parameters are reused below
data="$root/openb"
tolerance=0.5
# policy/workload pairs allowed a wider gap, with the reason: gpupacking and
# gpuclustering on gpushare40 are 0.51/0.50 pp below the published mean with
# seeds 42-51 but 0.32/0.31 pp over 60 seeds (docs/benchmarks.md): seed noise.
exceptions="gpushare40:gpupacking:0.6 gpushare40:gpuclustering:0.6"
if [ ! -x "$sim" ]; then
    echo "data-checks: $sim not built" >&2
    exit 1
fi
if [ ! -f "$data/openb_node_list_gpu_node.csv" ] ||
   [ ! -f "$data/fgd_expected_results/analysis_allo_discrete.csv" ]; then
    echo "data-checks: the openb traces are not in $data (see ../shared/data/README.md)" >&2
    exit 1
fi

status=0
for workload in default gpushare40 cpu100; do
    out=$("$sim" fill --nodes "$data/openb_node_list_gpu_node.csv" \
        --pods "$data/openb_pod_list_$workload.csv" --policy all --seeds 42-51 \
        --expected "$data/fgd_expected_results" --workers 2 2>&1) || {
        printf '%s\n' "$out"
        echo "data-checks: allot-sim fill failed on $workload" >&2
        status=1
        continue
    }
    printf '%s\n\n' "$out"
    # Table rows end in "pub@100 diff"; "-" where nothing was published.
    verdict=$(printf '%s\n' "$out" | awk -v tol="$tolerance" -v w="$workload" -v exc="$exceptions" '
        BEGIN { n = split(exc, e, " "); for (i = 1; i <= n; i++) { split(e[i], f, ":"); wide[f[1] ":" f[2]] = f[3] } }
        /^decision-log hash/ { table = 0; next }
        $1 == "policy" { table = 1; next }
        table && $1 == "fgd" { fgd = $5 + 0 }
        table && $1 == "allot" { allot = $5 + 0 }
        table && NF >= 3 && $NF != "-" && $(NF-1) != "-" {
            m++
            d = $NF + 0; if (d < 0) d = -d
            t = (w ":" $1) in wide ? wide[w ":" $1] : tol
            if (d > t) { printf "%s: %s differs by %s pp (published %s, tolerance %s)\n", w, $1, $NF, $(NF-1), t; bad++ }
        }
        END {
            if (m != 6) { printf "%s: %d policies matched published results, want 6\n", w, m; bad++ }
            if (!(allot < fgd)) { printf "%s: allot %s not below fgd %s (seeds 42-51)\n", w, allot, fgd; bad++ }
            exit bad > 0
        }') || {
        printf '%s\n' "$verdict" >&2
        status=1
        continue
    }
done
if [ $status -eq 0 ]; then
    echo "data-checks: every published policy within $tolerance pp of the published mean at 100 % (exceptions: $exceptions); allot below fgd on every workload in sample"
fi

# allot against fgd out of sample: other seeds, perturbed workloads.
oos_fail=0
for run in "default::1-10" "gpushare40::1-10" "cpu100::1-10" "default:flip:42-51" \
           "default:flip:1-10" "default:scale=0.8:1-10" "default:subset=0.33:1-10" \
           "gpushare40:flip:1-10"; do
    workload=${run%%:*}; rest=${run#*:}; perturb=${rest%%:*}; seeds=${rest#*:}
    set -- --nodes "$data/openb_node_list_gpu_node.csv" --pods "$data/openb_pod_list_$workload.csv" \
        --policy fgd,allot --seeds "$seeds" --workers 2
    [ -n "$perturb" ] && set -- "$@" --perturb "$perturb"
    out=$("$sim" fill "$@" 2>&1) || {
        printf '%s\n' "$out"
        echo "data-checks: allot-sim fill failed on $run" >&2
        oos_fail=1
        continue
    }
    printf '%s\n' "$out" | awk -v r="$workload ${perturb:-plain} seeds $seeds" '
        $1 == "fgd" { fgd = $5 + 0 } $1 == "allot" { allot = $5 + 0 }
        END {
            ratio = fgd > 0 ? allot / fgd : 0
            printf "out of sample: %-36s fgd %5.2f allot %5.2f allot/fgd %.3f (target 0.9: %s)\n", r, fgd, allot, ratio, ratio <= 0.9 ? "met" : "MISSED"
            exit !(allot < fgd)
        }' || { echo "data-checks: allot not below fgd on $run" >&2; oos_fail=1; }
done
[ $oos_fail -eq 0 ] && echo "data-checks: allot below fgd on every out-of-sample run"
[ $oos_fail -eq 0 ] || status=1

# Philly multi-tenant replay: targets per run. `required` lists the
# targets that fail the check; the others are printed as met or MISSED.
# Targets: q (avg queueing <= static/3), util (> static), inq (in-quota wait
# p99 <= 120 s), jain (>= 0.9), lost (<= 2 % of used GPU time), fifo (avg
# JCT below fifo), las (avg JCT within 3 % of las), vc (no VC's avg JCT more
# than 10 % above static). Every run is drained (--drain): the jobs of the
# window run to their end, so each policy's JCT and queueing figures
# average over the same jobs; averages over the jobs finished by the
# window's end would reward a policy that leaves long jobs unfinished
# (docs/benchmarks.md). Utilisation and Jain's index cover the window;
# lost work covers the whole run and is set against the window's use.
philly="$root/philly"
replay_check() { # from to load required
    out=$("$sim" replay --jobs "$philly/philly_jobs.csv" --vcs "$philly/philly_vc_nodes.csv" \
        --from "$1" --to "$2" --load "$3" --policy static,fifo,las,allot --drain 2>&1) || {
        printf '%s\n' "$out"
        echo "data-checks: allot-sim replay failed ($1..$2 load $3)" >&2
        return 1
    }
    printf '%s\n\n' "$out"
    # columns: policy jobs done unfin avg_jct p50 p95 p99 avg_q p50_q p95_q p99_q util inq_p99
    #          jain jainN preempt lost_gh wall_s; the cluster line gives the GPU count;
    # per-tenant rows: tenant gpus jobs s:unfin s:avg_jct ... a:unfin a:avg_jct ...
    days=$(( ($(date -u -d "$2" +%s) - $(date -u -d "$1" +%s)) / 86400 ))
    printf '%s\n' "$out" | awk -v run="$1..$2 load $3" -v req="$4" -v days="$days" '
        /^cluster:/ { for (i = 1; i <= NF; i++) if ($i == "=" && !gpus) gpus = $(i + 1) }
        $1 == "static" || $1 == "fifo" || $1 == "las" || $1 == "allot" {
            jct[$1] = $5; q[$1] = $9; util[$1] = $13; inq[$1] = $14; jain[$1] = $15; lost[$1] = $18
        }
        /^tenant / { tenants = 1; next }
        tenants && NF >= 15 && $1 ~ /^[0-9a-f]+$/ {
            if ($11 > 1.10 * $5) { vcbad++; worst = worst sprintf(" %s %+.0f%%", $1, 100 * ($11 / $5 - 1)) }
        }
        function check(name, ok, text) {
            printf "  %-5s %-60s %s\n", name, text, ok ? "met" : "MISSED"
            if (!ok && index(" " req " ", " " name " ")) bad++
        }
        END {
            if (!("allot" in q) || !("static" in q)) { print "replay: table not found"; exit 1 }
            printf "Philly %s, allot (required: %s):\n", run, req
            check("q", q["allot"] <= q["static"] / 3, sprintf("avg queueing %s s <= static %s / 3", q["allot"], q["static"]))
            check("util", util["allot"] > util["static"], sprintf("utilisation %s > static %s", util["allot"], util["static"]))
            check("inq", inq["allot"] <= 120, sprintf("in-quota wait p99 %s s <= 120", inq["allot"]))
            check("jain", jain["allot"] >= 0.9, sprintf("Jain %s >= 0.9", jain["allot"]))
            used = util["allot"] * gpus * days * 24
            check("lost", lost["allot"] <= 0.02 * used, sprintf("lost %s GPU-h = %.2f %% of used <= 2 %%", lost["allot"], 100 * lost["allot"] / used))
            check("fifo", jct["allot"] < jct["fifo"], sprintf("avg JCT %s < fifo %s", jct["allot"], jct["fifo"]))
            check("las", jct["allot"] <= 1.03 * jct["las"], sprintf("avg JCT %s within 3 %% of las %s (%+.1f %%)", jct["allot"], jct["las"], 100 * (jct["allot"] / jct["las"] - 1)))
            check("vc", vcbad == 0, sprintf("no VC avg JCT > static + 10 %%:%s", vcbad ? worst : " none"))
            exit bad > 0
        }'
}
if [ -f "$philly/philly_jobs.csv" ] && [ -f "$philly/philly_vc_nodes.csv" ]; then
    pstatus=0
    # required: what allot meets today (docs/benchmarks.md, "Targets in and
    # out of sample"); the rest is open work and prints MISSED
    replay_check 2017-10-01 2017-12-01 0.8 "q util inq jain lost fifo las vc" || pstatus=1
    replay_check 2017-10-01 2017-12-01 0.95 "q util inq jain lost fifo las vc" || pstatus=1
    replay_check 2017-09-01 2017-11-01 0.8 "q util inq jain lost fifo las vc" || pstatus=1
    replay_check 2017-09-01 2017-11-01 0.95 "q util inq jain lost fifo vc" || pstatus=1
    # a third window no parameter was chosen on (the fair-share cap was
    # chosen on the two above at 0.95)
    replay_check 2017-11-01 2018-01-01 0.8 "q util inq jain lost fifo vc" || pstatus=1
    replay_check 2017-11-01 2018-01-01 0.95 "q util inq jain lost fifo vc" || pstatus=1
    if [ $pstatus -eq 0 ]; then
        echo "data-checks: Philly replays meet their required targets (MISSED lines are open work, docs/benchmarks.md)"
    else
        echo "data-checks: a required Philly target is missed" >&2
        status=1
    fi
fi

# Slurm's own accounting, from the shared baseline (about 1-2 minutes)
sacct_dir=$(mktemp -d)
if [ "$(id -u)" != 0 ] || [ ! -x "$root/../bench/slurm/setup.sh" ]; then
    echo "data-checks: SKIP allot-sim replay --sacct: needs root and $root/../bench/slurm (the shared Slurm harness)"
elif ! SHARED_BENCH="$root/../bench" "$(dirname "$0")/../bench/sacct-export.sh" \
        "$sacct_dir/sacct.txt" "$sacct_dir/nodes.txt" -N 24 2>"$sacct_dir/export.log"; then
    tail -n 5 "$sacct_dir/export.log"
    echo "data-checks: SKIP allot-sim replay --sacct: Slurm could not be set up or run here (above)"
else
    out=$("$sim" replay --sacct "$sacct_dir/sacct.txt" --slurm-nodes "$sacct_dir/nodes.txt" \
        --gpu-model V100 --drain --policy fifo,allot 2>&1) || {
        printf '%s\n' "$out"
        echo "data-checks: allot-sim replay --sacct failed on Slurm's export" >&2
        status=1
    }
    printf '%s\n\n' "$out"
    if ! printf '%s\n' "$out" | awk '
        /^sacct: / { ran = $4 }
        $1 == "fifo" { jobs = $2; done = $3 }
        END { exit !(ran >= 24 && jobs == ran && done == jobs) }'; then
        echo "data-checks: the replay of Slurm's export did not read or finish its 24 jobs" >&2
        status=1
    else
        echo "data-checks: Slurm's export (24 jobs) replays: every job read, fifo finishes them all"
    fi
fi
rm -rf "$sacct_dir"
exit $status
