#!/usr/bin/env bash
# vs-slurm.sh - allot's control plane against a real Slurm 22.05 on the same
# machine, on the same job mix, in one run (so the ratio holds on a noisy
# machine). As root: Slurm's harness (../shared/bench/slurm) installs its
# Debian packages if missing and starts its daemons on loopback only.
#
# Usage: bench/vs-slurm.sh [BUILD_DIR] [-P clients] [-N jobs] [-q quiet_s]
#   BUILD_DIR  where bench-api, bench-cluster and allotd are (default: build)
#   -P         concurrent REST clients on both sides          (default 8)
#   -N         jobs in the mix                                (default 5000)
#   -q         seconds without a new start that end Slurm's fill (default 90;
#              run.sh's own 30 s cut Slurm's fill short at 20 % of the GPUs
#              here once, between two backfill cycles)
# Steps: jobmix.sh N > jobs.tsv; Slurm: setup.sh -n 1024 -m cloud -r 1,
# run.sh -N N -s rest -P P (partition down while submitting, then the fill
# from a full queue), teardown.sh; allot: bench-cluster and bench-api on the
# same jobs.tsv. Prints both sets of figures and the ratios; keeps the logs
# in a temporary folder it names at the end.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
BUILD=$ROOT/build
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then BUILD=$(cd "$1" && pwd); shift; fi
P=8; N=5000; Q=90
while getopts "P:N:q:h" o; do
    case $o in
        P) P=$OPTARG ;; N) N=$OPTARG ;; q) Q=$OPTARG ;; *) sed -n '2,20p' "$0"; exit 2 ;;
    esac
done
SHARED=${SHARED_BENCH:-$(cd "$ROOT/../shared/bench" && pwd)}
[ "$(id -u)" = 0 ] || { echo "vs-slurm.sh: run as root (Slurm's harness needs it)" >&2; exit 2; }
for b in bench-api bench-cluster allotd; do
    [ -x "$BUILD/$b" ] || { echo "vs-slurm.sh: $BUILD/$b missing: build first" >&2; exit 2; }
done
OUT=$(mktemp -d /tmp/vs-slurm-XXXXXX)
SLURM_UP=0
cleanup() { [ "$SLURM_UP" = 1 ] && "$SHARED/slurm/teardown.sh" >> "$OUT/slurm-teardown.log" 2>&1; true; }
trap cleanup EXIT
say() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
# kv FILE PATTERN KEY -> the value of KEY= on the first line matching PATTERN
kv() { grep -m1 -E "$2" "$1" | tr ' ' '\n' | awk -F= -v k="$3" '$1 == k {print $2; exit}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.1fx", a / b; else print "-" }'; }

"$SHARED/jobmix.sh" "$N" 42 > "$OUT/jobs.tsv"
say "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), load $(cut -d' ' -f1-3 /proc/loadavg)"

# ---------------------------------------------------------------- Slurm
say "Slurm: setup.sh -n 1024 -m cloud -r 1"
SLURM_UP=1
"$SHARED/slurm/setup.sh" -n 1024 -m cloud -r 1 > "$OUT/slurm-setup.log" 2>&1
say "Slurm: run.sh -N $N -s rest -P $P -q $Q (minutes)"
"$SHARED/slurm/run.sh" -N "$N" -s rest -P "$P" -q "$Q" > "$OUT/slurm-run.log" 2>&1 || true
grep '^RESULT' "$OUT/slurm-run.log" > "$OUT/slurm.txt" || true
"$SHARED/slurm/teardown.sh" > "$OUT/slurm-teardown.log" 2>&1 || true
SLURM_UP=0

# ---------------------------------------------------------------- allot
say "allot: bench-cluster (1024 nodes, $N jobs)"
"$BUILD/bench-cluster" --jobs "$N" --rss-jobs 0 --mix "$OUT/jobs.tsv" > "$OUT/allot-cluster.txt" 2> "$OUT/allot-cluster.err" || true
say "allot: bench-api (1, $P, 64 clients)"
"$BUILD/bench-api" --clients "1,$P,64" --jobs "$N" --mix "$OUT/jobs.tsv" > "$OUT/allot-api.txt" 2> "$OUT/allot-api.err" || true

