#!/usr/bin/env bash
# Rebuild the embedded default pair (models/tiny-qwen3 + models/tiny-eagle3) from scratch:
# tokenizer, target, EAGLE-3 head, then SHA256SUMS. Deterministic for the seeds below on CPU;
# the wall-time budgets (--minutes) cut the step counts, so run it on an otherwise idle machine.
#   scripts/train_models.sh [OUT_DIR (default models)] [EARS_BENCH binary (default build/ears-bench)]
set -euo pipefail
out=${1:-models}
bin=${2:-build/ears-bench}
threads=${THREADS:-2}
[ -x "$bin" ] || { echo "train_models.sh: $bin not found; run 'make build' first" >&2; exit 2; }
mkdir -p "$out"
start=$(date +%s)
# --force: an existing pair is replaced (steps 4 and 5 continue their own --init in place).
"$bin" train tokenizer --out "$out/tiny-qwen3" --force
"$bin" train target --out "$out/tiny-qwen3" --force --steps 3000 --minutes 39 --natural-fraction 0.1 \
  --seed 0 --threads "$threads" --eval-n 200
"$bin" train eagle3 --target "$out/tiny-qwen3" --out "$out/tiny-eagle3" --force --steps 1200 --minutes 15 \
  --seed 0 --threads "$threads" --eval-n 100
# The head continued on the target's own greedy answers (self-distillation), unrolled over 5 steps
# (the chain's gamma) instead of 3; its train_log.json keeps the first stage's log.
"$bin" train eagle3 --target "$out/tiny-qwen3" --init "$out/tiny-eagle3" --out "$out/tiny-eagle3" --ttt 5 \
  --regenerate 40000 --lr 6e-4 --warmup 20 --steps 4000 --minutes 40 --seed 1 --threads "$threads" --eval-n 100
# Continued once more with a draft vocabulary of the 512 most frequent answer tokens (EAGLE-3's
# d2t / t2d: a quarter of the 2048 ids, as published heads keep 32000 of 128256-151936): the
# chain step's lm_head a quarter of the work.
"$bin" train eagle3 --target "$out/tiny-qwen3" --init "$out/tiny-eagle3" --out "$out/tiny-eagle3" --ttt 5 \
  --draft-vocab 512 --regenerate 40000 --lr 3e-4 --warmup 20 --steps 4000 --minutes 40 --seed 2 --threads "$threads" \
  --eval-n 100
(cd "$out" && sha256sum tiny-qwen3/* tiny-eagle3/* > SHA256SUMS)
end=$(date +%s)
echo "train_models.sh: total wall time $(( (end - start) / 60 )) min $(( (end - start) % 60 )) s"
