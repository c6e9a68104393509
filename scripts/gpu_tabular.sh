#!/usr/bin/env bash
# The tabular study (issue 37) in full on a lent GPU machine: every table, every epsilon, the study's draws, with
# --device cuda (DEVICE=cpu for a smoke run here), one process per table, LANES tables at a time (the GPU is shared;
# the scikit-learn fits use the machine's cores), the largest tables first. Each table has a time limit (T_TABLE); a
# table that runs past it is named in timings.txt with exit 124 and has no JSON. Everything lands in
# $OUT/tabular-cuda.tar.gz (one folder per table, as `torchdpgmm experiment tabular --tables NAME --out DIR` writes it,
# each run's log, timings.txt and machine.txt), rewritten as each table ends. Compare its rows with
# docs/results/tabular/tabular.json (CPU) in distribution: CPU and CUDA generators draw different noise.
# Peers are not run (CPU programs; their rows are in docs/results/tabular/peers.json).
# Its first run (tree d954636, an H100) found the study ignoring --device: the releases had run on the machine's CPU.
# DRAW_PARTS=N splits each table's draws into N processes (a table too slow for one call's limit: digits, whose
# Gibbs sampling is launch-bound on a GPU); scripts/tabular_device_compare.py merges the parts.
# Run from the repository root: bash scripts/gpu_tabular.sh
case "${1:-}" in -h|--help) sed -n '2,/^set /p' "$0" | sed -n 's/^# \{0,1\}//p'; exit 0;; esac  # the header above
set -uo pipefail
OUT=${OUT:-gpu-out}
W=${W:-/tmp/tabular-cuda}
mkdir -p "$OUT" "$W"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
LANES=${LANES:-4}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(( $(nproc) / LANES > 0 ? $(nproc) / LANES : 1 ))}
TABLES=${TABLES:-"LetterRecognition Satellite digits breast_cancer Sonar Ionosphere Vowel PimaIndiansDiabetes parkinsons ais wine Glass"}
DRAWS=${DRAWS:-10}
DRAW_PARTS=${DRAW_PARTS:-1}  # > 1: each table's draws split into this many processes (--first-draw), run side by side
one() {  # TABLE:FIRST:COUNT, its own process and folder; its wall time (whole seconds) and exit go to timings.txt
  t=${1%%:*}; rest=${1#*:}; first=${rest%%:*}; n=${rest#*:}; name=$t; start=$(date +%s)
  [ "$DRAW_PARTS" -gt 1 ] && name="$t.d$first"  # a part's folder; the rows keep the table's name and their draws
  timeout "${T_TABLE:-470}" $PY -m torchdpgmm.cli experiment tabular --tables "$t" --device "${DEVICE:-cuda}" \
    --draws "$n" --first-draw "$first" --seed "${SEED:-0}" ${EPSILONS:+--epsilons "$EPSILONS"} --out "$W/$name" \
    > "$W/$name.log" 2>&1
  rc=$?
  ( flock 9; echo "$name exit $rc after $(( $(date +%s) - start )) s" >> "$W/timings.txt"
    tar czf "$OUT/tabular-cuda.tar.gz" -C "$W" . ) 9>"$W/.lock"
}
job_specs() {  # TABLE:FIRST:COUNT per process, the draws split as evenly as they go (the first parts take one more)
  for t in $TABLES; do
    first=0
    for ((i = 0; i < DRAW_PARTS; i++)); do
      n=$(( DRAWS / DRAW_PARTS + (i < DRAWS % DRAW_PARTS ? 1 : 0) ))
      [ "$n" -gt 0 ] && echo "$t:$first:$n"
      first=$(( first + n ))
    done
  done
}
export -f one; export PY W OUT DEVICE=${DEVICE:-cuda} EPSILONS=${EPSILONS:-} DRAW_PARTS
# torch's version and CUDA from torch/version.py, read without importing torch (seconds of CPU); import it if that fails
TORCH_VERSION="import importlib.util as u, pathlib as p; v = {}
exec(p.Path(u.find_spec('torch').origin).with_name('version.py').read_text(), v); print('torch', v['__version__'], 'cuda', v['cuda'])"
{ nvidia-smi -L; $PY -c "$TORCH_VERSION" 2>/dev/null || $PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"
  nproc --all; echo "OMP_NUM_THREADS=$OMP_NUM_THREADS lanes=$LANES"; } > "$W/machine.txt" 2>&1
job_specs | xargs -P "$LANES" -I{} bash -c 'one "$@"' _ {}
cat "$W/timings.txt"
# exit status: 1 when any table (or draw part) did not finish with exit 0, so a caller sees a failed study
! grep -qv " exit 0 after " "$W/timings.txt"