# ---------------------------------------------------------------- report
S=$OUT/slurm.txt; C=$OUT/allot-cluster.txt; A=$OUT/allot-api.txt
s_rate=$(kv "$S" '^RESULT submit' rate_jobs_s); s_p50=$(kv "$S" '^RESULT submit' p50_ms)
s_p99=$(kv "$S" '^RESULT submit' p99_ms)
s_fill=$(kv "$S" '^RESULT schedule' wall_s); s_started=$(kv "$S" '^RESULT schedule' started)
s_place=$(kv "$S" '^RESULT schedule' rate_jobs_s)
s_rss=$(kv "$S" '^RESULT rss_after_schedule' slurmctld_rss_mib)
s_rest=$(kv "$S" '^RESULT rss_after_schedule' slurmrestd_mib)
s_dbd=$(kv "$S" '^RESULT rss_after_schedule' slurmdbd_mib)
a_rate=$(kv "$A" "clients=$P " submits_per_s); a_p50=$(kv "$A" "clients=$P " p50_ms)
a_p99=$(kv "$A" "clients=$P " p99_ms); a_rate64=$(kv "$A" 'clients=64 ' submits_per_s)
a_p99_64=$(kv "$A" 'clients=64 ' p99_ms)
a_qfill=$(kv "$C" '^queued_first' fill_s); a_qstarted=$(kv "$C" '^queued_first' started)
a_qplace=$(kv "$C" '^queued_first' placed_per_s); a_qrss=$(kv "$C" '^queued_first' rss_mib)
a_fill=$(kv "$C" '^nodes=' fill_s); a_place=$(kv "$C" '^nodes=' placed_per_s)
a_rss=$(kv "$C" '^nodes=' rss_mib)

echo "== Slurm 22.05 (1024 cloud nodes x 8 GPUs, slurmrestd, slurmdbd) and allot, $N jobs of jobmix.sh, same machine, one run"
echo "-- Slurm raw"; cat "$S"
echo "-- allot raw"; cat "$C" "$A"
echo "-- side by side"
printf '%-44s %-26s %-26s %s\n' figure Slurm allot "allot/Slurm"
printf '%-44s %-26s %-26s %s\n' "REST submits/s, $P clients" "${s_rate:-?}" "${a_rate:-?}" "$(ratio "${a_rate:-0}" "${s_rate:-0}")"
printf '%-44s %-26s %-26s %s\n' "submit p50 / p99 ms, $P clients" "${s_p50:-?} / ${s_p99:-?}" "${a_p50:-?} / ${a_p99:-?}" "p99 $(ratio "${s_p99:-0}" "${a_p99:-0}") lower"
printf '%-44s %-26s %-26s %s\n' "REST submits/s, 64 clients (allot)" "-" "${a_rate64:-?} (p99 ${a_p99_64:-?} ms)" "$(ratio "${a_rate64:-0}" "${s_rate:-0}") vs Slurm at $P"
printf '%-44s %-26s %-26s %s\n' "fill from a full queue, s" "${s_fill:-?} (${s_started:-?} started, $(kv "$S" '^RESULT schedule' gpus_alloc))" "${a_qfill:-?} (${a_qstarted:-?} started)" "$(ratio "${s_fill:-0}" "${a_qfill:-0}") faster"
printf '%-44s %-26s %-26s %s\n' "placements/s in that fill" "${s_place:-?}" "${a_qplace:-?}" "$(ratio "${a_qplace:-0}" "${s_place:-0}")"
printf '%-44s %-26s %-26s %s\n' "fill while submitting (allot), s" "-" "${a_fill:-?} (${a_place:-?}/s)" "-"
printf '%-44s %-26s %-26s %s\n' "controller RSS after the fill, MiB" "${s_rss:-?} (+rest ${s_rest:-?}, dbd ${s_dbd:-?})" "${a_qrss:-?} (${a_rss:-?} concurrent)" "$(ratio "${s_rss:-0}" "${a_qrss:-0}") smaller"
echo "logs: $OUT"
