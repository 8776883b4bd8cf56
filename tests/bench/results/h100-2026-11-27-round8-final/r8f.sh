#!/usr/bin/env bash
# round 8 call f: the defaults after the probes (gather, fill, register cap, raking layout, the
# picker's flag pass) against r8rake0 / r8m0, with the pyFAI references of the same run, the GPU
# stage and compute alone; profiles of the clip and the picker's flag pass (one H100)
set -u
OUT0=${OUT:-/tmp/out}; export OUT=/tmp/${TAG:-r8f}; rm -rf $OUT; mkdir -p $OUT
date -u
FAID_BIN=build-gpu/bin PEAK_SETS="${SETS:-default r8rake0 r8m0}" PROFILE_KERNELS="${PK:-faid_sigma_clip faid_pick_flag}" \
  CONFIGS="${CF:-full}" SWEEP="" KINDS="synthetic" SIZES="" DAEMON_BENCH=0 INT_VARIANTS="" DEC_VARIANTS="" \
  timeout 540 bash tests/bench/gpu-run.sh > $OUT/gpu-run.log 2>&1
echo "gpu-run rc $?"
cd $OUT && tar czf $OUT0/${TAG:-r8f}.tgz --exclude='*.ncu-rep' --exclude='records' --exclude='*.npy' --exclude='data' --exclude='src_*.csv' . ; ls -la $OUT0
sed -n '/^issue 17, peak/,/^registers/p' $OUT/gpu-run.log | head -30
grep -A4 "GPU stage vs PCIe" $OUT/gpu-run.log | head -6
grep -i "pyfai\|x pyFAI\|OCL_Peak" $OUT/gpu-run.log | grep -v "^gpu-run: peak set" | tail -12
cat $OUT/profile/summary.txt 2>/dev/null | head -20
date -u
