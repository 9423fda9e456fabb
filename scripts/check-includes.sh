#!/usr/bin/env bash
# The include rules (docs/architecture.md), checked by ctest (include_rules) and so by CI:
#   1. harness/base/ (errors, strings, files, rng, UTF-8) includes nothing else of the repository;
#   2. decoders/, datasets/ and reports/ include nothing from harness/ except harness/base/;
#   2b. they are peers above the base layer: decoders/ includes neither reports/ nor datasets/,
#      and reports/ and datasets/ include nothing from decoders/ (reports/ and datasets/ include
#      nothing of each other either today; that is not checked);
#   3. no file includes <torch/torch.h>, <ATen/ATen.h> or <ATen/Functions.h> (every operator:
#      ~10 s of parsing per TU); <ATen/core/Tensor.h> and the per-operator <ATen/ops/*.h> instead;
#   4. inside harness/, each folder includes only the folders below it:
#        base < config < run < train < bench < cli   (cli/ is the top: main and the commands).
# Prints one line per violation (file:line: the include; the rule) and exits 1 when there is any.
set -uo pipefail
cd "${1:-$(dirname "$0")/..}" || exit 2
status=0
report() { echo "$1: $2"; status=1; }

while IFS= read -r hit; do
  report "$hit" "harness/base includes only harness/base/ (it is the bottom layer)"
done < <(grep -nE '^\s*#\s*include\s+"' harness/base/*.h harness/base/*.cpp | grep -vE '#\s*include\s+"harness/base/')

while IFS= read -r hit; do
  report "$hit" "decoders/, datasets/, reports/ include only harness/base/ from harness/ (dependencies point down)"
done < <(grep -nE '^\s*#\s*include\s+"harness/' decoders/*.h decoders/*.cpp datasets/*.h datasets/*.cpp \
                reports/*.h reports/*.cpp | grep -vE '#\s*include\s+"harness/base/')

while IFS= read -r hit; do
  report "$hit" "decoders/ includes neither reports/ nor datasets/ (peers above harness/base/)"
done < <(grep -nE '^\s*#\s*include\s+"(reports|datasets)/' decoders/*.h decoders/*.cpp)

while IFS= read -r hit; do
  report "$hit" "reports/ and datasets/ include nothing from decoders/ (peers above harness/base/)"
done < <(grep -nE '^\s*#\s*include\s+"decoders/' reports/*.h reports/*.cpp datasets/*.h datasets/*.cpp)

while IFS= read -r hit; do
  report "$hit" "never include <torch/torch.h>; include the ATen headers the file needs"
done < <(grep -rnE '^\s*#\s*include\s+<torch/torch\.h>' --include='*.h' --include='*.cpp' \
                harness decoders datasets reports tests)

while IFS= read -r hit; do
  report "$hit" "never include <ATen/ATen.h> or <ATen/Functions.h>; include <ATen/core/Tensor.h> and the <ATen/ops/NAME.h> of each at::NAME the file calls"
done < <(grep -rnE '^\s*#\s*include\s+<ATen/(ATen|Functions)\.h>' --include='*.h' --include='*.cpp' \
                harness decoders datasets reports tests)

# Rule 4: the harness/ folders below each one (a folder may always include itself).
declare -A below=(
  [config]="base"
  [run]="base config"
  [train]="base config run"
  [bench]="base config run train"
)
for dir in "${!below[@]}"; do
  allowed="${below[$dir]} $dir"
  while IFS= read -r hit; do
    inc=$(sed -E 's#.*"harness/([^/]+)/.*#\1#' <<<"$hit")
    [[ " $allowed " == *" $inc "* ]] || report "$hit" "harness/$dir includes only harness/{${allowed// /,}}/ (base < config < run < train < bench < cli)"
  done < <(grep -nE '^\s*#\s*include\s+"harness/' harness/"$dir"/*.h harness/"$dir"/*.cpp 2>/dev/null)
done
while IFS= read -r f; do
  report "$f" "harness/ holds only its folders (base, config, run, train, bench, cli): move the file into one"
done < <(find harness -maxdepth 1 -type f)

[ "$status" = 0 ] && echo "include rules: ok"
exit "$status"
