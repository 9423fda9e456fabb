#!/usr/bin/env bash
# The embedded default (what `make run` runs after setup + build): offline experiments on the
# bundled tiny models. Usage: scripts/quickstart.sh [path/to/ears-bench]
set -euo pipefail
cd "$(dirname "$0")/.."
exe=${1:-build/ears-bench}
shared=${EARS_SHARED_DIR:-../shared}

if [ -f models/tiny-qwen3/model.safetensors ] && [ -f models/tiny-eagle3/model.safetensors ]; then
  for cfg in configs/quickstart.yaml configs/open-stems.yaml; do
    echo "== ears-bench run $cfg"
    "$exe" run "$cfg"
  done
  exit 0
fi

# No trained pair bundled yet: speculative decoding on the golden fixtures (random weights, so
# acceptance is low) — baseline vs EARS at T=0.9, target-only for reference.
if [ ! -d "$shared/fixtures/qwen3-tiny" ]; then
  echo "quickstart: no bundled models and no $shared/fixtures; nothing to run" >&2
  exit 1
fi
ids="231 261 168 257 30 94 134 244 288 85 280 53"
for v in none baseline ears; do
  if [ "$v" = none ]; then args=(--draft-kind none); else args=(--draft "$shared/fixtures/eagle3-tiny" --verifier "$v" --beta 0.2); fi
  echo "== generate: target qwen3-tiny, draft ${v/none/none (target only)}, T=0.9, gamma=5"
  "$exe" generate --target "$shared/fixtures/qwen3-tiny" --ids "$ids" --temperature 0.9 --max-new-tokens 64 \
    --gamma 5 --seed 1 "${args[@]}"
done
