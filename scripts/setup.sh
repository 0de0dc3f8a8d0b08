#!/usr/bin/env bash
# Everything the test suite needs besides Rust: libtorch (.libtorch/), the Python P4Runtime
# modules (.p4py/), Debian's DPDK for the `dpdk` feature, the cached DGL environment
# (~/.cache/switchgnn, about 2.5 GB to download once) and the Python package built into .venv/.
# Idempotent.
set -euo pipefail
here="$(dirname "$0")"
bash "$here/libtorch.sh"
bash "$here/p4py.sh"
bash "$here/dpdk.sh"
bash "$here/dgl.sh" >/dev/null
bash "$here/python.sh"
