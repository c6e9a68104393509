#!/usr/bin/env bash
# Figures 1-5 of Liu, Scaglione & Peisert (2025), Sec. V-A, at their default sizes (200 trials, seed 4242):
# JSON + CSV + PNG per figure.
#   scripts/figures_synthetic.sh [OUT_DIR] [extra flags passed to every study, e.g. --trials 20]
#   FIGS="fig1 fig3" scripts/figures_synthetic.sh      # a subset (default: all five; fig2 is the slowest)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-scripts/results/synthetic}"
shift || true
for fig in ${FIGS:-fig2 fig1 fig3 fig4 fig5}; do
  python -m torchdpgmm.cli experiment "$fig" --out "$OUT" --seed 4242 "$@"
done
