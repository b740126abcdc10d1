#!/bin/sh
# Real-trace checks (make test-data): replays the Alibaba openb traces with
# allot-sim fill (docs/benchmarks.md, "openb fill: reproducing the FGD
# paper") and compares the unallocated GPU share at arrived = 100 % with
# the FGD authors' published 10-seed means.
# Fails when any of the six published policies is more than 1.0 percentage
# point away, or when the published numbers cannot be matched up.
#
# usage: tests/data-checks.sh BUILD_DIR DATA_DIR
# Runs about 40-60 s on two cores (the Philly replay takes most).
set -eu

if [ $# -ne 2 ]; then
    echo "usage: $0 BUILD_DIR DATA_DIR" >&2
    exit 2
fi
sim="$1/allot-sim"
data="$2/openb"
tolerance=1.0
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
    verdict=$(printf '%s\n' "$out" | awk -v tol="$tolerance" -v w="$workload" '
        /^decision-log hash/ { table = 0; next }
        $1 == "policy" { table = 1; next }
        table && NF >= 3 && $NF != "-" && $(NF-1) != "-" {
            n++
            d = $NF + 0; if (d < 0) d = -d
            if (d > tol) { printf "%s: %s differs by %s pp (published %s)\n", w, $1, $NF, $(NF-1); bad++ }
        }
        END {
            if (n != 6) { printf "%s: %d policies matched published results, want 6\n", w, n; bad++ }
            exit bad > 0
        }') || {
        printf '%s\n' "$verdict" >&2
        status=1
        continue
    }
done
if [ $status -eq 0 ]; then
    echo "data-checks: every published policy within $tolerance pp of the published mean at 100 %"
fi

# Philly multi-tenant replay (docs/benchmarks.md, "Philly multi-tenant
# replay"), load 0.8: the targets allot meets there, checked against
# static from the same run.
philly="$2/philly"
if [ -f "$philly/philly_jobs.csv" ] && [ -f "$philly/philly_vc_nodes.csv" ]; then
    out=$("$sim" replay --jobs "$philly/philly_jobs.csv" --vcs "$philly/philly_vc_nodes.csv" \
        --from 2017-10-01 --to 2017-12-01 --load 0.8 --policy static,fifo,las,allot 2>&1) || {
        printf '%s\n' "$out"
        echo "data-checks: allot-sim replay failed" >&2
        exit 1
    }
    printf '%s\n\n' "$out"
    # columns: policy jobs done unfin avg_jct p50 p95 p99 avg_q p50_q p95_q p99_q util inq_p99
    #          jain jainN preempt lost_gh wall_s; the cluster line gives the GPU count
    verdict=$(printf '%s\n' "$out" | awk '
        /^cluster:/ { for (i = 1; i <= NF; i++) if ($i == "=" && !gpus) gpus = $(i + 1) }
        $1 == "static" || $1 == "fifo" || $1 == "las" || $1 == "allot" {
            jct[$1] = $5; q[$1] = $9; util[$1] = $13; inq[$1] = $14; jain[$1] = $15; lost[$1] = $18
        }
        END {
            hours = 61 * 24
            if (!("allot" in q) || !("static" in q)) { print "replay: table not found"; exit 1 }
            if (q["allot"] > q["static"] / 3) { printf "replay: allot queueing %s > static/3\n", q["allot"]; bad++ }
            if (util["allot"] <= util["static"]) { printf "replay: allot utilisation %s <= static\n", util["allot"]; bad++ }
            if (inq["allot"] > 120) { printf "replay: allot in-quota wait p99 %s s > 120\n", inq["allot"]; bad++ }
            if (jain["allot"] < 0.9) { printf "replay: allot Jain %s < 0.9\n", jain["allot"]; bad++ }
            if (lost["allot"] > 0.02 * util["allot"] * gpus * hours) { printf "replay: allot lost %s GPU-h > 2 %%\n", lost["allot"]; bad++ }
            if (jct["allot"] >= jct["fifo"]) { printf "replay: allot avg JCT %s not below fifo %s\n", jct["allot"], jct["fifo"]; bad++ }
            # against preemptive LAS allot is within a few percent, not below (docs/benchmarks.md)
            if (jct["allot"] > 1.05 * jct["las"]) { printf "replay: allot avg JCT %s more than 5 %% above las %s\n", jct["allot"], jct["las"]; bad++ }
            exit bad > 0
        }') || {
        printf '%s\n' "$verdict" >&2
        exit 1
    }
    echo "data-checks: Philly replay at load 0.8 meets the queueing, utilisation, in-quota wait, Jain, lost-work and fifo JCT targets (las within 5 %)"
fi
exit $status
