#!/bin/bash
# Stop the daemons started by start_slurm.sh, by their recorded PIDs only (TERM, then KILL after 10 s).
D=${SLURM_TEST_DIR:?set SLURM_TEST_DIR to a scratch directory}
for f in slurmd.bgpid slurmctld.bgpid munged.pid; do
  [ -s "$D/run/$f" ] || continue
  pid=$(cat "$D/run/$f")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" && echo "stopped ${f%%.*} ($pid)"
    for i in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -0 "$pid" 2>/dev/null && { kill -KILL "$pid"; echo "killed ${f%%.*} ($pid)"; }
  fi
  rm -f "$D/run/$f"
done
# put back the /etc/slurm/slurm.conf that start_slurm.sh replaced (or remove ours)
if grep -q "^# descbench-test-cluster $D\$" /etc/slurm/slurm.conf 2>/dev/null; then
  if [ -e "$D/etc-slurm.conf.orig" ]; then mv "$D/etc-slurm.conf.orig" /etc/slurm/slurm.conf; else rm -f /etc/slurm/slurm.conf; fi
fi
exit 0
