#!/usr/bin/env bash
# A throwaway Python environment with PyTorch and PyTorch Geometric for the trainer benchmark
# (trainer/benches/reference.rs), never for the tests. Created once in .cache/pyg-venv (or
# $SWITCHGNN_PYG_VENV) and reused; delete the folder to get rid of it. Prints the interpreter's
# path on its last line.
#
# PyPI's torch wheel is the CUDA build and pulls the NVIDIA libraries in (about 4 GB installed):
# the Python module loads them even on a machine without a GPU. Needs python3 with venv
# (Debian: python3-venv).
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
venv="${SWITCHGNN_PYG_VENV:-$root/.cache/pyg-venv}"
stamp="$venv/.complete"

if [ ! -f "$stamp" ]; then
  rm -rf "$venv"
  mkdir -p "$(dirname "$venv")"
  echo "pyg-venv: creating $venv (torch 2.13.0, torch_geometric 2.8.1; several GB) ..." >&2
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --no-cache-dir --disable-pip-version-check \
    torch==2.13.0 torch_geometric==2.8.1 numpy >&2
  touch "$stamp"
fi
echo "$venv/bin/python"
