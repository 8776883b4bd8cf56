#!/usr/bin/env bash
# Round 6 (one H100): the decoder's build variants beside the default (faid-bench fused /
# pipelined / compute, test_codec bench, faid-bench --decode), the integration rows (GPU stage,
# PCIe floor, compute alone, pyFAI + silx at its fastest), the default peak path, the lean cake
set -u
OUT=${OUT:-/tmp/out}
R=$PWD
export FAID_BIN=$R/build-gpu/bin DEVICE=gpu
date -u; nvidia-smi --query-gpu=name --format=csv,noheader
OUT=$OUT/gr FRAMES=${FR:-400} CONFIGS="${CONFIGS-full cake-lean pk-pyfai}" KINDS="" SWEEP="" SIZES="" DAEMON_BENCH=0 \
  INT_VARIANTS="base" INT_BATCHES="4" PEAK_SETS="${SETS-default}" \
  DEC_VARIANTS="${DECV-zrun2 dglob dglob+zrun2 bpg2 bpg2+zrun2}" DEC_BENCH_FRAMES=200 \
  timeout ${TMO:-520} bash tests/bench/gpu-run.sh > $OUT/gr.txt 2>&1
echo "gpu-run rc $?"
grep -n -E "WRONG|FAILED|ERROR|WARNING" $OUT/gr.txt | grep -v 'debs\|libnvidia' | head -20
sed -n '/^issue 17, the device decoder alone/,/^$/p' $OUT/gr.txt
sed -n '/^issue 17, decoder variants/,/^$/p' $OUT/gr.txt
sed -n '/^issue 17, integration/,/^2D cake/p' $OUT/gr.txt
grep -n -A12 "issue 17, peak" $OUT/gr.txt | head -16
grep -E "^pyFAI|x pyFAI|OCL_PeakFinder|best full" $OUT/gr.txt | head
tar czf $OUT/gr_logs.tgz -C $OUT/gr --exclude='*.npy' --exclude='*.bslz4' --exclude='data' . 2>/dev/null
date -u
