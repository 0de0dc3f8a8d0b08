#!/usr/bin/env bash
# A cached Python environment with DGL and a PyTorch that DGL supports, for CPU-only use on
# x86_64 Linux. Built once, then reused: a second run does nothing but print the path.
#
# Where: $SWITCHGNN_DGL_ENV, or else $XDG_CACHE_HOME/switchgnn/dgl-2.1.0-torch-2.2.1 (falling
# back to ~/.cache). The script's last line on stdout is the environment's path; its interpreter
# is <path>/bin/python (`--path` prints it without building). Delete the folder to get rid of
# it (about 4.5 GB).
#
# Needs: python3 3.11 with the venv module (Debian 12: apt-get install python3-venv; the wheels
# below are built for CPython 3.11 only), libgomp1 (libdgl.so links the system libgomp.so.1, it
# does not carry its own), and network access to PyPI. Set SWITCHGNN_DGL_PYTHON to use another
# 3.11 interpreter than python3.
#
# Why these versions:
# - dgl 2.1.0 is the newest DGL on PyPI. Its wheel carries the PyTorch glue libraries
#   (graphbolt, dgl_sparse, tensoradapter) for torch 2.0.0 to 2.2.1 only, picked by the exact
#   torch version at import time, so torch 2.2.1 is the newest that works.
# - torch 2.2.1 was built against numpy 1.x; numpy 2 breaks it, so numpy stays at 1.26.4.
# - `import dgl` with the PyTorch backend also imports dgl.distributed and dgl.graphbolt, which
#   need torchdata's datapipes (gone from torchdata 0.10 on; 0.7.1 is the release that came with
#   torch 2.2), pydantic, pyyaml, pandas and packaging, none of which dgl's metadata names.
# - The rest are the versions that were current in early 2024, when these were released.
#
# Why only some NVIDIA wheels: PyPI has only the CUDA build of torch for Linux. Its libtorch.so
# links libtorch_cuda.so, so `import torch` loads that library and everything it links even on a
# machine without a GPU: cudart, cupti, cublas(+Lt), cudnn, cufft, curand, cusparse (which links
# nvjitlink), nccl and nvToolsExt. Those wheels are required. The others torch asks for are only
# loaded when CUDA is actually used, so they are left out to save space: cusolver (loaded by
# libtorch_cuda_linalg.so, itself loaded lazily), nvrtc (loaded by libcaffe2_nvrtc.so for JIT
# kernels) and triton (torch.compile's GPU code generator, imported lazily). Because of that,
# every package is installed with --no-deps from the full list below, and `pip check` would
# complain about those three: that is expected.
#
# Safety: every wheel is pinned by version and sha256 (pip --require-hashes), and pip may not
# build anything from source. The environment is built in a hidden folder next to the final one
# and renamed into place only once it imports cleanly, with a stamp file written inside first, so
# a half-built environment is never picked up; a lock keeps two runs from building at once.
set -euo pipefail

dgl_version=2.1.0
torch_version=2.2.1
env="${SWITCHGNN_DGL_ENV:-${XDG_CACHE_HOME:-$HOME/.cache}/switchgnn/dgl-$dgl_version-torch-$torch_version}"
env="${env%/}"
stamp=".switchgnn-complete"
python="${SWITCHGNN_DGL_PYTHON:-python3}"

# `--path`: only say where the environment is (or would be), build nothing.
if [ "${1:-}" = "--path" ] || [ -f "$env/$stamp" ]; then
  echo "$env"
  exit 0
fi

if [ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]; then
  echo "error: scripts/dgl.sh knows the x86_64 Linux wheels only" >&2
  exit 1
fi
if ! "$python" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null; then
  echo "error: $python must be CPython 3.11 (the DGL and torch wheels pinned here are cp311);" \
       "set SWITCHGNN_DGL_PYTHON to a python3.11" >&2
  exit 1
fi
# Debian splits ensurepip off into python3-venv; without it `python3 -m venv` fails half-way.
if ! "$python" -c 'import ensurepip, venv' 2>/dev/null; then
  echo "error: $python has no working venv module (Debian: apt-get install python3-venv)" >&2
  exit 1
fi
# Checked up front because otherwise it only shows at the very end, after a 2.5 GB download.
if ! "$python" -c 'import ctypes; ctypes.CDLL("libgomp.so.1")' 2>/dev/null; then
  echo "error: libgomp.so.1 not found; DGL needs it (Debian: apt-get install libgomp1)" >&2
  exit 1
fi

parent="$(dirname "$env")"
name="$(basename "$env")"
mkdir -p "$parent"
# Absolute, because the path gets written into the environment's scripts below.
parent="$(cd "$parent" && pwd)"
env="$parent/$name"

