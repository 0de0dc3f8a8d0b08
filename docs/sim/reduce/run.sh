#!/bin/bash
# Issue 19's table: the host exchange, SwitchGNN, the pre-aggregated exchange (reduce) and the
# planner's pick (auto), simulated on the default real chip (tofino1-32 up to 32 workers,
# tofino2 beyond). Needs a release build (cargo build --release) and ../shared/datasets.
set -u
B=${B:-$(dirname "$0")/../../../target/release/switchgnn}
D=${D:-$(dirname "$0")/../../../../shared/datasets}
OUT=${OUT:-/tmp/sims-reduce}
mkdir -p "$OUT"
run() { # name dataset workers memory modes extra...
  local name=$1 data=$2 workers=$3 mem=$4 modes=$5; shift 5
  local s=$(date +%s)
  "$B" simulate "$data" --workers "$workers" --switch-memory "$mem" --modes "$modes" \
    --result-timeout-us 5000 --jobs ${JOBS:-2} "$@" --out "$OUT/$name" > "$OUT/$name.txt" 2>&1
  echo "$name rc=$? $(( $(date +%s) - s )) s" >> "$OUT/times.txt"
}
for g in cora amazon-computers coauthor-cs; do
  run $g "$D/$g.npz" 8,32 10MB host,host-reduce,switchgnn,reduce,hybrid,auto
done
for g in tolokers squirrel; do
  run $g "$D/yandex/$g.npz" 8,32 10MB host,host-reduce,switchgnn,reduce,hybrid,auto
done
# reddit-like at a quarter of its size (memory), with a quarter of the aggregators; SwitchGNN's
# real-chip figures for it are in ../chips (seconds of recirculation per epoch).
run reddit-like-quarter synthetic:reddit-like,scale=0.25 32,128 2.5MB host,host-reduce,reduce,hybrid,auto \
  --feature-dims 128,128,128,128
# reddit-like at full size, host and reduce (the planner picks reduce there): 7 min, 6.8 GB.
if [ "${FULL:-0}" = 1 ]; then
  JOBS=1 run reddit-like synthetic:reddit-like 32,128 10MB host,reduce --feature-dims 128,128,128,128
fi
echo done >> "$OUT/times.txt"
