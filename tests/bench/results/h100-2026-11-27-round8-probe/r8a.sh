#!/usr/bin/env bash
# round 8 probe: the r7 fill variants and the profiles of every kernel (one H100)
set -u
OUT0=${OUT:-/tmp/out}; export OUT=/tmp/r8a; rm -rf $OUT; mkdir -p $OUT
date -u
FAID_BIN=build-gpu/bin PEAK_SETS="default r7spread r7wg r7wgall" PROFILE_KERNELS=all CONFIGS=" " SWEEP="" KINDS="" SIZES="" \
  DAEMON_BENCH=0 INT_VARIANTS="" DEC_VARIANTS="" PYFAI_FASTEST=/nonexistent timeout 560 bash tests/bench/gpu-run.sh > $OUT/gpu-run.log 2>&1
echo "gpu-run rc $?"
tar czf $OUT0/r8a.tgz -C $OUT .
tail -60 $OUT/gpu-run.log
date -u
