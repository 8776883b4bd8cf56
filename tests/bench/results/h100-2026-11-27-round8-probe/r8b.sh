#!/usr/bin/env bash
# round 8 probe b: profiles of every kernel (one H100); text outputs only come back
set -u
OUT0=${OUT:-/tmp/out}; export OUT=/tmp/r8b; rm -rf $OUT; mkdir -p $OUT
R=$PWD
if [ ! -d .device/rt ]; then mkdir -p .device/rt; for d in .device/debs/*.deb; do dpkg-deb -x $d .device/rt; done; fi
mkdir -p /etc/OpenCL/vendors; echo /usr/lib/libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd
date -u
FAID_BIN=build-gpu/bin timeout 500 bash tests/bench/profile-kernels.sh > $OUT/profile.out 2>&1
echo "profile rc $?"
cd $OUT && tar czf $OUT0/r8b.tgz --exclude='*.ncu-rep' --exclude='records' . ; ls -la $OUT0; cd $R
tail -30 $OUT/profile.out
for f in $OUT/ncu_faid_integrate_raw*.run.txt $OUT/ncu_faid_pf8_cand.run.txt; do echo "== $f"; tail -5 $f; done
date -u
