#!/usr/bin/env bash
# Everything the test suite needs besides Rust: libtorch (.libtorch/), the Python P4Runtime
# modules (.p4py/) and Debian's DPDK for the `dpdk` feature. Idempotent.
set -euo pipefail
here="$(dirname "$0")"
bash "$here/libtorch.sh"
bash "$here/p4py.sh"
bash "$here/dpdk.sh"
