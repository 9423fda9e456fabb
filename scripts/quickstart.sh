#!/usr/bin/env bash
# The embedded default (what `make run` runs after setup + build): offline experiments on the
# bundled tiny models (models/tiny-qwen3 + models/tiny-eagle3), no GPU, no download.
#   1. configs/quickstart.yaml         synth-gsm, T 0.9: baseline vs EARS beta 0.1 vs target alone
#   2. configs/quickstart-greedy.yaml  synth-gsm, T 0: target alone vs speculative (speedup, identity)
#   3. configs/open-stems.yaml         open-ended stems, T 0.9: baseline vs EARS beta 0.05/0.1/0.2
#   4. the same at T 1.2
# Usage: scripts/quickstart.sh [path/to/ears-bench] [extra args for every run, e.g. --threads 1]
set -euo pipefail
cd "$(dirname "$0")/.."
exe=${1:-build/ears-bench}
shift || true

for f in models/tiny-qwen3/model.safetensors models/tiny-eagle3/model.safetensors; do
  [ -f "$f" ] || { echo "quickstart: $f is missing; rebuild the bundled models with the commands in models/README.md" >&2; exit 2; }
done

stamp=$(date -u +%Y%m%d-%H%M%S)
root=runs/quickstart-$stamp
t0=$(date +%s)
run() {
  local name=$1; shift
  echo
  echo "================ ears-bench run $* ================"
  "$exe" run "$@" --out "$root/$name" "${extra[@]}"
}
extra=("$@")
run synth-gsm configs/quickstart.yaml
run synth-gsm-greedy configs/quickstart-greedy.yaml
run open-stems configs/open-stems.yaml
run open-stems-t1.2 configs/open-stems.yaml --set decoding.temperature=1.2 --set name=open-stems-t1.2
echo
echo "quickstart: 4 experiments in $(( $(date +%s) - t0 )) s; reports (report.md, report.json, SVG charts) in:"
for d in "$root"/*/; do echo "  $d"; done
