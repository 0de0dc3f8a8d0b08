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
# The DGL environment needs CPython 3.11 and a 2.5 GB download; without it only the DGL tests
# skip (saying why), so outside CI a failure here is a warning.
if ! bash "$here/dgl.sh" >/dev/null; then
  if [ "${CI:-}" = "true" ]; then
    exit 1
  fi
  echo "warning: no DGL environment (see the error above); the DGL tests will skip" >&2
fi
# The tests check results, not speed: the dev build, which shares cargo's build of the
# workspace (`bash scripts/python.sh` alone builds the optimised package users train with).
bash "$here/python.sh" --dev
