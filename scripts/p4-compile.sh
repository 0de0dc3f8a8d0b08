#!/usr/bin/env bash
# Compiles p4/switchgnn.p4 for Tofino with the p4c that scripts/p4c.sh built (found with
# `scripts/p4c.sh --path`; the build takes hours and is not part of setup). Output goes to
# OUT (default: target/p4c-tofino, ignored by git); the compiler's messages are printed and
# kept in OUT/compile.log. Exits with the compiler's (or the assembler's) status, or 2 when no
# p4c is built, saying how to build it. Success means a binary: when the driver exits 0 without
# one, the script runs bfas on the .bfa itself. Options after `--` go to p4c-barefoot
# (`-- --target tofino2 --arch t2na`).
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="$root/target/p4c-tofino"
if [ "${1:-}" != "" ] && [ "${1:-}" != "--" ]; then
  out="$1"
  shift
fi
[ "${1:-}" = "--" ] && shift
if ! p4c="$(bash "$root/scripts/p4c.sh" --path 2>/dev/null)"; then
  echo "error: no p4c with the Tofino back end is built; run bash scripts/p4c.sh (hours)" >&2
  exit 2
fi
mkdir -p "$out"
echo "p4c-barefoot ($("$p4c/bin/p4c-barefoot" --version 2>&1 | tail -1)) -> $out" >&2
"$p4c/bin/p4c-barefoot" --target tofino --arch tna "$@" -o "$out" "$root/p4/switchgnn.p4" \
  2>&1 | tee "$out/compile.log"
status=${PIPESTATUS[0]}
# The driver can report success with no binary written (it did not run the assembler here):
# a compile counts only once bfas has assembled the pipe's .bfa into a binary.
bfa="$out/pipe/switchgnn.bfa"
if [ "$status" -eq 0 ] && ! ls "$out"/pipe/*.bin >/dev/null 2>&1; then
  if [ -s "$bfa" ]; then
    target=tofino
    for arg in "$@"; do case "$arg" in tofino2|tofino3) target="$arg" ;; esac; done
    echo "assembling $bfa (bfas --target $target)" >&2
    "$p4c/bin/bfas" --no-warn --target "$target" -o "$out/pipe" "$bfa" 2>&1 \
      | tee -a "$out/compile.log"
    status=${PIPESTATUS[0]}
  else
    echo "p4c-barefoot exited 0 but wrote no $bfa" >&2
    status=1
  fi
fi
errors=$(grep -c "error" "$out/compile.log" || true)
if [ "$status" -eq 0 ]; then
  echo "compiled: $(ls "$out"/pipe/*.bin) (resources: $out/pipe/logs/ if the back end" \
       "wrote them)" >&2
else
  echo "compile failed (exit $status; $errors lines name an error): $out/compile.log" >&2
fi
exit "$status"
