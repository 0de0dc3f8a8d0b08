#!/usr/bin/env bash
# The exchange matrix of the UDP dataplane: every mode on Cora, Amazon-Computers and the small
# synthetic graph, with 4 and 8 workers, without and with 2% injected loss. Each run checks
# every result against the direct computation (a run that is not exact exits non-zero).
# Writes one JSON summary per run into OUT (default: exchange-matrix/).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-exchange-matrix}
mkdir -p "$out"
cargo build --release -q
datasets=(../shared/datasets/cora.npz ../shared/datasets/amazon-computers.npz synthetic:small)
for d in "${datasets[@]}"; do
  name=$(basename "${d%.npz}" | tr ':' '-')
  for m in 4 8; do
    for loss in 0 0.02; do
      echo "== $name, $m workers, loss $loss"
      ./target/release/switchgnn exchange "$d" --workers "$m" --exchange switch,host,strawman \
        --loss "$loss" --json "$out/$name-$m-$loss.json" | grep -E "vs host|exchange: "
    done
  done
done
