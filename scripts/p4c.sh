#!/usr/bin/env bash
# Builds p4c with its open-source Tofino back end (p4c-barefoot and the bf-p4c driver), pinned to
# one commit, into a cache outside the clone. Built once, then reused: a later run only prints the
# path. The build runs under ninja, so a run that is interrupted (or fails and is fixed) resumes
# where it stopped instead of starting over; expect hours on a small machine.
#
# Where: $SWITCHGNN_P4C, or else $XDG_CACHE_HOME/switchgnn/p4c-<commit> (falling back to
# ~/.cache). Inside it: src/ (the patched sources), deps/ (Z3, a Python environment), build/
# (ninja's tree) and install/. The script's last line on stdout is the install's path; the
# compiler is <path>/bin/p4c-barefoot and the driver <path>/bin/p4c. `--path` prints that path
# without building, and exits 1 if the build is not complete. Delete the folder to get rid of it.
#
# Sources. With network access to GitHub the script fetches p4c at the pinned commit, and also
# what p4c's CMake would otherwise download itself at configure time: Abseil, P4Runtime and
# Protobuf at the versions p4c pins. Without it, bring those four in by hand and name them:
#   --src DIR        p4c at 34b86e9bacb932c799aaf1b83495ce1e386ea047 (main of 2026-08-06)
#   --abseil DIR     abseil-cpp at tag 20240722.1 (dd4c89bd657f1e247ce5111a5c89ffe6ccfd0c92)
#   --p4runtime DIR  p4runtime at ec4eb5ef70dbcbcbf2f8357a4b2b8c2f218845a5
#   --protobuf DIR   protobuf at tag v25.3 (4a2aef570deb2bfb8927426558701e8bfc26f2a4); its git
#                    submodules are not needed
# Each DIR may be a git repository (bare or not) that has the commit, which is then exported
# from it (so its work tree, if any, does not matter), or a plain source tree, which is taken
# as it is, without a way to check its version. Only the front end and the Tofino back end are
# configured; the other back ends, tests and documentation are switched off, and CMake is told
# to download nothing (FETCHCONTENT_FULLY_DISCONNECTED), so a dependency missed here fails
# loudly at configure time instead of hanging on the network.
#
# Other dependencies come from Debian 12 (bookworm): the script installs them with apt-get when
# run as root, and otherwise stops with the list. Z3 is the exception: p4c wants
# 4.8.14 <= Z3 < 4.12 (cmake/Z3.cmake: newer ones crash with its garbage collector) and Debian
# 12 has 4.8.12, so the headers and libz3.so come from PyPI's z3-solver 4.11.2.0
# wheel, pinned by hash (`--z3-wheel FILE` to use a wheel brought in by hand).
#
# Why the patches in scripts/p4c/ (applied once to src/p4c; safe to re-apply):
# - 0001: ir/visitor.cpp calls erase_if on a std::map unqualified, so in C++20 argument-dependent
#   lookup picks std::erase_if over p4c's own; libstdc++'s (GCC 12) hands the predicate const
#   entries, which its lambdas take by non-const reference. Make them const.
# - 0002: p4c links libcord when it uses the system's libgc, but Debian's libgc has none (and
#   p4c calls none of it).
# - 0003: use Debian's spdlog instead of downloading v1.8.3.
# - 0004: table placement's "too many stages" error has a Boost format string written `%1`
#   (not `%1%`), so instead of the message the compiler dies with boost::bad_format_string;
#   fix it and name the table that could not be placed.
#
# Why Protobuf is built from source (as p4c does by default) rather than taken from Debian:
# p4c's code hands its own string type (P4::cstring) to the generated setters of the P4Runtime
# messages, which compiles only against the absl::string_view overloads that Protobuf 22 added;
# Debian 12's 3.21 fails with "no matching function for call to ArenaStringPtr::Set(P4::cstring&,
# Arena*)". (3.21 also ships no CMake package configuration, and CMake's FindProtobuf names the
# generated files for .proto files outside the source tree wrongly.) So it is 25.3, built
# statically inside p4c's build (a few hundred more files to compile), with the Abseil above.
#
# Python: the Tofino back end's build runs Python scripts that need jsl and jsonschema (they turn
# its JSON schemas into C++ logging code), and packs its p4c-build-logs tool (which the driver
# runs to write resource summaries) with PyInstaller. Those come from PyPI into a virtual
# environment in deps/venv, pinned by hash, at the versions p4c's CI (tools/ci-build.sh) uses;
# its bin/ goes first on PATH for the build. (PyInstaller wants Debian's libpython3.11.so, which
# comes with libpython3-dev.)
#
# Cores: ninja runs at nice 19 with --jobs N (default: the number of cores, but at most one job
# per 3 GiB of memory, a margin for the back end's bigger files), so the machine stays usable.
set -euo pipefail

