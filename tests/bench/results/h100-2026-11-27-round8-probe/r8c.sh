#!/usr/bin/env bash
# round 8 probe c: the gather fix (faid_pixel without branches, the clip's loads first), the
# work-group fill as default, the picker's prefetch without rows; GPU stage; profiles (one H100)
set -u
OUT0=${OUT:-/tmp/out}; export OUT=/tmp/r8c; rm -rf $OUT; mkdir -p $OUT
date -u
FAID_BIN=build-gpu/bin PEAK_SETS="default r8wg0 r8ppf0 pcandm" PROFILE_KERNELS=all CONFIGS=" " SWEEP="" KINDS="synthetic" SIZES="" \
  DAEMON_BENCH=0 INT_VARIANTS="" DEC_VARIANTS="" PYFAI_FASTEST=/nonexistent timeout 570 bash tests/bench/gpu-run.sh > $OUT/gpu-run.log 2>&1
echo "gpu-run rc $?"
cd $OUT && tar czf $OUT0/r8c.tgz --exclude='*.ncu-rep' --exclude='records' --exclude='*.npy' --exclude='data' . ; ls -la $OUT0
sed -n '/^issue 17, peak/,$p' $OUT/gpu-run.log | head -40
grep -A8 "GPU stage vs PCIe" $OUT/gpu-run.log
cat $OUT/profile/summary.txt 2>/dev/null
date -u
