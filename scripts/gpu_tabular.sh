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
# Run from the repository root: bash scripts/gpu_tabular.sh
set -uo pipefail
OUT=${OUT:-gpu-out}
W=${W:-/tmp/tabular-cuda}
mkdir -p "$OUT" "$W"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
LANES=${LANES:-4}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(( $(nproc) / LANES > 0 ? $(nproc) / LANES : 1 ))}
TABLES=${TABLES:-"LetterRecognition Satellite digits breast_cancer Sonar Ionosphere Vowel PimaIndiansDiabetes parkinsons ais wine Glass"}
one() {  # one table: its own process and folder; its wall time (whole seconds) and exit status go to timings.txt
  t=$1; start=$(date +%s)
  timeout "${T_TABLE:-470}" $PY -m torchdpgmm.cli experiment tabular --tables "$t" --device "${DEVICE:-cuda}" \
    --draws "${DRAWS:-10}" --seed "${SEED:-0}" ${EPSILONS:+--epsilons "$EPSILONS"} --out "$W/$t" > "$W/$t.log" 2>&1
  rc=$?
  ( flock 9; echo "$t exit $rc after $(( $(date +%s) - start )) s" >> "$W/timings.txt"
    tar czf "$OUT/tabular-cuda.tar.gz" -C "$W" . ) 9>"$W/.lock"
}
export -f one; export PY W OUT DEVICE=${DEVICE:-cuda} EPSILONS=${EPSILONS:-}
{ nvidia-smi -L; $PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"; nproc --all; echo "OMP_NUM_THREADS=$OMP_NUM_THREADS lanes=$LANES"; } \
  > "$W/machine.txt" 2>&1
printf '%s\n' $TABLES | xargs -P "$LANES" -I{} bash -c 'one "$@"' _ {}
cat "$W/timings.txt"
