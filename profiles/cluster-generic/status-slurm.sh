#!/usr/bin/env bash
# Status script for profiles/cluster-generic on SLURM: `status-slurm.sh <jobid>` prints exactly one
# of running / success / failed (what snakemake-executor-plugin-cluster-generic expects).
# Tries sacct (clusters with accounting), then squeue and scontrol (no accounting: these know a
# finished job for MinJobAge seconds, 300 by default). A job no command knows any more counts as
# failed, so Snakemake reruns it (retries) instead of waiting forever.
# For another scheduler, write the same contract with its query command (qstat -f, bjobs, ...).
jobid=$1
state=$(sacct -j "$jobid" -X -n -P -o State 2>/dev/null | head -n 1)
[ -n "$state" ] || state=$(squeue -h -t all -j "$jobid" -o %T 2>/dev/null | head -n 1)
[ -n "$state" ] || state=$(scontrol show job "$jobid" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' | head -n 1)
case "$state" in
  COMPLETED*) echo success ;;
  PENDING*|CONFIGURING*|RUNNING*|COMPLETING*|SUSPENDED*|REQUEUE*|RESIZING*|STAGE_OUT*|SIGNALING*|RESV_DEL_HOLD*|PREEMPTED*) echo running ;;
  *) echo failed ;;  # FAILED, TIMEOUT, CANCELLED, OUT_OF_MEMORY, NODE_FAIL, BOOT_FAIL, DEADLINE, unknown
esac
