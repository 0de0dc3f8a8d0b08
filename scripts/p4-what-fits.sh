#!/usr/bin/env bash
# The table of p4/README.md#what-fits: each dataset at 32 and 128 workers, exchanging 128-wide
# features, planned as the paper plans (100 MB of aggregators) and as the resource model advises
# (the program's aggregators on every pipe, blocks within half the per-block tables); then
# `switchgnn p4 resources` on all twelve plans with no port looped (each on the smallest chip
# that hosts its workers), and the 32-worker plans once more on a tofino2 with its 96 ports no
# worker needs looped back (the 128-worker plans leave none), printed as the README's markdown
# table.
#
#   bash scripts/p4-what-fits.sh [WORK_DIR]     # release build; reddit-like takes minutes
#
# Needs ../shared/datasets (Cora, Amazon-Computers); reddit-like is the built-in synthetic graph.
set -euo pipefail
cd "$(dirname "$0")/.."
work="${1:-$(mktemp -d)}"
mkdir -p "$work"
cargo build --release -q
bin=target/release/switchgnn
data=../shared/datasets
advised="16MiB"   # switchgnn_p4::program::switch_memory_option(4)
plans=()
for dataset in cora amazon-computers reddit-like; do
  case $dataset in
    cora) source="$data/cora.npz"; dims=128,128 ;;
    amazon-computers) source="$data/amazon-computers.npz"; dims=128,128 ;;
    reddit-like) source="synthetic:reddit-like"; dims=128,128,128,128 ;;
  esac
  for workers in 32 128; do
    for planned in paper advised; do
      out="$work/$dataset-$workers-$planned"
      if [ "$planned" = paper ]; then
        opts=(--switch-memory 100MB)
      else
        opts=(--switch-memory "$advised" --table-entries 18432)
      fi
      if [ ! -f "$out/manifest.json" ]; then
        echo "preparing $out" >&2
        "$bin" prepare "$source" --workers "$workers" --feature-dims "$dims" "${opts[@]}" \
          --exchange switch --out "$out" >/dev/null
      fi
      plans+=(--plan "$out")
    done
  done
done
"$bin" p4 resources "${plans[@]}" --json "$work/resources.json" >"$work/resources.txt"
looped_plans=()
for ((i = 0; i < ${#plans[@]}; i += 2)); do
  case "${plans[i + 1]}" in *-32-*) looped_plans+=(--plan "${plans[i + 1]}") ;; esac
done
"$bin" p4 resources "${looped_plans[@]}" --chip tofino2 --loopback-ports 96 \
  --json "$work/resources-looped.json" >"$work/resources-looped.txt"
python3 - "$work/resources.json" "$work/resources-looped.json" <<'EOF'
import json, sys
# Each plan as planned, followed by its looped row where it has one.
plain, looped = (json.load(open(path)) for path in sys.argv[1:])
key = lambda r: (r["dataset"], r["workers"], r["switch_memory"])
extra = {key(r): r for r in looped}
rows = [x for r in plain for x in ([r, extra[key(r)]] if key(r) in extra else [r])]
terms = {"LaneUpdates": "lane updates", "Passes": "passes", "Recirculation": "recirculation",
         "HostLink": "host link", "HostPackets": "host packets"}
print("| dataset | workers | planned as | looped ports | blocks | largest block: aggregators / "
      "pass entries / vertices | all blocks: pass entries / vertices | uploads at line rate | "
      "recirculation | table loads | fits | bound, layer 0 |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    s = r["sets"][0]
    memory = r["switch_memory"]
    planned = "100 MB" if memory == 100_000_000 else \
        f"{memory >> 20} MiB, ≤{r['table_entries']} entries"
    fits = "resident" if r["fits_resident"] else ("with reloads" if r["fits_with_reloads"] else "no")
    b = r["bounds"][0]
    a = r["assumptions"]
    looped = a["looped_per_pipe"] * a["pipes"]
    print(f"| {r['dataset']} | {r['workers']} | {planned} | {looped} | {s['blocks']} | "
          f"{s['peak_aggregators']} / {s['pairs_peak']} / {s['vertices_peak']} | "
          f"{s['pairs_total']} / {s['vertices_total']} | {s['host_s'] * 1e3:.3f} ms | "
          f"{s['recirc_s'] * 1e3:.3f} ms | {s['reload_s']:.2f} s | {fits} | "
          f"{b['bound']['seconds'] * 1e3:.3f} ms on {r['chip']}, by {terms[b['bound']['dominant']]} |")
EOF
