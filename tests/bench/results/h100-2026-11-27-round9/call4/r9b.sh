#!/usr/bin/env bash
# round 9's confirmation (one H100): the commit that lands (SC_ONCE through one helper for both
# builds) against r9once0, twice in alternating order, with the pyFAI references
set -u
OUT0=${OUT:-/tmp/out}; export OUT=/tmp/r9b; rm -rf $OUT; mkdir -p $OUT
date -u
FAID_BIN=build-gpu/bin PEAK_SETS="default r9once0" CONFIGS="pk-pyfai pk-pf8" SWEEP="" KINDS="" SIZES="" \
  DAEMON_BENCH=0 INT_VARIANTS="" DEC_VARIANTS="" PYFAI_FASTEST=/nonexistent timeout 300 bash tests/bench/gpu-run.sh > $OUT/gpu-run.log 2>&1
echo "gpu-run rc $?"
mkdir -p $OUT/b
OUT=$OUT/b FAID_BIN=build-gpu/bin PEAK_SETS="r9once0 default" CONFIGS=" " SWEEP="" KINDS="" SIZES="" \
  DAEMON_BENCH=0 INT_VARIANTS="" DEC_VARIANTS="" PYFAI_FASTEST=/nonexistent timeout 150 bash tests/bench/gpu-run.sh > $OUT/b/gpu-run.log 2>&1
echo "gpu-run b rc $?"
cd $OUT && tar czf $OUT0/r9b.tgz --exclude='records' --exclude='*.npy' --exclude='data' --exclude='*.ncu-rep' --exclude='src_*.csv' . ; ls -la $OUT0
sed -n '/^issue 17, peak/,/^registers/p' $OUT/gpu-run.log | head -12
sed -n '/^issue 17, peak/,/^registers/p' $OUT/b/gpu-run.log | head -12
grep -i "pyFAI\|x pyFAI" $OUT/gpu-run.log | grep -v "^gpu-run: peak set" | tail -6
date -u
