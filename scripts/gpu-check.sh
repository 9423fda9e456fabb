#!/usr/bin/env bash
# The one command a user with an NVIDIA GPU runs after `make build-torch2` (or any CUDA build):
#   scripts/gpu-check.sh [BUILD_DIR] [DEVICE]        (defaults: build-torch2, cuda:0)
# It checks, on the GPU, what CI can only compile:
#   1. the golden fixtures (../shared/fixtures) on DEVICE: fp32 logits within 1e-4 of the
#      reference, the bf16 checkpoint within the bf16 bounds (0.75 max / 0.15 mean absolute),
#      as ../shared/fixtures/README.md states them;
#   2. T = 0 speculative decoding (bundled tiny pair, EAGLE-3, gamma 5) == target-only greedy;
#   3. one `bench forward` and one `bench e2e` on DEVICE (CUDA-event timing, SDPA, pinned copies).
# Exit 0: all passed; 1: a check failed; 2: no CUDA build / device, or missing files.
# DEVICE cpu runs the same checks on the CPU (CI does, to keep this script working).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
build=${1:-build-torch2}
device=${2:-cuda:0}
exe=$build/ears-bench
fixtures=../shared/fixtures
[ -x "$exe" ] || { echo "gpu-check: $exe not found; build it first: make build-torch2" >&2; exit 2; }
if [ "$device" != cpu ]; then
devices=$("$exe" env --json | python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["cuda_devices"] if j["cuda_build"] else -1)')
[ "$devices" = -1 ] && { echo "gpu-check: $exe is not a CUDA build; build against a CUDA LibTorch (make build-torch2)" >&2; exit 2; }
[ "$devices" -gt 0 ] || { echo "gpu-check: no CUDA device visible (CUDA_VISIBLE_DEVICES, driver); nothing to check" >&2; exit 2; }
fi
[ -d "$fixtures" ] || { echo "gpu-check: $fixtures not found; put the shared fixtures beside the checkout" >&2; exit 2; }

failed=0
step() { echo "== $*"; }
verdict() { if [ "$1" = 0 ]; then echo "PASS $2"; else echo "FAIL $2"; failed=1; fi; }

# 1. Fixtures: every case's logits from `ears-bench forward --device DEVICE` vs expected.json.
for spec in "qwen3-tiny float32 1e-4 1e-4" "qwen3-tiny-bf16 bfloat16 0.75 0.15"; do
  read -r dir dtype max_tol mean_tol <<<"$spec"
  step "fixture $dir ($dtype on $device)"
  python3 - "$exe" "$fixtures/$dir" "$dtype" "$device" "$max_tol" "$mean_tol" <<'PY'
import json, subprocess, sys
exe, d, dtype, device, max_tol, mean_tol = sys.argv[1:7]
ex = json.load(open(f"{d}/expected.json"))
worst, total, n = 0.0, 0.0, 0
for c in ex["cases"]:
    ids = " ".join(map(str, c["prompt_ids"]))
    out = subprocess.run([exe, "forward", "--model", d, "--ids", ids, "--last", str(len(c["prompt_ids"])),
                          "--dtype", dtype, "--device", device], capture_output=True, text=True, check=True)
    rows = json.loads(out.stdout)["logits"]
    first = len(c["prompt_ids"]) - len(rows)
    for pos, want in zip(c["logits_positions"], c["logits"]):
        got = rows[pos - first]
        diffs = [abs(a - b) for a, b in zip(got, want)]
        worst, total, n = max(worst, max(diffs)), total + sum(diffs), n + len(diffs)
print(f"max |diff| {worst:.3g} (<= {max_tol}), mean {total / n:.3g} (<= {mean_tol})")
sys.exit(0 if worst <= float(max_tol) and total / n <= float(mean_tol) else 1)
PY
  verdict $? "fixture $dir on $device"
done

# 2. T = 0: speculative == greedy, token for token.
step "T = 0 speculative == greedy (bundled pair, $device)"
ids="1 17 300 42 1999 5 640 77"
spec_ids=$("$exe" generate --target models/tiny-qwen3 --draft models/tiny-eagle3 --ids "$ids" --temperature 0 \
             --max-new-tokens 48 --device "$device" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["ids"])')
plain_ids=$("$exe" generate --target models/tiny-qwen3 --ids "$ids" --temperature 0 --max-new-tokens 48 \
             --device "$device" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["ids"])')
[ -n "$spec_ids" ] && [ "$spec_ids" = "$plain_ids" ]
verdict $? "speculative ids == greedy ids ($spec_ids)"

# 3. Benchmarks run on the device.
step "bench forward ($device)"
"$exe" bench forward --device "$device" --quick
verdict $? "bench forward on $device"
step "bench e2e ($device)"
"$exe" bench e2e --device "$device" --target models/tiny-qwen3 --draft models/tiny-eagle3 --quick
verdict $? "bench e2e on $device"

[ "$failed" = 0 ] && echo "gpu-check: all checks passed on $device" || echo "gpu-check: FAILED (see above)"
exit "$failed"