# One build at a time per environment. A run that waited here finds the other's result.
exec 9>"$parent/.$name.lock"
flock 9
if [ -f "$env/$stamp" ]; then
  echo "$env"
  exit 0
fi
# Leftovers of runs that were killed; safe to remove since we hold the lock.
rm -rf "$parent/.$name.partial."*
if [ -e "$env" ]; then
  # Not complete (no stamp), so not something this script renamed into place.
  if [ -f "$env/pyvenv.cfg" ]; then
    echo "dgl: removing incomplete environment $env" >&2
    rm -rf "$env"
  else
    echo "error: $env exists and is not an environment this script made; move it away" >&2
    exit 1
  fi
fi

tmp="$(mktemp -d "$parent/.$name.partial.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
start=$SECONDS

cat >"$tmp/requirements.txt" <<'REQ'
# DGL and what `import dgl` needs
dgl==2.1.0 --hash=sha256:050af2b3d54f158be67ae222dbf786b2b35e5d5d6a29fbf2a81b854e99f13adf
torchdata==0.7.1 --hash=sha256:d256535648dfb94d1226f233768c6798d1841edfdbf0a09b2115e6cbbda614f9
numpy==1.26.4 --hash=sha256:666dbfb6ec68962c033a450943ded891bed2d54e6755e35e5835d63f4f6931d5
scipy==1.13.1 --hash=sha256:a78b4b3345f1b6f68a763c6e25c0c9a23a9fd0f39f5f3d200efe8feda560a5fa
networkx==3.2.1 --hash=sha256:f18c69adc97877c42332c170849c96cefa91881c99a7cb3e95b7c659ebdc1ec2
requests==2.31.0 --hash=sha256:58cd2187c01e70e6e26505bca751777aa9f2ee0b7f4300988b709f44e013003f
urllib3==2.2.1 --hash=sha256:450b20ec296a467077128bff42b73080516e71b56ff59a60a02bef2232c4fa9d
idna==3.6 --hash=sha256:c05567e9c24a6b9faaa835c4821bad0590fbb9d5779e7caa6e1cc4978e7eb24f
certifi==2024.2.2 --hash=sha256:dc383c07b76109f368f6106eee2b593b04a011ea4d55f652c6ca24a754d1cdd1
charset-normalizer==3.3.2 --hash=sha256:753f10e867343b4511128c6ed8c82f7bec3bd026875576dfd88483c5c73b2fd8
tqdm==4.66.2 --hash=sha256:1ee4f8a893eb9bef51c6e35730cebf234d5d0b6bd112b0271e10ed7c24a02bd9
psutil==5.9.8 --hash=sha256:d06016f7f8625a1825ba3732081d77c94589dca78b7a3fc072194851e88461a4
pydantic==2.6.4 --hash=sha256:cc46fce86607580867bdc3361ad462bab9c222ef042d3da86f2fb333e1d916c5
pydantic-core==2.16.3 --hash=sha256:a6b1bb0827f56654b4437955555dc3aeeebeddc47c2d7ed575477f082622c49e
annotated-types==0.6.0 --hash=sha256:0641064de18ba7a25dee8f96403ebc39113d0cb953a01429249d5c7564666a43
pandas==2.2.1 --hash=sha256:101d0eb9c5361aa0146f500773395a03839a5e6ecde4d4b6ced88b7e5a1a6403
python-dateutil==2.9.0.post0 --hash=sha256:a8b2bc7bffae282281c8140a97d3aa9c14da0b136dfe83f850eea9a5f7470427
pytz==2024.1 --hash=sha256:328171f4e3623139da4983451950b28e95ac706e13f3f2630a879749e7a8b319
tzdata==2024.1 --hash=sha256:9068bc196136463f5245e51efda838afa15aaeca9903f49050dfa2679db4d252
six==1.16.0 --hash=sha256:8abb2f1d86890a2dfb989f9a77cfcfd3e47c2a354b01111771326f8aa26e0254
pyyaml==6.0.1 --hash=sha256:d2b04aac4d386b172d5b9692e2d2da8de7bfb6c387fa4f801fbf6fb2e6ba4673
packaging==24.0 --hash=sha256:2ddfb553fdf02fb784c234c7ba6ccc288296ceabec964ad2eae3777778130bc5
# torch and its pure-Python dependencies
torch==2.2.1 --hash=sha256:d86664ec85902967d902e78272e97d1aff1d331f7619d398d3ffab1c9b8e9157
filelock==3.13.1 --hash=sha256:57dbda9b35157b05fb3e58ee91448612eb674172fab98ee235ccb0b5bee19a1c
typing-extensions==4.10.0 --hash=sha256:69b1a937c3a517342112fb4c6df7e72fc39a38e7891a5730ed4985b5214b5475
sympy==1.12 --hash=sha256:c3588cd4295d0c0f603d0f2ae780587e64e2efeedb3521e46b9bb1d08d184fa5
mpmath==1.3.0 --hash=sha256:a0b2b9fe80bbcd81a6647ff13108738cfb482d481d826cc0e02f5b35e5c88d2c
jinja2==3.1.3 --hash=sha256:7d6d50dd97d52cbc355597bd845fabfbac3f551e1f99619e39a35ce8c370b5fa
markupsafe==2.1.5 --hash=sha256:b91c037585eba9095565a3556f611e3cbfaa42ca1e865f7b8015fe5c7336d5a5
fsspec==2024.2.0 --hash=sha256:817f969556fa5916bc682e02ca2045f96ff7f586d45110fcb76022063ad2c7d8
# The CUDA libraries that `import torch` loads on any machine (see the top of the script)
nvidia-cuda-runtime-cu12==12.1.105 --hash=sha256:6e258468ddf5796e25f1dc591a31029fa317d97a0a94ed93468fc86301d61e40
nvidia-cuda-cupti-cu12==12.1.105 --hash=sha256:e54fde3983165c624cb79254ae9818a456eb6e87a7fd4d56a2352c24ee542d7e
nvidia-cublas-cu12==12.1.3.1 --hash=sha256:ee53ccca76a6fc08fb9701aa95b6ceb242cdaab118c3bb152af4e579af792728
nvidia-cudnn-cu12==8.9.2.26 --hash=sha256:5ccb288774fdfb07a7e7025ffec286971c06d8d7b4fb162525334616d7629ff9
nvidia-cufft-cu12==11.0.2.54 --hash=sha256:794e3948a1aa71fd817c3775866943936774d1c14e7628c74f6f7417224cdf56
nvidia-curand-cu12==10.3.2.106 --hash=sha256:9d264c5036dde4e64f1de8c50ae753237c12e0b1348738169cd0f8a536c0e1e0
nvidia-cusparse-cu12==12.1.0.106 --hash=sha256:f3b50f42cf363f86ab21f720998517a659a48131e8d538dc02f8768237bd884c
nvidia-nvjitlink-cu12==12.1.105 --hash=sha256:015fed699b390ce3b8a8578d822d501a4194d0a341d3859554067c1ab291cb85
nvidia-nccl-cu12==2.19.3 --hash=sha256:a9734707a2c96443331c1e48c717024aa6678a0e2a4cb66b2c364d18cee6b48d
nvidia-nvtx-cu12==12.1.105 --hash=sha256:dc21cf308ca5691e7c04d962e213f8a4aa9bbfa23d95412f452254c2caeb09e5
REQ

