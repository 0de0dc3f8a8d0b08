#!/usr/bin/env bash
# Compiles p4/switchgnn.p4 for Tofino with the p4c that scripts/p4c.sh built (found with
# `scripts/p4c.sh --path`; the build takes hours and is not part of setup). Output goes to
# OUT (default: target/p4c-tofino, ignored by git); the compiler's messages are printed and
# kept in OUT/compile.log. Exits with the compiler's status, or 2 when no p4c is built, saying
# how to build it. Options after `--` go to p4c-barefoot (`-- --target tofino2 --arch t2na`).
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
errors=$(grep -c "error" "$out/compile.log" || true)
if [ "$status" -eq 0 ]; then
  echo "compiled: $out (resources: $out/switchgnn/pipe/logs/ if the back end wrote them)" >&2
else
  echo "p4c-barefoot failed (exit $status; $errors lines name an error): $out/compile.log" >&2
fi
exit "$status"
