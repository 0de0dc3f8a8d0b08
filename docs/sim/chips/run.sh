#!/bin/bash
# The verdict table of issue 18: host, g3 and switchgnn on the default real chip and on the ideal switch.
B=${B:-$(dirname "$0")/../../../target/release/switchgnn}
D=${D:-$(dirname "$0")/../../../../shared/datasets}
mkdir -p /tmp/sims
run() { # name dataset memory extra...
  local name=$1 data=$2 mem=$3; shift 3
  for chip in real ideal; do
    local opt=""; [ $chip = ideal ] && opt="--chip ideal"
    local s=$(date +%s)
    $B simulate $data --workers 8,32,128 --switch-memory $mem --modes host,g3,switchgnn --result-timeout-us 5000 --jobs 2 $opt "$@" --out /tmp/sims/$name-$chip > /tmp/sims/$name-$chip.txt 2>&1
    echo "$name $chip rc=$? $(( $(date +%s) - s )) s" >> /tmp/sims/times.txt
  done
}
run cora $D/cora.npz 10MB
run amazon-computers $D/amazon-computers.npz 10MB
run tolokers $D/yandex/tolokers.npz 10MB
run reddit-like-quarter synthetic:reddit-like,scale=0.25 2.5MB --feature-dims 128,128,128,128
echo done >> /tmp/sims/times.txt
