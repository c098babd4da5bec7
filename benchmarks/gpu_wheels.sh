#!/usr/bin/env bash
# Download (here, with network) the wheels that benchmarks/gpu_all.sh needs on a CUDA machine
# without network whose Python 3.12 already has torch, numpy, numba, pandas, pyarrow, opencv-python-headless,
# scikit-image, pyyaml, threadpoolctl, matplotlib and psutil: kornia and snakemake with their
# dependencies, pinned to the versions CI tests. About 33 MB into ${1:-.whl}.
#
# Install them there with
#   python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
#   export PYTHONPATH=/tmp/site
#
# opencv-contrib-python-headless (about 70 MB) is left out: the checks use no contrib detector or
# descriptor, and the machine's opencv-python-headless provides SIFT.
set -euo pipefail
dest=${1:-.whl}
mkdir -p "$dest"
plat=(--only-binary=:all: --python-version 3.12 --implementation cp --no-deps -d "$dest"
      --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64
      --platform manylinux2014_x86_64 --platform manylinux1_x86_64)
for pkg in kornia==0.9.0 kornia-rs==0.2.0 \
    snakemake==9.27.1 snakemake-interface-common==1.23.0 snakemake-interface-executor-plugins==9.4.0 \
    snakemake-interface-logger-plugins==2.1.0 snakemake-interface-report-plugins==1.3.0 \
    snakemake-interface-scheduler-plugins==2.0.2 snakemake-interface-storage-plugins==4.4.1 \
    annotated-types==0.7.0 argparse-dataclass==2.0.0 conda-inject==1.3.2 configargparse==1.9.0 docutils==0.22.4 \
    dpath==2.2.0 fastjsonschema==2.22.3 gitdb==4.0.12 gitpython==3.2.1 greenlet==3.5.6 humanfriendly==10.0 \
    immutables==0.21 jsonschema==4.26.0 jsonschema-specifications==2025.9.1 jupyter-core==5.9.1 nbformat==5.11.1 \
    platformdirs==4.14.7 pulp==3.3.2 pydantic==2.13.4 pydantic-core==2.46.4 referencing==0.37.0 rpds-py==0.30.0 \
    smart-open==7.7.1 smmap==5.0.3 sqlalchemy==2.0.58 sqlmodel==0.0.37 tenacity==9.2.1 throttler==1.2.3 \
    traitlets==5.15.0 typing-inspection==0.4.2 yte==1.9.4; do
    python3 -m pip download -q "${plat[@]}" "$pkg"
done
# connection-pool has no wheel on PyPI (pure Python): build one
python3 -m pip wheel -q --no-deps -w "$dest" connection-pool==0.0.3
ls "$dest" | wc -l