p4c_commit=34b86e9bacb932c799aaf1b83495ce1e386ea047   # p4c main of 2026-08-06
# What p4c's cmake/Abseil.cmake downloads (the 20240722.1 release), and the P4Runtime commit
# named by FetchContent in its CMakeLists.txt.
abseil_commit=dd4c89bd657f1e247ce5111a5c89ffe6ccfd0c92
p4runtime_commit=ec4eb5ef70dbcbcbf2f8357a4b2b8c2f218845a5
# Protobuf v25.3, the version p4c's cmake/Protobuf.cmake downloads.
protobuf_commit=4a2aef570deb2bfb8927426558701e8bfc26f2a4
z3_wheel_name=z3_solver-4.11.2.0-py2.py3-none-manylinux1_x86_64.whl
z3_wheel_sha256=9b5a11370df7ac27394fc660c812b2c9aac26f21fadf11e2c51a19cb707c1795

debian_packages=(
  cmake ninja-build g++ make pkg-config git patch ca-certificates python3 python3-pip python3-venv
  libpython3-dev
  bison flex libfl-dev
  libboost-dev libboost-iostreams-dev libboost-graph-dev
  libgc-dev rapidjson-dev libspdlog-dev libfmt-dev
)

root="${SWITCHGNN_P4C:-${XDG_CACHE_HOME:-$HOME/.cache}/switchgnn/p4c-${p4c_commit:0:7}}"
root="${root%/}"
stamp=".switchgnn-complete"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# The stamp names the patch set it was built with: a patch added later makes the build
# incomplete again, and a rerun applies it and rebuilds only the files it touches.
patches_id="patches $(cat "$here"/p4c/*.patch | sha256sum | cut -c1-16)"
built() { [ -f "$install/$stamp" ] && grep -qxF "$patches_id" "$install/$stamp"; }

usage() {
  sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
  echo "Usage: $0 [--path] [--src DIR] [--abseil DIR] [--p4runtime DIR] [--protobuf DIR]" \
       "[--z3-wheel FILE] [--jobs N]"
}

say() { echo "p4c: $*" >&2; }
die() { echo "error: $*" >&2; exit 1; }

# Puts the tree of `commit` into `dest`: from a local git repository or plain tree if one was
# named, else from a shallow fetch of that one commit from `url`. A marker file records the
# commit, so a later run keeps the tree (and the timestamps ninja goes by) as they are.
get_source() {
  local name="$1" url="$2" commit="$3" given="$4" dest="$5"
  if [ -f "$dest/.switchgnn-source" ]; then
    return
  fi
  local tmp="$dest.partial"
  rm -rf "$tmp"
  mkdir -p "$tmp"
  if [ -n "$given" ]; then
    [ -d "$given" ] || die "$name: $given is not a directory"
    if git -C "$given" rev-parse --git-dir >/dev/null 2>&1; then
      git -C "$given" cat-file -e "$commit^{commit}" 2>/dev/null \
        || die "$name: the git repository $given does not have commit $commit"
      say "$name: exporting $commit from the git repository $given"
      # Snapshots made for offline use sometimes leave out large files (p4c's snapshot lacks
      # docs/compiler-design.pptx); leave out whatever blob is absent rather than fail. (git
      # archive still prints "invalid object" for such a file, but skips it and succeeds.)
      local -a skip=()
      local path
      while IFS= read -r path; do
        say "$name: warning: $path is missing from $given; leaving it out"
        skip+=(":(exclude,literal)$path")
      done < <(git -C "$given" ls-tree -r "$commit" \
                 | awk '$2 == "blob" { print $3 }' \
                 | git -C "$given" cat-file --batch-check \
                 | awk '$2 == "missing" { print $1 }' \
                 | grep -F -f - <(git -C "$given" ls-tree -r "$commit") \
                 | cut -f2- || true)
      git -C "$given" archive --format=tar "$commit" -- . "${skip[@]}" | tar -x -C "$tmp"
    else
      say "$name: copying the plain source tree $given (its version cannot be checked;" \
          "it must be $commit)"
      tar -C "$given" --exclude=.git -c . | tar -x -C "$tmp"
    fi
  else
    say "$name: fetching $commit from $url (pass --$name DIR to use a local copy instead)"
    git -C "$tmp" init -q
    git -C "$tmp" fetch -q --depth 1 "$url" "$commit"
    git -C "$tmp" archive --format=tar FETCH_HEAD | tar -x -C "$tmp"
    rm -rf "$tmp/.git"
  fi
  echo "$commit" >"$tmp/.switchgnn-source"
  rm -rf "$dest"
  mv -T "$tmp" "$dest"
}

