#!/usr/bin/env bash
# A throwaway single-node Slurm cluster in a folder of its own: no systemd, no
# root services, nothing outside DIR (for the tests, for a laptop, and as the
# way to try deploy/slurm/*.sbatch).
#
#   deploy/slurm/local-cluster.sh start [DIR]    # then: export SLURM_CONF=DIR/slurm.conf
#   deploy/slurm/local-cluster.sh status [DIR]
#   deploy/slurm/local-cluster.sh stop [DIR]
#
# DIR defaults to ${TMPDIR:-/tmp}/loomfuzz-slurm-$(id -u).  It holds munge's
# key, socket and pid file, slurm.conf (one node named after `hostname -s`
# at 127.0.0.1, free ports, select/cons_tres, proctrack/linuxproc, no
# accounting), the state and spool folders and the logs.  The daemons
# (munged, slurmctld, slurmd) run as the calling user (SlurmUser and SlurmdUser:
# root when run as root; as another user its jobs run as that user).  Needs
# the Debian packages slurmctld slurmd slurm-client
# munge on PATH (.ci/setup installs them; a user may need /usr/sbin on PATH).
#
# Exit status: 0 done; 1 a daemon failed to start (its log is named, and
# everything this call started is stopped again); 2 usage: a missing
# package, a cluster already running in DIR.
set -euo pipefail

me=local-cluster.sh
action=${1:-}
dir=${2:-${TMPDIR:-/tmp}/loomfuzz-slurm-$(id -u)}

usage() {
  echo "usage: $me start|stop|status [DIR]" >&2
  exit 2
}

# pid in FILE when that process is alive, else nothing
alive() {
  local pid
  [ -s "$1" ] || return 1
  pid=$(<"$1")
  [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

daemons=(slurmd slurmctld munged)  # stop order

# Stop the cluster in $dir: cancel its jobs (their steps would outlive the
# daemons), shut the daemons down (TERM, then KILL after 5 s), and kill any job
# step (slurmstepd) of this cluster still there.
stop_all() {
  local name pid n conf="$dir/slurm.conf"
  if [ -f "$conf" ] && alive "$dir/slurmctld.pid" >/dev/null; then
    if [ -n "$(SLURM_CONF=$conf squeue -h -o %i 2>/dev/null)" ]; then
      SLURM_CONF=$conf scancel --quiet --full --user="$(id -un)" 2>/dev/null || true
      [ "$(id -u)" != 0 ] || SLURM_CONF=$conf scancel --quiet --full --partition=local 2>/dev/null || true
      for ((n = 0; n < 150; n++)); do
        [ -z "$(SLURM_CONF=$conf squeue -h -o %i 2>/dev/null)" ] && break
        sleep 0.1
      done
    fi
    SLURM_CONF=$conf timeout 5 scontrol shutdown >/dev/null 2>&1 || true
  fi
  for name in "${daemons[@]}"; do
    pid=$(alive "$dir/$name.pid") || continue
    kill -TERM "$pid" 2>/dev/null || true
    for ((n = 0; n < 50; n++)); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
  done
  rm -f "$dir"/{slurmd,slurmctld,munged}.pid
  local proc
  for proc in /proc/[0-9]*; do
    [[ $(cat "$proc/comm" 2>/dev/null) == slurmstepd ]] || continue
    grep -qzx "SLURM_CONF=$conf" "$proc/environ" 2>/dev/null && kill -KILL "${proc#/proc/}" 2>/dev/null
  done
  return 0
}

status() {
  local name pid up=0
  for name in munged slurmctld slurmd; do
    if pid=$(alive "$dir/$name.pid"); then
      echo "$name: running (pid $pid)"
      up=$((up + 1))
    else
      echo "$name: stopped"
    fi
  done
  if ((up == 3)); then
    SLURM_CONF="$dir/slurm.conf" sinfo -h -N -o "node %N: %T, %c CPUs" 2>/dev/null || true
    echo "export SLURM_CONF=$dir/slurm.conf"
    return 0
  fi
  return 1
}

# Free TCP ports on 127.0.0.1, from the kernel (bind to port 0).
free_ports() {
  python3 - "$1" <<'EOF'
import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))
EOF
}

