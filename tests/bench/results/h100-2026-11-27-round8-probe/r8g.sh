#!/usr/bin/env bash
# round 8 call g: the clip's raking padded (SC_RAKE=2), the gather's chunk size and the passes'
# overflow batches under the register cap (one H100)
set -u
OUT0=${OUT:-/tmp/out}; export OUT=/tmp/r8g; rm -rf $OUT; mkdir -p $OUT
date -u
FAID_BIN=build-gpu/bin PEAK_SETS="default r8rake2 r8cgu4 r8cgu16 r8gb0" CONFIGS=" " SWEEP="" KINDS="" SIZES="" \
  DAEMON_BENCH=0 INT_VARIANTS="" DEC_VARIANTS="" PYFAI_FASTEST=/nonexistent timeout 540 bash tests/bench/gpu-run.sh > $OUT/gpu-run.log 2>&1
echo "gpu-run rc $?"
cd $OUT && tar czf $OUT0/r8g.tgz --exclude='records' --exclude='*.npy' --exclude='data' . ; ls -la $OUT0
sed -n '/^issue 17, peak/,/^registers/p' $OUT/gpu-run.log | head -24
date -u
