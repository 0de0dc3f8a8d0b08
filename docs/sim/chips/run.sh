#!/bin/bash
# Real chips next to the ideal switch, every kind against the best host-only kind: the host
# exchange, host-only pre-aggregation, the host hybrid, SwitchGNN, reduce and the planner's pick, on the default
# real chip (tofino1-32 up to 32 workers, tofino2 at 128) and on the ideal switch. Needs a
# release build (cargo build --release) and ../shared/datasets.
set -u
B=${B:-$(dirname "$0")/../../../target/release/switchgnn}
D=${D:-$(dirname "$0")/../../../../shared/datasets}
OUT=${OUT:-/tmp/sims-chips}
mkdir -p "$OUT"
run() { # name dataset memory extra...
  local name=$1 data=$2 mem=$3; shift 3
  for chip in real ideal; do
    local opt=""; [ $chip = ideal ] && opt="--chip ideal"
    local s=$(date +%s)
    "$B" simulate "$data" --workers 8,32,128 --switch-memory "$mem" \
      --modes host,host-reduce,host-hybrid,switchgnn,reduce,auto --result-timeout-us 5000 --jobs ${JOBS:-2} \
      $opt "$@" --out "$OUT/$name-$chip" > "$OUT/$name-$chip.txt" 2>&1
    echo "$name $chip rc=$? $(( $(date +%s) - s )) s" >> "$OUT/times.txt"
  done
}
run cora "$D/cora.npz" 10MB
run amazon-computers "$D/amazon-computers.npz" 10MB
run tolokers "$D/yandex/tolokers.npz" 10MB
run reddit-like-quarter synthetic:reddit-like,scale=0.25 2.5MB --feature-dims 128,128,128,128
echo done >> "$OUT/times.txt"
