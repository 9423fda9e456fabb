#!/usr/bin/env bash
# Runs every libFuzzer target for a bounded time on a working copy of its seed corpus and
# prints a Markdown summary (executions, corpus size, crashes). Exit 1 on any crash.
# Usage: scripts/fuzz.sh BUILD_DIR SECONDS_PER_TARGET
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-fuzz}
seconds=${2:-60}
targets=(safetensors_header tokenizer config scoring)
summary="$build/fuzz-summary.md"
status=0
printf '| target | seconds | executions | corpus | crashes |\n| --- | --- | --- | --- | --- |\n' >"$summary"
for t in "${targets[@]}"; do
  bin="$build/fuzz_$t"
  work="$build/corpus/$t"
  artifacts="$build/artifacts/$t/"
  mkdir -p "$work" "$artifacts"
  log="$build/fuzz_$t.log"
  echo "== fuzz_$t for ${seconds}s (log: $log)"
  ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1 \
    "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=4096 -print_final_stats=1 \
    -artifact_prefix="$artifacts" "$work" "tests/fuzz/corpus/$t" >"$log" 2>&1
  rc=$?
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  corpus=$(find "$work" -type f | wc -l)
  crashes=$(find "$artifacts" -type f | wc -l)
  if [ "$rc" -ne 0 ] || [ "$crashes" -ne 0 ]; then
    status=1
    echo "fuzz_$t: FAILED (exit $rc); reproducer(s) in $artifacts; last lines of $log:" >&2
    tail -n 30 "$log" >&2
  fi
  printf '| `fuzz_%s` | %s | %s | %s | %s |\n' "$t" "$seconds" "$execs" "$corpus" "$crashes" >>"$summary"
done
cat "$summary"
exit $status
