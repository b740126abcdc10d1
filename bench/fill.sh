#!/bin/sh
# Fill-experiment benchmark (make bench): all seven policies of
# `allot-sim fill --policy all` x 10 seeds on the openb default trace, two
# worker processes; prints the result table and the wall time.
# Targets: well under 60 s, aim 15 s (docs/benchmarks.md, "openb fill: beating FGD", Cost).
#
# usage: bench/fill.sh BUILD_DIR DATA_DIR
set -eu

if [ $# -ne 2 ]; then
    echo "usage: $0 BUILD_DIR DATA_DIR" >&2
    exit 2
fi
sim="$1/allot-sim"
data="$2/openb"
if [ ! -x "$sim" ]; then
    echo "bench/fill: $sim not built" >&2
    exit 1
fi
start=$(date +%s%N)
"$sim" fill --nodes "$data/openb_node_list_gpu_node.csv" \
    --pods "$data/openb_pod_list_default.csv" --policy all --seeds 42-51 --workers 2
end=$(date +%s%N)
wall=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f", (b - a) / 1e9 }')
echo "bench=fill workload=default policies=7 seeds=10 workers=2 wall_s=$wall target_s=15 limit_s=60"
if awk -v w="$wall" 'BEGIN { exit !(w > 60) }'; then
    echo "bench/fill: slower than the 60 s limit" >&2
    exit 1
fi
