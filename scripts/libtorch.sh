#!/usr/bin/env bash
# Fetch libtorch once into .libtorch/ at the repository root, where .cargo/config.toml points
# LIBTORCH, so a plain `cargo build` finds it. Idempotent: a complete install is left alone.
#
# tch 0.26.0 wants libtorch 2.13.0. PyPI has no CPU-only torch wheel, but the CUDA wheel runs on
# machines without a GPU as long as the two CUDA libraries libtorch_cpu.so links against
# (libcudart, libcupti) are present. So: download the torch wheel and two small NVIDIA wheels with
# pip (versions and sha256 pinned), keep only torch/lib (minus the CUDA-only libraries) and
# torch/include from the first and the two libraries from the others, laid out as in a Python
# site-packages folder: .libtorch/torch/{lib,include} and .libtorch/nvidia/cu13/lib, the place
# libtorch's own RPATH ($ORIGIN/../../nvidia/cu13/lib) looks. About 490 MB on disk.
#
# Needs python3 with pip (Debian: python3-pip). Set LIBTORCH to use another libtorch 2.13.0
# instead; this script then does nothing.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
dest="$root/.libtorch"
version=2.13.0
stamp="$dest/.complete-$version"

if [ -n "${LIBTORCH:-}" ] && [ "$LIBTORCH" != "$dest/torch" ]; then
  echo "libtorch: LIBTORCH is set to $LIBTORCH; using it, nothing to fetch"
  exit 0
fi
if [ -f "$stamp" ]; then
  exit 0
fi
if [ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]; then
  echo "error: scripts/libtorch.sh knows the x86_64 Linux wheels only; install libtorch $version" \
       "yourself and set LIBTORCH" >&2
  exit 1
fi
if ! python3 -m pip --version >/dev/null 2>&1; then
  echo "error: python3 with pip is needed to fetch libtorch (Debian: apt-get install python3-pip)" >&2
  exit 1
fi

work="$(mktemp -d "$root/.libtorch.partial.XXXXXX")"
trap 'rm -rf "$work"' EXIT
echo "libtorch: fetching torch $version wheels (about 540 MB) ..."
cat >"$work/requirements.txt" <<REQ
torch==$version --hash=sha256:60fcdcb2f3876e21146cb4524ef06397d727ca9ad5f020818547e25075fe3cb7
nvidia-cuda-runtime==13.0.96 --hash=sha256:7f82250d7782aa23b6cfe765ecc7db554bd3c2870c43f3d1821f1d18aebf0548
nvidia-cuda-cupti==13.0.85 --hash=sha256:4eb01c08e859bf924d222250d2e8f8b8ff6d3db4721288cf35d14252a4d933c8
REQ
# The wheel's libraries do not depend on the Python version; asking for the cp311 build by tag
# keeps the download the same whatever python3 this machine has.
python3 -m pip download --quiet --no-cache-dir --no-deps --only-binary=:all: \
  --python-version 3.11 --implementation cp --abi cp311 \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_25_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  --require-hashes -r "$work/requirements.txt" -d "$work/wheels"

echo "libtorch: unpacking ..."
python3 - "$work/wheels" "$work/out" <<'PY'
import pathlib, sys, zipfile

wheels, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
# CUDA-only libraries: large, and never loaded on a CPU run.
skip = ("libtorch_cuda", "libc10_cuda.so", "libtorch_nvshmem.so", "libcaffe2_nvrtc.so",
        "libtorch_python.so")
keep_nvidia = ("nvidia/cu13/lib/libcudart.so.13", "nvidia/cu13/lib/libcupti.so.13")

def wanted(name):
    if name.endswith("/"):
        return False
    if name.startswith("torch/include/"):
        return True
    if name.startswith("torch/lib/"):
        return not pathlib.PurePosixPath(name).name.startswith(skip)
    return name in keep_nvidia

for wheel in sorted(wheels.glob("*.whl")):
    with zipfile.ZipFile(wheel) as z:
        for info in z.infolist():
            if wanted(info.filename):
                z.extract(info, out)
                mode = (info.external_attr >> 16) & 0o777
                if mode:
                    (out / info.filename).chmod(mode)
for needed in ("torch/lib/libtorch_cpu.so", "torch/include/torch/csrc/api/include/torch/torch.h", *keep_nvidia):
    if not (out / needed).is_file():
        sys.exit(f"error: {needed} missing from the wheels")
PY
echo "$version" >"$work/out/torch/build-version"
touch "$work/out/.complete-$version"
rm -rf "$dest"
mv "$work/out" "$dest"
echo "libtorch: ready in $dest ($(du -sh "$dest" | cut -f1))"