echo "dgl: building $env (dgl $dgl_version, torch $torch_version; about 2.5 GB to download," \
     "4.5 GB installed) ..." >&2
"$python" -m venv "$tmp/env"
# No pip cache: it would keep a second copy of the 2.5 GB of wheels around.
"$tmp/env/bin/python" -m pip install --quiet --no-cache-dir --disable-pip-version-check \
  --no-deps --only-binary=:all: --require-hashes -r "$tmp/requirements.txt" >&2

# The venv was made at the temporary path, which its activate scripts and the shebangs of its
# console scripts (pip, torchrun, ...) spell out; point them at the final path before the rename.
# bin/python itself is a symlink to the base interpreter and does not care.
{ grep -rlIF "$tmp/env" "$tmp/env/bin" "$tmp/env/pyvenv.cfg" || true; } | while IFS= read -r f; do
  sed -i "s|$tmp/env|$env|g" "$f"
done

# Prove it loads (torch's CUDA libraries, libgomp, DGL's torch glue) before calling it done.
# DGLBACKEND keeps DGL from writing ~/.dgl/config.json on this first import.
DGLBACKEND=pytorch "$tmp/env/bin/python" -c 'import torch, dgl, dgl.distributed, dgl.graphbolt' >&2

{
  echo "dgl $dgl_version torch $torch_version, built $(date -u +%Y-%m-%dT%H:%M:%SZ) in $((SECONDS - start)) s"
  grep -v '^#' "$tmp/requirements.txt" | cut -d' ' -f1
} >"$tmp/env/$stamp"
mv -T "$tmp/env" "$env"
echo "dgl: done in $((SECONDS - start)) s" >&2
echo "$env"