main() {
  local want_path="" src="" abseil="" p4runtime="" protobuf="" z3_wheel="" jobs=""
  while [ $# -gt 0 ]; do
    case "$1" in
      --path) want_path=1 ;;
      --src) src="${2:?--src needs a directory}"; shift ;;
      --abseil) abseil="${2:?--abseil needs a directory}"; shift ;;
      --p4runtime) p4runtime="${2:?--p4runtime needs a directory}"; shift ;;
      --protobuf) protobuf="${2:?--protobuf needs a directory}"; shift ;;
      --z3-wheel) z3_wheel="${2:?--z3-wheel needs a file}"; shift ;;
      --jobs) jobs="${2:?--jobs needs a number}"; shift ;;
      -h|--help) usage; exit 0 ;;
      *) usage >&2; exit 2 ;;
    esac
    shift
  done

  local install="$root/install"
  if [ -n "$want_path" ]; then
    echo "$install"
    if [ ! -f "$install/$stamp" ]; then
      say "not built yet (run scripts/p4c.sh without --path)"
      exit 1
    elif ! built; then
      say "built without the latest patches in scripts/p4c/ (run scripts/p4c.sh again:" \
          "it rebuilds only what they touch)"
      exit 1
    fi
    exit 0
  fi
  if built; then
    echo "$install"
    exit 0
  fi

  if [ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]; then
    die "scripts/p4c.sh knows x86_64 Linux only (the Z3 wheel and the Debian packages)"
  fi

  # Install what is missing; `apt-get update` first because a fresh container has no lists.
  local -a missing=()
  local pkg
  for pkg in "${debian_packages[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" || missing+=("$pkg")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      say "installing Debian packages: ${missing[*]}"
      apt-get update -qq >&2
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        "${missing[@]}" >&2
    else
      die "missing Debian packages (install them as root): ${missing[*]}"
    fi
  fi

  mkdir -p "$root"
  root="$(cd "$root" && pwd)"
  install="$root/install"
  # One build at a time per cache folder; a run that waited here finds the other's result.
  exec 9>"$root/.lock"
  flock 9
  if built; then
    echo "$install"
    exit 0
  fi
  local start=$SECONDS

  get_source src https://github.com/p4lang/p4c.git "$p4c_commit" "$src" "$root/src/p4c"
  get_source abseil https://github.com/abseil/abseil-cpp.git "$abseil_commit" "$abseil" \
    "$root/src/abseil-cpp"
  get_source p4runtime https://github.com/p4lang/p4runtime.git "$p4runtime_commit" \
    "$p4runtime" "$root/src/p4runtime"
  get_source protobuf https://github.com/protocolbuffers/protobuf.git "$protobuf_commit" \
    "$protobuf" "$root/src/protobuf"

  # A patch already in place reverses cleanly; apply only those that do not, so that a rerun
  # (or a patch added later) leaves the files already built untouched.
  local p
  for p in "$here"/p4c/*.patch; do
    if patch -d "$root/src/p4c" -p1 -R -s -f --dry-run <"$p" >/dev/null 2>&1; then
      continue
    fi
    say "applying $(basename "$p")"
    patch -d "$root/src/p4c" -p1 -s -f --no-backup-if-mismatch <"$p" >&2 \
      || die "$(basename "$p") does not apply to $root/src/p4c"
  done

  # Z3 from the PyPI wheel: only its headers and libz3.so are used.
  local z3="$root/deps/z3"
  if [ ! -f "$z3/.switchgnn-z3" ]; then
    mkdir -p "$root/deps"
    if [ -z "$z3_wheel" ]; then
      z3_wheel="$root/deps/$z3_wheel_name"
      if [ ! -f "$z3_wheel" ]; then
        say "downloading $z3_wheel_name from PyPI"
        echo "z3-solver==4.11.2.0 --hash=sha256:$z3_wheel_sha256" >"$root/deps/z3-req.txt"
        /usr/bin/python3 -m pip download --quiet --disable-pip-version-check --no-deps \
          --only-binary=:all: --require-hashes -r "$root/deps/z3-req.txt" -d "$root/deps" >&2
      fi
    fi
    echo "$z3_wheel_sha256  $z3_wheel" | sha256sum -c --quiet - \
      || die "$z3_wheel is not $z3_wheel_name (sha256 differs)"
    rm -rf "$z3" "$z3.partial"
    mkdir -p "$z3.partial"
    /usr/bin/python3 - "$z3_wheel" "$z3.partial" <<'PY'
import sys, zipfile
wheel, dest = sys.argv[1:]
with zipfile.ZipFile(wheel) as z:
    names = [n for n in z.namelist()
             if n.startswith("z3/include/") or n in ("z3/lib/libz3.so",)]
    z.extractall(dest, names)
PY
    mv "$z3.partial/z3/include" "$z3.partial/include"
    mv "$z3.partial/z3/lib" "$z3.partial/lib"
    rmdir "$z3.partial/z3"
    touch "$z3.partial/.switchgnn-z3"
    mv -T "$z3.partial" "$z3"
  fi

  # Python packages for the build (see the top). Built next to its final place and renamed in
  # once complete, so a half-made environment is never used.
  local venv="$root/deps/venv"
  if [ ! -f "$venv/.switchgnn-venv" ]; then
    say "making the Python environment $venv (jsl, jsonschema, PyInstaller from PyPI)"
    rm -rf "$venv" "$venv.partial"
    # Debian's interpreter, which python3-venv goes with (PATH may hold another, e.g. pyenv's).
    /usr/bin/python3 -m venv "$venv.partial"
    cat >"$venv.partial/requirements.txt" <<'REQ'
jsl==0.2.4 --hash=sha256:222621116b6ff508f12b2d9e17a576d08d618b06c0845b1867b000a90424c19d
jsonschema==4.23.0 --hash=sha256:fbadb6f8b144a8f8cf9f0b89ba94501d143e50411a1278633f56a7acf7fd5566
jsonschema-specifications==2025.9.1 --hash=sha256:98802fee3a11ee76ecaca44429fda8a41bff98b00a0f2838151b113f210cc6fe
referencing==0.37.0 --hash=sha256:381329a9f99628c9069361716891d34ad94af76e461dcb0335825aecc7692231
rpds-py==2026.9.1 --hash=sha256:136a1c3fe4402b7008bc81cb62ee538481795b61a7e83df88dff3b3f02b726ff
attrs==26.1.0 --hash=sha256:c647aa4a12dfbad9333ca4e71fe62ddc36f4e63b2d260a37a8b83d2f043ac309
typing-extensions==4.16.0 --hash=sha256:481caa481374e813c1b176ada14e97f1f67a4539ce9cfeb3f350d78d6370c2e8
pyinstaller==6.11.0 --hash=sha256:04f71828aa9531ab18c9656985c1f09b83d10332c73a1f4a113a48b491906955
pyinstaller-hooks-contrib==2026.9 --hash=sha256:fb3e67dd64122561724c48ad0366ac9e8c16e638b63bf7d85de03bf3fdbf06c3
altgraph==0.17.5 --hash=sha256:f3a22400bce1b0c701683820ac4f3b159cd301acab067c51c653e06961600597
packaging==26.4 --hash=sha256:81383611a09c1bc0b08b76e0fd5829d7c6824c65b27a6aee339da133f4233ea2
pyyaml==6.0.2 --hash=sha256:3ad2a3decf9aaba3d29c8f537ac4b243e36bef957511b4766cb0057d32b0be85
REQ
    # jsl exists as a source archive only; it is pure Python and builds with the setuptools that
    # the environment already has. Every other package must be a wheel.
    "$venv.partial/bin/python" -m pip install --quiet --disable-pip-version-check --no-cache-dir \
      --no-deps --require-hashes --only-binary=:all: --no-binary=jsl --no-build-isolation \
      -r "$venv.partial/requirements.txt" >&2
    "$venv.partial/bin/python" -c 'import jsl, jsonschema, yaml, PyInstaller' >&2
    # venv writes its own path into its scripts (pyinstaller's shebang); make it the final one.
    { grep -rlIF "$venv.partial" "$venv.partial/bin" "$venv.partial/pyvenv.cfg" || true; } \
      | while IFS= read -r f; do sed -i "s|$venv.partial|$venv|g" "$f"; done
    touch "$venv.partial/.switchgnn-venv"
    mv -T "$venv.partial" "$venv"
  fi
  export PATH="$venv/bin:$PATH"

  local -a cmake_args=(
    -G Ninja -S "$root/src/p4c" -B "$root/build"
    -DCMAKE_BUILD_TYPE=Release
    -DPYTHON_EXECUTABLE="$venv/bin/python3"
    -DCMAKE_INSTALL_PREFIX="$install"
    # libz3.so stays in deps/z3; the installed binaries find it through their RUNPATH.
    -DCMAKE_INSTALL_RPATH_USE_LINK_PATH=ON
    # The front end and the Tofino back end only.
    -DENABLE_TOFINO=ON
    -DENABLE_BMV2=OFF -DENABLE_EBPF=OFF -DENABLE_UBPF=OFF -DENABLE_DPDK=OFF -DENABLE_P4TC=OFF
    -DENABLE_P4FMT=OFF -DENABLE_P4TEST=OFF -DENABLE_P4C_GRAPHS=OFF -DENABLE_TEST_TOOLS=OFF
    -DENABLE_GTESTS=OFF -DENABLE_DOCS=OFF
    # Nothing downloaded at configure time: system packages, or the sources fetched above.
    -DFETCHCONTENT_FULLY_DISCONNECTED=ON
    -DFETCHCONTENT_SOURCE_DIR_ABSEIL="$root/src/abseil-cpp"
    -DFETCHCONTENT_SOURCE_DIR_P4RUNTIME="$root/src/p4runtime"
    -DFETCHCONTENT_SOURCE_DIR_PROTOBUF="$root/src/protobuf"
    # p4c has no use for Protobuf's gzip streams; one system library fewer.
    -Dprotobuf_WITH_ZLIB=OFF
    -DP4C_USE_PREINSTALLED_BDWGC=ON
    -DUSE_PREINSTALLED_Z3=ON -DZ3_INCLUDE_DIR="$z3/include" -DZ3_LIBRARY="$z3/lib/libz3.so"
  )
  # Configure only when the build folder is new or the options changed; ninja re-runs CMake by
  # itself when a CMakeLists.txt changes. New options start from an empty CMake cache, so that
  # nothing found under the old ones lingers; objects whose compile commands stay the same are
  # kept all the same.
  local configured="$root/build/.switchgnn-configure"
  if [ ! -f "$root/build/build.ninja" ] \
     || [ "$(cat "$configured" 2>/dev/null)" != "${cmake_args[*]}" ]; then
    say "configuring in $root/build"
    rm -f "$root/build/CMakeCache.txt"
    # The sources are an export, not a clone, so p4c cannot ask git for its version.
    BFN_P4C_GIT_SHA="${p4c_commit:0:7}" cmake "${cmake_args[@]}" >&2
    echo "${cmake_args[*]}" >"$configured"
  fi

  if [ -z "$jobs" ]; then
    local mem_gib
    mem_gib=$(awk '/^MemTotal:/ { print int($2 / 1048576) }' /proc/meminfo)
    jobs=$(nproc)
    if [ $((mem_gib / 3)) -lt "$jobs" ]; then jobs=$((mem_gib / 3)); fi
    if [ "$jobs" -lt 1 ]; then jobs=1; fi
  fi
  say "building with ninja -j$jobs at nice 19 (resumes where it stopped if interrupted)"
  nice -n 19 ninja -C "$root/build" -j "$jobs" >&2
  nice -n 19 ninja -C "$root/build" install >&2

  # Done only once the installed compiler runs.
  local version
  version="$("$install/bin/p4c-barefoot" --version 2>&1)" \
    || die "the installed $install/bin/p4c-barefoot does not run: $version"
  {
    echo "p4c $p4c_commit with the Tofino back end," \
         "built $(date -u +%Y-%m-%dT%H:%M:%SZ) in $((SECONDS - start)) s"
    echo "$version"
    echo "$patches_id"
  } >"$install/$stamp"
  say "done in $((SECONDS - start)) s: $version"
  echo "$install"
}

# Everything runs from main, so bash has read the whole file before it starts: editing the
# script while a long build runs does not disturb that build.
main "$@"
exit
