#!/bin/bash
# Submit one ears-bench run to Slurm: the shard array (shard.sbatch), then the merge + gate job
# (merge.sbatch) with --dependency=afterok on the array. Runs from the repository root, so every
# relative path (configs/, build/, runs/, logs/) is the checkout's; it must be on a filesystem
# the compute nodes share. Arguments are sbatch options for the shard array, e.g.
#   scripts/slurm/submit.sh                                   # 8 shards of EARS_CONFIG on CPU
#   scripts/slurm/submit.sh --array=0-1 --cpus-per-task=1     # 2 shards, 1 CPU each
#   EARS_CONFIG=configs/gsm8k.yaml EARS_SET="target.device=cuda" EARS_RULES= \
#     scripts/slurm/submit.sh --gres=gpu:1                    # GPU nodes; the config's own gates
# Environment: EARS_CONFIG, EARS_SET, EARS_BENCH (shard.sbatch), EARS_RULES (merge.sbatch),
# EARS_RUN (default runs/<config name>-<date>-<time>), EARS_LOGS (the jobs' logs, default logs);
# SBATCH_PARTITION / SBATCH_ACCOUNT (sbatch's own) apply to both jobs.
# Prints "<array job id> <merge job id> <run directory>".
set -euo pipefail
cd "$(dirname "$0")/../.."
export EARS_CONFIG=${EARS_CONFIG:-configs/quickstart-greedy.yaml}
export EARS_RUN=${EARS_RUN:-runs/$(basename "$EARS_CONFIG" .yaml)-$(date +%Y%m%d-%H%M%S)}
[ -f "$EARS_CONFIG" ] || { echo "submit.sh: EARS_CONFIG=$EARS_CONFIG: no such file" >&2; exit 2; }
if [ -e "$EARS_RUN" ]; then echo "submit.sh: $EARS_RUN already exists; pass another EARS_RUN" >&2; exit 2; fi
logs=${EARS_LOGS:-logs}
mkdir -p "$logs"                             # sbatch --output needs the directory to exist
array=$(sbatch --parsable --output="$logs/%x-%A_%a.out" "$@" scripts/slurm/shard.sbatch)
array=${array%%;*}
merge=$(sbatch --parsable --output="$logs/%x-%j.out" --dependency=afterok:"$array" --kill-on-invalid-dep=yes \
        scripts/slurm/merge.sbatch "$EARS_RUN")
merge=${merge%%;*}
echo "$array $merge $EARS_RUN"
