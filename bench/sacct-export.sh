#!/usr/bin/env bash
# sacct-export.sh - a Slurm accounting export made by a real Slurm 22.05, for
# allot-sim replay --sacct (docs/planning.md). As root: Slurm's harness
# (../shared/bench/slurm) installs its Debian packages if missing and starts
# munged, MariaDB, slurmdbd, slurmctld and one slurmd per node on loopback
# only, in a temporary folder with its own ports; this script runs a small
# job mix there (GPUs 1-8 and the accounts and QOS of ../shared/bench/
# jobmix.sh, each job sleeping a few seconds instead of the mix's 3000, plus
# one job cancelled while pending), waits until slurmdbd has every job,
# writes `sacct -P` and `scontrol show nodes -o`, and tears it all down
# (by the PIDs the harness recorded).
#
# Usage: bench/sacct-export.sh SACCT_OUT NODES_OUT [-n NODES] [-N JOBS]
#   -n  nodes of 8 GPUs (untyped: replay them with --gpu-model)  (default 3)
#   -N  jobs in the mix                                          (default 24)
# Exit status: 0 written; 1 Slurm could not be set up or the jobs did not
# finish (the reason on stderr); 2 usage.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
if [ $# -lt 2 ]; then sed -n '2,18p' "$0"; exit 2; fi
OUT_SACCT=$1; OUT_NODES=$2; shift 2
NODES=3; N=24
while getopts "n:N:h" o; do
    case $o in n) NODES=$OPTARG ;; N) N=$OPTARG ;; *) sed -n '2,18p' "$0"; exit 2 ;; esac
done
SHARED=${SHARED_BENCH:-$ROOT/../shared/bench}
[ -x "$SHARED/slurm/setup.sh" ] || { echo "sacct-export: no Slurm harness in $SHARED/slurm" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "sacct-export: needs root (Slurm's daemons)" >&2; exit 1; }
SHARED=$(cd "$SHARED" && pwd)

# Our own folder and ports, so a baseline someone else runs is left alone.
export BENCH_DIR
BENCH_DIR=$(mktemp -d /tmp/allot-sacct-export.XXXXXX)
export CTLD_PORT=${CTLD_PORT:-26817} DBD_PORT=${DBD_PORT:-26819} REST_PORT=${REST_PORT:-26820}
export DB_PORT=${DB_PORT:-23306} SLURMD_BASE_PORT=${SLURMD_BASE_PORT:-30001}
export SLURM_CONF=$BENCH_DIR/etc/slurm.conf
export TZ=UTC # sacct prints local time: make it UTC (the replay's default --tz)
# the mix runs as `nobody` (setup.sh's BENCH_USER)
cleanup() { "$SHARED/slurm/teardown.sh" --purge >/dev/null 2>&1 || true; }
trap cleanup EXIT

log() { printf 'sacct-export: %s\n' "$*" >&2; }
log "setting up Slurm ($NODES nodes x 8 GPUs, slurmdbd) in $BENCH_DIR"
if ! "$SHARED/slurm/setup.sh" -n "$NODES" -m slurmd -d 1 -r 0 > "$BENCH_DIR.setup.log" 2>&1; then
    tail -n 15 "$BENCH_DIR.setup.log" >&2
    log "Slurm could not be set up (log above)"
    rm -f "$BENCH_DIR.setup.log"
    exit 1
fi
rm -f "$BENCH_DIR.setup.log"
start=$(date -u +%Y-%m-%dT%H:%M:%S)
# the mix: every job sleeps 2..7 s; a 64-GPU job that can never start is
# cancelled while pending (a never-started job for the reader to skip)
"$SHARED/jobmix.sh" "$N" 42 | while IFS=$'\t' read -r idx g acct qos _tl _sl; do
    setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups \
        sbatch --parsable -p gpu --gres="gpu:$g" -t 5 -J "mix$idx" -D "$BENCH_DIR/work" \
        -o /dev/null --account="$acct" --qos="$qos" --wrap "exec sleep $((2 + idx % 6))" \
        >/dev/null || { log "sbatch failed for job $idx"; exit 1; }
done
big=$(setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups \
    sbatch --parsable -p gpu --gres=gpu:8 -N "$((NODES + 1))" -t 5 -J never -D "$BENCH_DIR/work" \
    -o /dev/null --account=a1 --wrap "exec sleep 1" 2>/dev/null || true)
[ -n "$big" ] && { sleep 1; scancel "$big" || true; }
log "waiting for $N jobs to finish"
for _ in $(seq 300); do [ "$(squeue -h -o %i | wc -l)" = 0 ] && break; sleep 1; done
[ "$(squeue -h -o %i | wc -l)" = 0 ] || { log "jobs still queued after 300 s"; exit 1; }
# slurmdbd receives the records asynchronously: wait until it has them all
cols=JobID,JobName,Account,Partition,QOS,Submit,Start,End,State,AllocTRES,ReqTRES
for _ in $(seq 60); do
    done_jobs=$(sacct -a -X -n -P -S "$start" -o State | grep -c '^COMPLETED' || true)
    [ "$done_jobs" -ge "$N" ] && break
    sleep 1
done
[ "$done_jobs" -ge "$N" ] || { log "slurmdbd has $done_jobs of $N completed jobs"; exit 1; }
sacct -a -P -S "$start" -E now -o "$cols" > "$OUT_SACCT"
scontrol show nodes -o > "$OUT_NODES"
log "wrote $OUT_SACCT ($(($(wc -l < "$OUT_SACCT") - 1)) lines) and $OUT_NODES"
