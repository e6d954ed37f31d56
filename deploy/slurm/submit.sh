#!/usr/bin/env bash
# Submit a sweep or campaign array and, after it, the triage job of all its
# shards (--dependency=afterany): one command, two jobs.
#
#   deploy/slurm/submit.sh sweep|campaign [SBATCH_OPTION...] -- [TARGET_OPTION...] [-- TASK_OPTION...]
#
# SBATCH_OPTIONs go to the array (e.g. --array=0-3: SHARDS follows it);
# TARGET_OPTIONs to the array and to the triage (--loom-opt, --target,
# --pass-args, --timeout, --profile ...); TASK_OPTIONs to the array only
# (a sweep's --start/--count).  Prints the job ids:
#   array=JOB triage=JOB
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
kind=${1:-}
case "$kind" in
  sweep | campaign) shift ;;
  *)
    echo "usage: submit.sh sweep|campaign [SBATCH_OPTION...] -- [TARGET_OPTION...] [-- TASK_OPTION...]" >&2
    exit 2
    ;;
esac
sbatch_options=() target_options=() task_options=()
while (($#)) && [ "$1" != -- ]; do sbatch_options+=("$1"); shift; done
(($#)) && shift
while (($#)) && [ "$1" != -- ]; do target_options+=("$1"); shift; done
(($#)) && shift
task_options=("$@")

# --array=0-(N-1) sets the number of shards of a sweep (sbatch passes the environment on)
for option in "${sbatch_options[@]}"; do
  if [[ $option =~ ^--array=0-([0-9]+)$ ]]; then
    export SHARDS=$((BASH_REMATCH[1] + 1))
  fi
done
array=$(sbatch --parsable "${sbatch_options[@]}" "$here/$kind.sbatch" \
  "${target_options[@]}" "${task_options[@]}")
array=${array%%;*}  # --parsable prints JOB or JOB;CLUSTER
triage=$(sbatch --parsable --dependency="afterany:$array" "$here/triage.sbatch" "$kind" "${target_options[@]}")
echo "array=$array triage=${triage%%;*}"
