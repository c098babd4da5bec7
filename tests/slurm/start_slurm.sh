#!/bin/bash
# Start a throw-away single-node SLURM for tests: munged, slurmctld, slurmd (no systemd, as root).
#   SLURM_TEST_DIR=/scratch/dir tests/slurm/start_slurm.sh
#   . $SLURM_TEST_DIR/env.sh        # exports SLURM_CONF: sinfo/sbatch/squeue/snakemake use this cluster
#   SLURM_TEST_DIR=/scratch/dir tests/slurm/stop_slurm.sh
# Every state/log/pid file goes under $SLURM_TEST_DIR. The config is also copied to
# /etc/slurm/slurm.conf (a previous file is saved in $SLURM_TEST_DIR and put back by stop_slurm.sh):
# the executor plugin's job step (snakemake-executor-plugin-slurm-jobstep 0.6.1) removes SLURM_CONF
# from the environment of the `srun` it runs inside each job, so srun only finds the default path.
# One test cluster per machine at a time.
# The daemons' PIDs are recorded in $SLURM_TEST_DIR/run/*.pid; stop_slurm.sh stops exactly those.
# Ports: free ones are picked unless SLURMCTLD_PORT / SLURMD_PORT are set.
set -euo pipefail
D=${SLURM_TEST_DIR:?set SLURM_TEST_DIR to a scratch directory}
mkdir -p "$D"
D=$(cd "$D" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
for b in munged mungekey slurmctld slurmd sinfo; do
  command -v $b >/dev/null || [ -x /usr/sbin/$b ] || { echo "missing $b: apt-get install -y slurmctld slurmd slurm-client munge" >&2; exit 3; }
done
export PATH=$PATH:/usr/sbin
mkdir -p "$D/state/ctld" "$D/state/d" "$D/log" "$D/run" "$D/munge"
chmod 700 "$D/munge"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
CTLD_PORT=${SLURMCTLD_PORT:-$(free_port)}
D_PORT=${SLURMD_PORT:-$(free_port)}
while [ "$D_PORT" = "$CTLD_PORT" ]; do D_PORT=$(free_port); done
CPUS=$(nproc)
MEM_MB=$(free -m | awk '/^Mem:/ {printf "%d", $2 * 0.8}')
sed -e "s|@DIR@|$D|g" -e "s|@CTLD_PORT@|$CTLD_PORT|g" -e "s|@D_PORT@|$D_PORT|g" \
    -e "s|@CPUS@|$CPUS|g" -e "s|@MEM_MB@|$MEM_MB|g" "$HERE/slurm.conf.in" > "$D/slurm.conf"
if [ -e /etc/slurm/slurm.conf ]; then
  if grep -q '^# descbench-test-cluster ' /etc/slurm/slurm.conf; then
    other=$(sed -n 's/^# descbench-test-cluster //p' /etc/slurm/slurm.conf)
    if [ "$other" != "$D" ] && [ -s "$other/run/slurmctld.bgpid" ] && kill -0 "$(cat "$other/run/slurmctld.bgpid")" 2>/dev/null; then
      echo "another descbench test cluster is running ($other): stop it first" >&2; exit 4
    fi
  elif [ ! -e "$D/etc-slurm.conf.orig" ]; then
    cp -p /etc/slurm/slurm.conf "$D/etc-slurm.conf.orig"
  fi
fi
mkdir -p /etc/slurm
{ echo "# descbench-test-cluster $D"; cat "$D/slurm.conf"; } > /etc/slurm/slurm.conf
export SLURM_CONF=$D/slurm.conf
echo "export SLURM_CONF=$D/slurm.conf" > "$D/env.sh"

# munge: own key and socket; as root it needs --force. It forks and writes its pid file.
[ -s "$D/munge/munge.key" ] || mungekey --create --keyfile="$D/munge/munge.key"
munged --force --socket="$D/munge/munge.socket" --key-file="$D/munge/munge.key" \
  --pid-file="$D/run/munged.pid" --log-file="$D/log/munged.log" --seed-file="$D/munge/munged.seed"
for i in $(seq 1 20); do [ -S "$D/munge/munge.socket" ] && break; sleep 0.25; done
munge -S "$D/munge/munge.socket" -n | unmunge -S "$D/munge/munge.socket" >/dev/null

# slurm daemons in foreground mode (-D), backgrounded here so $! is the daemon's PID
nohup slurmctld -D -i -f "$SLURM_CONF" >>"$D/log/slurmctld.out" 2>&1 &
echo $! > "$D/run/slurmctld.bgpid"
sleep 1
nohup slurmd -D -N localhost -f "$SLURM_CONF" >>"$D/log/slurmd.out" 2>&1 &
echo $! > "$D/run/slurmd.bgpid"
for i in $(seq 1 60); do
  if sinfo -h -o '%T' 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; then
    echo "SLURM up: $CPUS CPUs, $MEM_MB MB, ports $CTLD_PORT/$D_PORT, SLURM_CONF=$SLURM_CONF"
    sinfo
    exit 0
  fi
  sleep 0.5
done
echo "SLURM did not come up; see $D/log/" >&2
tail -20 "$D/log/slurmctld.log" "$D/log/slurmd.log" >&2 || true
exit 1
