#!/usr/bin/env bash
# GPU probe (session of 2026-11-27 07:25, round 7): can Nsight Compute read faid's OpenCL
# kernels? If so, the stall reasons of the sigma clip, the finders and the decoder.
set -u
OUT=${OUT:-/tmp/out}
R=$PWD
if [ ! -d .device/rt ]; then mkdir -p .device/rt; for d in .device/debs/*.deb; do dpkg-deb -x $d .device/rt; done; fi
export LD_LIBRARY_PATH=$R/.device/rt/usr/lib/x86_64-linux-gnu:$R/.device/rt/lib/x86_64-linux-gnu
mkdir -p /etc/OpenCL/vendors; echo /usr/lib/libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd
date -u; nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1 || ls /usr/local/cuda/bin/ncu 2>/dev/null)
echo "ncu: $NCU"; $NCU --version 2>&1 | tail -1
B=build-gpu/bin/faid-bench
SEC="--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis"
run() { # name kernel-regex skip count bench-args...
  local n=$1 k=$2 s=$3 c=$4; shift 4
  timeout ${TMO:-150} $NCU --target-processes all --kernel-name "regex:$k" --launch-skip $s --launch-count $c $SEC \
    --print-summary none $B --device gpu "$@" > $OUT/ncu_$n.txt 2>&1
  echo "== $n rc $? $(grep -c 'Section: ' $OUT/ncu_$n.txt) sections; $(grep -m1 -E 'No kernels were profiled|==ERROR==' $OUT/ncu_$n.txt)"
}
run clip faid_sigma_clip 2 1 --frames 4 --split full --variants fused --depth 1 --batch 1 --peaks pyfai
if grep -q 'Section: ' $OUT/ncu_clip.txt; then
  run pick 'faid_pick' 4 3 --frames 4 --split full --variants fused --depth 1 --batch 1 --peaks pyfai
  run pf8 'faid_pf8' 8 4 --frames 4 --split full --variants fused --depth 1 --batch 1 --peaks peakfinder8
  run dec 'bslz4_decode|faid_integrate' 4 4 --frames 8 --split full --variants fused --depth 4 --batch 4
  # the clip's source-level hot spots
  timeout 150 $NCU --target-processes all --kernel-name regex:faid_sigma_clip --launch-skip 2 --launch-count 1 \
    --section SourceCounters --print-summary none $B --device gpu --frames 4 --split full --variants fused --depth 1 --batch 1 --peaks pyfai > $OUT/ncu_clip_src.txt 2>&1
  echo "== clip_src rc $?"
fi
date -u
