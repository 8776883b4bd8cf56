#!/usr/bin/env bash
# round 9's call: the defaults (SC_ONCE on) against r9once0 (every work-item computing a pass's
# mean, std and threshold, as before), every issue-17 row of one GPU with the pyFAI references of
# the same run, then the two sets again in the other order with the clip's profile (one H100)
set -u
OUT0=${OUT:-/tmp/out}; export OUT=/tmp/r9a; rm -rf $OUT; mkdir -p $OUT
date -u
FAID_BIN=build-gpu/bin PEAK_SETS="default r9once0 r8m64 r8m72" CONFIGS="full pk-pyfai pk-pf8" SWEEP="" KINDS="synthetic" SIZES="" \
  DAEMON_BENCH=0 INT_VARIANTS="" DEC_VARIANTS="" timeout 420 bash tests/bench/gpu-run.sh > $OUT/gpu-run.log 2>&1
echo "gpu-run rc $?"
date -u
mkdir -p $OUT/b
OUT=$OUT/b FAID_BIN=build-gpu/bin PEAK_SETS="r9once0 default" PROFILE_KERNELS="faid_sigma_clip" CONFIGS=" " SWEEP="" KINDS="" SIZES="" \
  DAEMON_BENCH=0 INT_VARIANTS="" DEC_VARIANTS="" PYFAI_FASTEST=/nonexistent timeout 150 bash tests/bench/gpu-run.sh > $OUT/b/gpu-run.log 2>&1
echo "gpu-run b rc $?"
cd $OUT && tar czf $OUT0/r9a.tgz --exclude='records' --exclude='*.npy' --exclude='data' --exclude='*.ncu-rep' --exclude='src_*.csv' . ; cp b/profile/src_faid_sigma_clip.csv $OUT0/ 2>/dev/null; ls -la $OUT0
sed -n '/^issue 17, peak/,/^registers/p' $OUT/gpu-run.log | head -24
sed -n '/^issue 17, peak/,/^registers/p' $OUT/b/gpu-run.log | head -24
grep -A4 "GPU stage vs PCIe" $OUT/gpu-run.log | head -6
grep -i "pyFAI\|x pyFAI" $OUT/gpu-run.log | grep -v "^gpu-run: peak set" | tail -10
cat $OUT/b/profile/summary.txt 2>/dev/null | head -12
date -u
