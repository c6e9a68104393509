#!/usr/bin/env bash
# The checks that need a CUDA device, as one prepared command for a lent GPU machine (issue 36): the core
# cuda-marked tests, every other cuda-marked test (every registered study's quick mode), then the sweep benchmark
# (GPU 10^5 and 10^6 trials, the same machine's CPU cores per trial) and the synchronisation/memory benchmark on
# the device. Each step is time-boxed so that a short lease still returns what finished; logs and JSON
# go to $OUT (default gpu-out/). Run from the repository root: bash scripts/gpu_checks.sh
case "${1:-}" in -h|--help) sed -n '2,/^set /p' "$0" | sed -n 's/^# \{0,1\}//p'; exit 0;; esac  # the header above
set -uo pipefail
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
CORE="tests/test_hotpath.py tests/test_discrete_fixed_work.py tests/test_discrete_samplers.py tests/test_sweep_blocks.py tests/test_montecarlo.py tests/test_centring.py"
{ nvidia-smi -L; $PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name())"; date -u; } > "$OUT/gpu.txt" 2>&1
# a per-test limit where pytest-timeout is installed (the GPU image has it), and every test's duration
PER_TEST=""; $PY -c "import pytest_timeout" 2>/dev/null && PER_TEST="--timeout ${T_TEST:-120}"
if [ "${TESTS:-1}" != 0 ]; then  # TESTS=0 skips the cuda tests (a second call that only times the benchmarks)
timeout "${T_CORE:-70}" $PY -m pytest -q -m cuda -p no:cacheprovider -rf --durations=0 $PER_TEST $CORE 2>&1 | tee "$OUT/cuda-core.log"
# every other cuda-marked test (every registered study's quick mode), before the benchmarks: an earlier lease ran out
# in this step when it came last
DESELECT=""; for f in $CORE; do DESELECT="$DESELECT --deselect $f"; done
timeout "${T_ALL:-360}" $PY -m pytest -q -m cuda -p no:cacheprovider -rf --durations=0 $PER_TEST tests/ $DESELECT 2>&1 \
  | tee "$OUT/cuda-all.log"
fi
if [ "${BENCH:-1}" != 0 ]; then  # BENCH=0 skips the benchmarks (a lease re-checking only the tests)
timeout "${T_BENCH:-170}" $PY benchmarks/bench_sweep_gpu.py --timeout "${T_LEG:-55}" --cpu-trials "${CPU_TRIALS:-20000}" \
  --out "$OUT/bench_sweep_gpu.json" 2>&1 | tee "$OUT/bench-sweep.log"
timeout "${T_SYNCS:-60}" $PY benchmarks/bench_syncs.py --device cuda --out "$OUT/bench_syncs_cuda.json" 2>&1 | tail -20 >> "$OUT/bench-sweep.log"
timeout "${T_JACOBI:-120}" $PY benchmarks/bench_jacobi.py --device cuda --dims 3,4,6,8,12,16 --repeats 3 --out "$OUT/bench_jacobi_cuda.json" 2>&1 | tail -8 >> "$OUT/bench-sweep.log"
fi
if [ -n "${MNIST_DIR:-}" ]; then  # issue 36's image target: a full MNIST IDX folder carried to the machine (DP-SGD
  # needs dp-accounting: carry its wheel, README of the device tool), timed on the GPU and on the machine's CPU cores
  for dev in cuda cpu; do
    start=$(date +%s)
    timeout "${T_MNIST:-300}" $PY -m torchdpgmm.cli experiment synthetic-classifier --dataset mnist --data-dir "$MNIST_DIR" \
      --epsilons 1 --device $dev --threads "$(nproc)" --out "$OUT/mnist-$dev" > "$OUT/mnist-$dev.log" 2>&1
    echo "synthetic-classifier mnist on $dev: exit $? after $(( $(date +%s) - start )) s (whole seconds)" >> "$OUT/bench-sweep.log"
  done
fi
