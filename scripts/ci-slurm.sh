#!/usr/bin/env bash
# CI stage (.ci/run): docs/scale-out.md's Slurm recipe, verbatim, on a real one-node Slurm cluster.
#   scripts/ci-slurm.sh [BUILD_DIR]        (default build; needs root for apt-get and the daemons)
# 1. docs/scale-out.md quotes scripts/slurm/* and configs/gates.txt byte for byte;
# 2. installs Debian's slurm-wlm + munge when missing; starts munged, slurmctld and slurmd on
#    localhost from a temporary directory (own key, socket, ports, state; no cgroups, no systemd);
# 3. scripts/slurm/submit.sh: 2 shards of configs/quickstart-greedy.yaml (dataset.n=EARS_CI_N)
#    as a job array, the merge + gate job with --dependency=afterok on it;
# 4. requeues shard 0 (scontrol requeue) once it runs and has written results: it must resume;
# 5. the merged results.jsonl must equal an unsharded run's, record by record (outputs and
#    acceptance counts, not timings), and the merge job's gate must pass.
# Stops the daemons it started by PID and removes its temporary directory on any exit.
# Exit 0 pass, 1 with one line "ci-slurm: FAIL: reason" otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${1:-build}
BIN=$ROOT/$BUILD/ears-bench
unset EARS_CONFIG EARS_SET EARS_RUN EARS_RULES EARS_LOGS EARS_BENCH   # the recipe's defaults, whatever the caller set
N=${EARS_CI_N:-48}                        # requests: 24 per shard, 2 arms -> 48 results per shard
t0=$(date +%s)
T=
pids=()

