#!/usr/bin/env bash
# The seed article's GPU experiment, end to end, in one go (aim: under 8 minutes on one modern GPU):
# an ERNIE-base shape (12 layers, 768 hidden), ChnSentiCorp, batch 32/64/128, fp32 against AMP,
# dynamic graph and to_static, then every GPU inference backend. Prints the report's tables last.
# Usage: senti/benchmarks/gpu_check.sh [DATASET] [OUTPUT_DIR]   (run from the repository root)
set -euo pipefail
cd "$(dirname "$0")/.."
DATASET=${1:-../shared/data/chnsenticorp}
OUT=${2:-runs/gpu_check}
mkdir -p "$(dirname "$OUT")"
SENTI=${SENTI:-.venv/bin/senti}
[ -x "$SENTI" ] || SENTI=senti
"$SENTI" info
start=$(date +%s)
timeout 460 "$SENTI" bench --target gpu --suite all --model 12l-768h --dataset "$DATASET" \
    --batch-sizes 32,64,128 --amp both --output-dir "$OUT" > "$OUT.log" 2>&1 || {
    status=$?; tail -n 40 "$OUT.log"; echo "gpu_check: senti bench exited $status"; exit "$status"; }
echo "gpu_check: $(( $(date +%s) - start )) s; full log in $OUT.log"
sed -n '/^## Training/,$p' "$OUT/report.md"
