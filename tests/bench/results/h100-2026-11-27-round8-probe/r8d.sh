#!/usr/bin/env bash
# round 8 probe d: the sigma clip's occupancy and SC_AZSEL (one H100)
set -u
OUT0=${OUT:-/tmp/out}; export OUT=/tmp/${TAG:-r8d}; rm -rf $OUT; mkdir -p $OUT
date -u
FAID_BIN=build-gpu/bin PEAK_SETS="${SETS:-default cgm80 r8m64 r8azsel r8azm80 r8w128}" CONFIGS=" " SWEEP="" KINDS="" SIZES="" \
  DAEMON_BENCH=0 INT_VARIANTS="" DEC_VARIANTS="" PYFAI_FASTEST=/nonexistent timeout 570 bash tests/bench/gpu-run.sh > $OUT/gpu-run.log 2>&1
echo "gpu-run rc $?"
cd $OUT && tar czf $OUT0/${TAG:-r8d}.tgz --exclude='*.ncu-rep' --exclude='records' --exclude='*.npy' --exclude='data' . ; ls -la $OUT0
sed -n '/^issue 17, peak/,$p' $OUT/gpu-run.log | head -40
grep -h "faid_sigma_clip" $OUT/pkset_*_pk-pyfai.log | grep -i "ptxas\|regist" | head; grep -h -A1 "sigma_clip.cl" $OUT/pkset_*_pk-pyfai.log | grep "ptxas info    : Used" | head
date -u
