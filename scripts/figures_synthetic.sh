#!/usr/bin/env bash
# Figures 1-5 of Liu, Scaglione & Peisert (2025), Sec. V-A, seed 4242: JSON + CSV + PNG per figure. The committed
# outputs are `scripts/figures_synthetic.sh scripts/results/synthetic --trials 200` (the paper's 200 trials per
# point; the studies' own defaults are 100, Fig. 1's 200).
#   scripts/figures_synthetic.sh [OUT_DIR] [extra flags passed to every study, e.g. --trials 20]
#   FIGS="fig1 fig3" scripts/figures_synthetic.sh      # a subset (default: all five; fig2 is the slowest)
case "${1:-}" in -h|--help) sed -n '2,/^set /p' "$0" | sed -n 's/^# \{0,1\}//p'; exit 0;; esac  # the header above
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-scripts/results/synthetic}"
shift || true
for fig in ${FIGS:-fig2 fig1 fig3 fig4 fig5}; do
  python -m torchdpgmm.cli experiment "$fig" --out "$OUT" --seed 4242 "$@"
done
