#!/bin/sh
# Real-trace checks (make test-data): replays the Alibaba openb traces with
# allot-sim fill (docs/BENCHMARKS.md section 1) and compares the unallocated
# GPU share at arrived = 100 % with the FGD authors' published 10-seed means.
# Fails when any of the six published policies is more than 1.0 percentage
# point away, or when the published numbers cannot be matched up.
#
# usage: tests/data-checks.sh BUILD_DIR DATA_DIR
# Runs about 10-20 s on two cores.
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
        --expected "$data/fgd_expected_results" --jobs 2 2>&1) || {
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
exit $status
