#!/usr/bin/env bash
# Everything the test suite needs besides Rust: libtorch (.libtorch/) and the Python P4Runtime
# modules (.p4py/). Idempotent.
set -euo pipefail
here="$(dirname "$0")"
bash "$here/libtorch.sh"
bash "$here/p4py.sh"