say() { echo "ci-slurm [+$(( $(date +%s) - t0 ))s] $*"; }
die() {
  trap - ERR
  if [ -n "$T" ] && [ -d "$T" ]; then   # the daemons' and jobs' own words first, for the CI log
    for f in "$T"/logs/* "$T"/slurmctld.log "$T"/slurmd.log; do
      if [ -f "$f" ]; then echo "---- $f (tail)" >&2; tail -n 15 "$f" >&2; fi
    done
  fi
  echo "ci-slurm: FAIL: $*" >&2       # the last line: the reason
  exit 1
}
trap 'die "line $LINENO: \"$BASH_COMMAND\" exited $?"' ERR

cleanup() {
  local rc=$?
  trap - ERR
  if [ ${#pids[@]} -gt 0 ]; then
    # Jobs still queued or running (a failure midway) go first, through Slurm itself.
    [ -n "${array:-}" ] && scancel "$array" "${merge:-}" 2>/dev/null && sleep 2
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do
      for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
      kill -KILL "$p" 2>/dev/null || true
      wait "$p" 2>/dev/null || true
    done
  fi
  [ -n "$T" ] && [ -z "${EARS_CI_KEEP:-}" ] && rm -rf "$T"
  exit "$rc"
}
trap cleanup EXIT

[ -x "$BIN" ] || die "$BIN not found; build first (make build, or .ci/run)"

# ---- 1. the doc and the files it quotes are one source
python3 - <<'EOF' || die "docs/scale-out.md does not quote scripts/slurm/* and configs/gates.txt verbatim; paste the files again"
import sys
doc = open("docs/scale-out.md").read()
missing = [f for f in ("scripts/slurm/shard.sbatch", "scripts/slurm/merge.sbatch", "scripts/slurm/submit.sh",
                       "configs/gates.txt") if open(f).read() not in doc]
if missing:
    print("ci-slurm: not verbatim in docs/scale-out.md: " + ", ".join(missing), file=sys.stderr)
    sys.exit(1)
EOF

# ---- 2. a one-node cluster on localhost
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v munged >/dev/null; then
  say "installing slurm-wlm + munge"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq slurm-wlm munge >/dev/null 2>&1 ||
    { apt-get update -qq && apt-get install -y -qq slurm-wlm munge >/dev/null; } ||
    die "apt-get install slurm-wlm munge failed"
fi
T=$(mktemp -d /tmp/ears-ci-slurm.XXXXXX)
chmod 755 "$T"                            # munged wants its socket directory searchable by all
mkdir -p "$T/state" "$T/spool" "$T/logs" "$T/runs"
node=$(hostname -s)
read -r ctld_port slurmd_port < <(python3 -c '
import socket
ss = [socket.socket() for _ in range(2)]
for s in ss: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in ss])')
head -c 1024 /dev/urandom > "$T/munge.key"
chmod 600 "$T/munge.key"
cat > "$T/slurm.conf" <<EOF
ClusterName=ears-ci
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$T/munge.sock,cred_expire=10
SchedulerParameters=sched_interval=2,bf_interval=2
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool
SlurmctldPidFile=$T/slurmctld.pid
SlurmdPidFile=$T/slurmd.pid
SlurmctldLogFile=$T/slurmctld.log
SlurmdLogFile=$T/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
SwitchType=switch/none
MailProg=/bin/true
NodeName=$node NodeAddr=127.0.0.1 CPUs=$(nproc) RealMemory=1000 State=UNKNOWN
PartitionName=ci Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF=$T/slurm.conf
munged -F --socket="$T/munge.sock" --key-file="$T/munge.key" --log-file="$T/munged.log" \
  --pid-file="$T/munged.pid" --seed-file="$T/munged.seed" >"$T/munged.out" 2>&1 &
pids+=($!)
for _ in $(seq 50); do [ -S "$T/munge.sock" ] && break; sleep 0.1; done
[ -S "$T/munge.sock" ] || die "munged did not start: $(tail -n 1 "$T/munged.out")"
slurmctld -D -c -f "$T/slurm.conf" >"$T/slurmctld.out" 2>&1 &
pids+=($!)
slurmd -D -N "$node" -f "$T/slurm.conf" >"$T/slurmd.out" 2>&1 &
pids+=($!)
state=
for _ in $(seq 150); do
  state=$(sinfo -h -n "$node" -o %t 2>/dev/null || true)
  [ "$state" = idle ] && break
  sleep 0.2
done
[ "$state" = idle ] || die "node $node is '${state:-unreachable}' after 30 s, not idle"
say "cluster up: munged, slurmctld, slurmd (pids ${pids[*]}), node $node with $(nproc) CPUs"

# ---- the unsharded reference (1 thread, like each shard)
"$BIN" run configs/quickstart-greedy.yaml --set dataset.n="$N" --out "$T/reference" --threads 1 --quiet \
  >"$T/reference.out" 2>&1 || die "the unsharded reference run failed: $(tail -n 1 "$T/reference.out")"
say "unsharded reference: $(wc -l < "$T/reference/results.jsonl") results"

# ---- 3. the recipe: array + merge job
run=$T/runs/ci
read -r array merge _ < <(EARS_BENCH="$BIN" EARS_SET="dataset.n=$N" EARS_RUN="$run" EARS_LOGS="$T/logs" \
  scripts/slurm/submit.sh --array=0-1 --cpus-per-task=1 --time=00:10:00)
[ -n "${merge:-}" ] || die "scripts/slurm/submit.sh printed no job ids"
say "submitted array $array (2 shards) and merge job $merge (afterok:$array)"

# ---- 4. requeue shard 0 mid-run
per_shard=$N                              # N/2 requests x 2 arms
lines() { [ -f "$1" ] && wc -l < "$1" || echo 0; }
at_requeue=0
for _ in $(seq 1200); do
  st=$(squeue -h -j "${array}_0" -o %T 2>/dev/null || true)
  at_requeue=$(lines "$run/shard-0/results.jsonl")
  [ "$st" = RUNNING ] && [ "$at_requeue" -ge 2 ] && break
  [ "$at_requeue" -ge "$per_shard" ] && die "shard 0 finished before it could be requeued; raise EARS_CI_N"
  sleep 0.1
done
[ "$at_requeue" -ge 2 ] || die "shard 0 wrote no results within 120 s (state '${st:-gone}')"
scontrol requeue "${array}_0"
say "requeued ${array}_0 with $at_requeue of $per_shard results written"

# ---- wait for the merge job
for _ in $(seq 300); do
  [ -z "$(squeue -h -j "$array,$merge" -o %i 2>/dev/null || echo x)" ] && break
  sleep 1
done
info=$(scontrol -o show job "$merge" 2>/dev/null || true)
[[ $info == *JobState=COMPLETED* && $info == *ExitCode=0:0* ]] ||
  die "merge job $merge: $(grep -o 'JobState=[A-Z_]* Reason=[^ ]*' <<<"$info" || echo 'not finished within 300 s') $(grep -o 'ExitCode=[0-9:]*' <<<"$info" || true)"
say "array and merge job done; merge log: $(grep -E '^(PASS|FAIL) ->' "$T"/logs/ears-merge-*.out || echo '(no gate line)')"

# ---- 5. the checks
restarts=$(scontrol -o show job "${array}_0" | grep -o 'Restarts=[0-9]*' || true)
[ "$restarts" = Restarts=1 ] || die "shard 0: $restarts after scontrol requeue, expected Restarts=1"
python3 - "$T/reference" "$run" "$at_requeue" <<'EOF' || die "the merged run differs from the unsharded run (see above)"
import json, sys, pathlib
ref, run, at_requeue = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), int(sys.argv[3])
def results(d):
    out = {}
    for line in (d / "results.jsonl").read_text().splitlines():
        r = json.loads(line)
        key = (r["arm"], r["request_id"], r.get("repeat", 0))
        if key in out:
            sys.exit(f"ci-slurm: {d}: {key} recorded twice")
        out[key] = r
    return out
fields = ("text", "output_ids", "output_tokens", "steps", "accepted", "corrections", "bonus", "pardoned",
          "correct", "em", "f1", "accept_length_hist", "error")
a, b = results(ref), results(run / "merged")
if a.keys() != b.keys():
    sys.exit(f"ci-slurm: {len(a)} reference results, {len(b)} merged; keys differ: {sorted(a.keys() ^ b.keys())[:4]}")
bad = [(k, f) for k in sorted(a) for f in fields if a[k].get(f) != b[k].get(f)]
if bad:
    sys.exit(f"ci-slurm: {len(bad)} field(s) differ, first {bad[0][1]} of {bad[0][0]}")
meta = json.loads((run / "shard-0" / "run_meta.json").read_text())
resumed = meta.get("environment", {}).get("resumed", [])
if len(resumed) != 1 or not meta.get("complete"):
    sys.exit(f"ci-slurm: shard 0 after the requeue: resumed {len(resumed)} time(s), complete={meta.get('complete')}")
done0 = len(results(run / "shard-0"))
if at_requeue >= done0:
    sys.exit(f"ci-slurm: shard 0 had all {done0} results before the requeue: nothing was resumed")
report = json.loads((run / "merged" / "report.json").read_text())
if report.get("partial"):
    sys.exit("ci-slurm: the merged report is partial")
gate = json.loads((run / "merged" / "gate.json").read_text())
if not gate.get("all_passed"):
    sys.exit("ci-slurm: the merge job's gate did not pass")
print(f"ci-slurm: merged == unsharded: {len(a)} of {len(a)} results equal ({', '.join(fields[:6])}, ...); "
      f"shard 0 requeued at {at_requeue} of {done0} results, resumed once; gate passed")
EOF
say "PASS"
