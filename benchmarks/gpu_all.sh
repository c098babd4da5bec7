#!/usr/bin/env bash
# The GPU check of a session on a CUDA machine (6 min on one H200 with 16 cores, at most 7.5 by its step limits), from the
# repository root. Every figure goes to $OUT (default /tmp/gpu_out) as JSON and logs:
#
#   1. benchmarks/gpu_check.py: HardNet, SOSNet and HyNet patches/s on the GPU at each batch_mem_mb
#      and engine and on the CPU's cores, GPU rows vs CPU rows, KeyNet images/s and keypoints;
#   2. benchmarks/bench_pipelines.py --device cuda --compare-cpu: the joint networks (images/s) and
#      the torch matchers (pairs/s), GPU outputs vs CPU outputs;
#   3. the fusion study on the demo's first $FUSION_SCENES scenes (default 4; benchmarks/bench_learned.py
#      fusion, random weights) through snakemake on the GPU and, with CUDA hidden, on the CPU; then
#      every report table of the two runs compared (benchmarks/compare_tables.py). On all 8 scenes
#      the CPU run took 188 s on 16 cores (2026-11-28), beyond this script's budget.
#
# Needs torch with CUDA, kornia, snakemake and descbench's other dependencies importable
# (PYTHONPATH); nothing is downloaded. Each step has its own time limit, so a failing step leaves
# the others' figures.
set -uo pipefail
OUT=${OUT:-/tmp/gpu_out}
CORES=${CORES:-$(nproc)}
FUSION_SCENES=${FUSION_SCENES:-4}
mkdir -p "$OUT"
export PYTHONPATH="$PWD/workflow${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
py=${PYTHON:-python3}
step() { echo "=== $1 ($(date -u +%T))"; }

step versions
nvidia-smi -L
$py -c "import torch, kornia, cv2, numba, numpy, snakemake; print('torch', torch.__version__, 'kornia', kornia.__version__, 'cv2', cv2.__version__, 'numba', numba.__version__, 'numpy', numpy.__version__, 'snakemake', snakemake.__version__)"

step "gpu_check (HardNet, SOSNet, HyNet, KeyNet)"
timeout 150 $py benchmarks/gpu_check.py --families hardnet,sosnet,hynet --batch-mem-mb 64,256,1024 --repeats 2 \
    --json "$OUT/gpu_check.json" > "$OUT/gpu_check.log" 2>&1; echo "rc=$?"; tail -n 60 "$OUT/gpu_check.log"

step "bench_pipelines (joint networks, matchers)"
timeout 60 $py benchmarks/bench_pipelines.py --device cuda --compare-cpu --threads "$CORES" \
    --json "$OUT/pipelines_gpu.json" > "$OUT/pipelines.log" 2>&1; echo "rc=$?"; tail -n 40 "$OUT/pipelines.log"

step "fusion study on the demo, GPU"
rm -rf /tmp/fusion_gpu /tmp/fusion_cpu; mkdir -p /tmp/fusion_gpu /tmp/fusion_cpu
timeout 90 $py benchmarks/bench_learned.py fusion --scenes "$FUSION_SCENES" --cores "$CORES" --workdir /tmp/fusion_gpu \
    --json "$OUT/fusion_gpu.json" > "$OUT/fusion_gpu.log" 2>&1; echo "rc=$?"; tail -n 25 "$OUT/fusion_gpu.log"

step "fusion study on the demo, CPU (CUDA hidden)"
CUDA_VISIBLE_DEVICES= timeout 120 $py benchmarks/bench_learned.py fusion --scenes "$FUSION_SCENES" --cores "$CORES" --workdir /tmp/fusion_cpu \
    --json "$OUT/fusion_cpu.json" > "$OUT/fusion_cpu.log" 2>&1; echo "rc=$?"; tail -n 25 "$OUT/fusion_cpu.log"

step "fusion study: GPU tables vs CPU tables"
$py benchmarks/compare_tables.py /tmp/fusion_gpu/fusion-*/results/fusion_study/report \
    /tmp/fusion_cpu/fusion-*/results/fusion_study/report 2>&1 | tee "$OUT/fusion_compare.txt"
step done