start() {
  local tool missing=()
  for tool in munged mungekey slurmctld slurmd sbatch scontrol sinfo python3; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
  done
  if ((${#missing[@]})); then
    echo "$me: error: ${missing[*]} not found on PATH: install the Debian packages slurmctld slurmd" \
      "slurm-client munge (.ci/setup does; the daemons are in /usr/sbin)" >&2
    exit 2
  fi
  local name pid
  for name in munged slurmctld slurmd; do
    if pid=$(alive "$dir/$name.pid"); then
      echo "$me: error: a cluster is already running in $dir ($name pid $pid): $me stop $dir first" >&2
      exit 2
    fi
  done

  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  # From here on a failure stops whatever this call started.
  trap 'stop_all' ERR
  local user host cpus memory ports ctld_port slurmd_port
  user=$(id -un)
  host=$(hostname -s)
  cpus=$(nproc)
  memory=$(awk '/^MemTotal:/ {print int($2 / 1024)}' /proc/meminfo)
  read -r ctld_port slurmd_port < <(free_ports 2)
  rm -rf "$dir/state" "$dir/spool" "$dir/munge"
  mkdir -p "$dir/state" "$dir/spool/$host" "$dir/log" "$dir/munge"
  # munged refuses a socket folder that others can write, and clients must reach the socket
  chmod 0755 "$dir" "$dir/munge"
  [ -s "$dir/munge.key" ] || mungekey --create --keyfile="$dir/munge.key" >/dev/null
  chmod 0600 "$dir/munge.key"

  cat >"$dir/slurm.conf" <<EOF
# written by $me start $dir
ClusterName=loomfuzz-local
SlurmctldHost=$host(127.0.0.1)
SlurmUser=$user
SlurmdUser=$user
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket.2
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
SwitchType=switch/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
ReturnToService=2
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1
MinJobAge=300
KillWait=5
InactiveLimit=0
SlurmdTimeout=60
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$memory State=UNKNOWN
PartitionName=local Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF

  # --force: munged wants every folder above its socket open to all (a pytest or mktemp
  # folder is 0700); the calling user's own clients reach it all the same
  munged --force --key-file="$dir/munge.key" --socket="$dir/munge/munge.socket.2" \
    --pid-file="$dir/munged.pid" --log-file="$dir/log/munged.log" --seed-file="$dir/munge.seed" \
    || fail munged "$dir/log/munged.log"
  SLURM_CONF="$dir/slurm.conf" slurmctld -f "$dir/slurm.conf" -i >/dev/null 2>>"$dir/log/slurmctld.log" \
    || fail slurmctld "$dir/log/slurmctld.log"
  SLURM_CONF="$dir/slurm.conf" slurmd -f "$dir/slurm.conf" >/dev/null 2>>"$dir/log/slurmd.log" \
    || fail slurmd "$dir/log/slurmd.log"
  # the node is idle about a second later
  local n state=""
  for ((n = 0; n < 150; n++)); do
    state=$(SLURM_CONF="$dir/slurm.conf" sinfo -h -N -o %T 2>/dev/null || true)
    [[ $state == idle* ]] && break
    sleep 0.1
  done
  if [[ $state != idle* ]]; then
    fail "the node (state '${state:-unknown}' after 15 s)" "$dir/log/slurmd.log"
  fi
  trap - ERR
  echo "$me: cluster up in $dir (node $host, $cpus CPUs): export SLURM_CONF=$dir/slurm.conf"
}

fail() {
  trap - ERR
  echo "$me: error: $1 did not start; see $2" >&2
  stop_all
  exit 1
}

case "$action" in
  start) start ;;
  stop)
    stop_all
    echo "$me: stopped ($dir)"
    ;;
  status) status ;;
  *) usage ;;
esac
