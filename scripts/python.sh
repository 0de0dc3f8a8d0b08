#!/usr/bin/env bash
# The Python package (python/): a virtual environment at .venv/ (ignored by git) with numpy,
# pytest and maturin pinned by hash, the package built by maturin and installed into it, and
# into the DGL environment of scripts/dgl.sh when that exists. Idempotent: the environment is
# made once; the package is rebuilt (incrementally) and reinstalled on every run, so it always
# matches the sources.
#
# The package is built optimised (the release profile: minutes the first time, every dependency
# compiled again), since anything a user trains with should be: a dev build's epochs took
# 1.5-2x as long (Cora and Amazon-Computers under BNS-GCN, issue 48). `--dev` builds the dev
# profile instead, sharing cargo's build of the workspace: scripts/setup.sh does so for the
# test suite, whose checks are about results, not speed.
#
# Needs python3 3.9 to 3.12 with the venv module (Debian: python3-venv); the pinned numpy has
# wheels for those on x86_64 Linux.
set -euo pipefail
profile=(--release)
case "${1:-}" in
  --dev) profile=() ;;
  --release | "") ;;
  *) echo "usage: $0 [--dev | --release]" >&2; exit 2 ;;
esac

root="$(cd "$(dirname "$0")/.." && pwd)"
venv="$root/.venv"
stamp="$venv/.switchgnn-complete"
python="${SWITCHGNN_PYTHON:-python3}"
requirements="$root/python/requirements-dev.txt"

if [ ! -f "$stamp" ] || ! cmp -s "$requirements" "$stamp"; then
  echo "python: making $venv ..."
  if ! "$python" -c 'import sys; sys.exit(not (3, 9) <= sys.version_info[:2] <= (3, 12))' 2>/dev/null; then
    echo "error: $python must be Python 3.9 to 3.12 (set SWITCHGNN_PYTHON)" >&2
    exit 1
  fi
  rm -rf "$venv"
  if ! "$python" -m venv "$venv"; then
    echo "error: $python cannot make a virtual environment (Debian: apt-get install python3-venv)" >&2
    exit 1
  fi
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
    --only-binary=:all: --require-hashes -r "$requirements"
  # The stamp is the requirements it was made from: a changed pin remakes the environment.
  cp "$requirements" "$stamp"
fi

echo "python: building the switchgnn package (${profile[*]:---dev}) ..."
wheels="$root/target/python-wheels"
rm -rf "$wheels"
# `--compatibility linux`: a wheel for this machine, not checked against manylinux (it is
# installed here, never uploaded).
(cd "$root" && "$venv/bin/maturin" build --quiet --manifest-path python/Cargo.toml \
  --compatibility linux --out "$wheels" "${profile[@]}")
wheel="$(ls "$wheels"/switchgnn-*.whl)"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
  --force-reinstall "$wheel"

# The DGL environment (scripts/dgl.sh) gets the same wheel: the DGL example and its test run
# there.
dgl_env="$(bash "$root/scripts/dgl.sh" --path)"
also=""
if [ -f "$dgl_env/.switchgnn-complete" ]; then
  "$dgl_env/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
    --force-reinstall "$wheel"
  also=" and $dgl_env"
fi
echo "python: switchgnn installed in $venv$also"
