#!/usr/bin/env bash
# Fetch the Python P4Runtime protobuf modules once into .p4py/ at the repository root, for the
# test that validates `switchgnn p4 entries --format p4runtime` output against the real
# `p4.v1.WriteRequest` message (p4/ptf/validate_p4runtime.py). Idempotent; pure-Python wheels,
# versions and sha256 pinned; installed with --target, so no virtual environment and no change
# to the system's Python. Needs python3 with pip (Debian: python3-pip).
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
dest="$root/.p4py"
stamp="$dest/.complete-1"
if [ -f "$stamp" ]; then
  exit 0
fi
if ! python3 -m pip --version >/dev/null 2>&1; then
  echo "error: python3 with pip is needed (Debian: apt-get install python3-pip)" >&2
  exit 1
fi
work="$(mktemp -d "$root/.p4py.partial.XXXXXX")"
trap 'rm -rf "$work"' EXIT
# p4runtime's generated modules need protobuf 3.20 (later releases refuse them).
cat >"$work/requirements.txt" <<REQ
p4runtime==1.6.0 --hash=sha256:af2121fdac81e31202174df9d34fc00cbda8d7448a90876bf16ac20fb788d3d3
protobuf==3.20.3 --hash=sha256:a7ca6d488aa8ff7f329d4c545b2dbad8ac31464f1d8b1c87ad1346717731e4db
googleapis-common-protos==1.56.4 --hash=sha256:8eb2cbc91b69feaf23e32452a7ae60e791e09967d81d4fcc7fc388182d1bd394
REQ
echo "p4py: fetching the P4Runtime protobuf modules ..."
python3 -m pip install --quiet --disable-pip-version-check --no-cache-dir --no-deps --root-user-action=ignore \
  --only-binary=:all: --require-hashes --target "$work/site" -r "$work/requirements.txt"
rm -rf "$dest"
mv "$work/site" "$dest"
touch "$stamp"
echo "p4py: installed into $dest"
