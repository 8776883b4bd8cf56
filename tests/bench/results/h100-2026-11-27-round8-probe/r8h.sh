#!/usr/bin/env bash
# round 8 call h: the gather's owners by the float reciprocal (SC_FDIV) against the integer division,
# the chunks of 4 again, and the clip's profile at faid's register cap (.maxnreg) (one H100)
set -u
OUT0=${OUT:-/tmp/out}; export OUT=/tmp/r8h; rm -rf $OUT; mkdir -p $OUT
date -u
FAID_BIN=build-gpu/bin PEAK_SETS="default r8fdiv0 r8cgu4" PROFILE_KERNELS="faid_sigma_clip" CONFIGS=" " SWEEP="" KINDS="" SIZES="" \
  DAEMON_BENCH=0 INT_VARIANTS="" DEC_VARIANTS="" PYFAI_FASTEST=/nonexistent timeout 540 bash tests/bench/gpu-run.sh > $OUT/gpu-run.log 2>&1
echo "gpu-run rc $?"
cd $OUT && tar czf $OUT0/r8h.tgz --exclude='records' --exclude='*.npy' --exclude='data' --exclude='*.ncu-rep' . ; ls -la $OUT0
sed -n '/^issue 17, peak/,/^registers/p' $OUT/gpu-run.log | head -24
date -u
cat $OUT/profile/summary.txt 2>/dev/null
