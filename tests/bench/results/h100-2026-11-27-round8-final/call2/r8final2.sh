#!/usr/bin/env bash
# round 8's final call: the defaults as they land (one H100), every issue-17 row of one GPU with
# the pyFAI references of the same run
set -u
OUT0=${OUT:-/tmp/out}; export OUT=/tmp/r8final2; rm -rf $OUT; mkdir -p $OUT
date -u
FAID_BIN=build-gpu/bin PEAK_SETS="default r8cgu8" CONFIGS="full pk-pyfai pk-pf8" SWEEP="" KINDS="synthetic" SIZES="" \
  DAEMON_BENCH=0 INT_VARIANTS="" DEC_VARIANTS="" timeout 540 bash tests/bench/gpu-run.sh > $OUT/gpu-run.log 2>&1
echo "gpu-run rc $?"
cd $OUT && tar czf $OUT0/r8final2.tgz --exclude='records' --exclude='*.npy' --exclude='data' --exclude='*.ncu-rep' . ; ls -la $OUT0
sed -n '/^issue 17, peak/,/^registers/p' $OUT/gpu-run.log | head -24
grep -A4 "GPU stage vs PCIe" $OUT/gpu-run.log | head -6
grep -i "pyFAI\|x pyFAI" $OUT/gpu-run.log | grep -v "^gpu-run: peak set" | tail -10
date -u
