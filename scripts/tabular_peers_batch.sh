#!/usr/bin/env bash
# Runs a list of scripts/tabular_peers.py jobs side by side, one process (one core) each, all ending before a
# common deadline: made for a lent machine with many cores and a hard time limit (issue 26's peers, whose
# fits take minutes each; the lent GPU machine's 16 CPU cores run 16 of them at once).
#
#   scripts/tabular_peers_batch.sh JOBS DATA OUT WORKERS SECONDS
#
# JOBS: a file with one job a line, the arguments of `tabular_peers.py run` after DATA OUT (e.g.
#   "--peer snsynth --methods aim --tables breast_cancer --first-draw 1 --draws 1 --time-limit 480");
#   '#' lines and blank lines are skipped; jobs start in file order, WORKERS at a time.
# DATA: the folder written by `tabular_peers.py prepare`; OUT: the folder of the shared peers.json (every job
#   merges its rows into it under a lock); SECONDS: wall seconds from now to the deadline passed to every
#   job (`--deadline`): no fit starts with under 30 s left, and each fit's limits are cut to what is left.
# PYTHON (environment, default python3) runs the jobs; one thread each for BLAS, OpenMP, torch and XLA, and
# JAX on the CPU (a GPU is for other work). One line per job goes to OUT/batch.log as it ends.
# Afterwards, on the project's machine: `python3 scripts/tabular_peers.py merge OUT/peers.json` merges the
# rows into docs/results/tabular/peers.json.
set -uo pipefail
if [ $# -ne 5 ]; then
  echo "usage: $0 JOBS DATA OUT WORKERS SECONDS" >&2
  exit 2
fi
jobs=$1 data=$2 out=$3 workers=$4 seconds=$5
[ -f "$jobs" ] || { echo "tabular_peers_batch: no job file $jobs" >&2; exit 2; }
[ -f "$data/manifest.json" ] || { echo "tabular_peers_batch: $data has no manifest.json (run prepare)" >&2; exit 2; }
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
deadline=$(( $(date +%s) + seconds ))
export PYTHON=${PYTHON:-python3} HERE=$here DATA=$data OUT=$out DEADLINE=$deadline
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 JAX_PLATFORMS=cpu CUDA_VISIBLE_DEVICES=
export XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
grep -v '^[[:space:]]*#' "$jobs" | grep -v '^[[:space:]]*$' | tr '\n' '\0' | xargs -0 -P "$workers" -I{} sh -c '
  t0=$(date +%s)
  $PYTHON "$HERE/tabular_peers.py" run "$DATA" "$OUT" --deadline "$DEADLINE" $1 > /dev/null 2> "$OUT/.err.$$"
  rc=$?
  echo "rc=$rc $(( $(date +%s) - t0 ))s $1 $(tail -n 1 "$OUT/.err.$$" | cut -c1-200)" >> "$OUT/batch.log"
  rm -f "$OUT/.err.$$"' _ {}
echo "tabular_peers_batch: $(grep -c . "$out/batch.log" 2>/dev/null || echo 0) jobs ended; rows in $out/peers.json"
