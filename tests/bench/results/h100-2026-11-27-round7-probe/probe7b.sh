#!/usr/bin/env bash
# GPU probe (round 7): faid's kernels recorded by the launch recorder, replayed through CUDA and
# read by Nsight Compute (which does not see OpenCL launches). One H100.
set -u
OUT0=${OUT:-/tmp/out}; OUT=/tmp/p7; rm -rf $OUT; mkdir -p $OUT
save() { tar czf $OUT0/probe7b.tgz -C $OUT . ; }
R=$PWD
if [ ! -d .device/rt ]; then mkdir -p .device/rt; for d in .device/debs/*.deb; do dpkg-deb -x $d .device/rt; done; fi
RT=$R/.device/rt/usr/lib/x86_64-linux-gnu:$R/.device/rt/lib/x86_64-linux-gnu
mkdir -p /etc/OpenCL/vendors; echo /usr/lib/libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd
date -u
B=build-gpu/bin/faid-bench
REC=/tmp/rec; rm -rf $REC
A="--device gpu --frames 3 --split full --variants fused --depth 1 --batch 1 --no-check"
LD_LIBRARY_PATH=$RT FAID_CLREC_DIR=$REC FAID_CLREC_SKIP=1 FAID_CLREC_KERNELS=faid_sigma_clip,faid_pick_flag,faid_pick_write,bslz4_decode,faid_integrate_raw \
  LD_PRELOAD=$R/build-gpu/lib/libfaid_clrec.so timeout 60 $B $A --peaks pyfai > $OUT/rec_pyfai.log 2>&1
echo "rec pyfai rc $?"
LD_LIBRARY_PATH=$RT FAID_CLREC_DIR=$REC FAID_CLREC_SKIP=1 FAID_CLREC_KERNELS=faid_pf8_prep,faid_pf8_radial,faid_pf8_cand,faid_pf8_fill \
  LD_PRELOAD=$R/build-gpu/lib/libfaid_clrec.so timeout 60 $B $A --peaks peakfinder8 > $OUT/rec_pf8.log 2>&1
echo "rec pf8 rc $?"
grep -h "faid_clrec\|^sigma clip\|^peak finding\|^ finder\|^decode\|^integrate" $OUT/rec_*.log | head -30
du -sh $REC; save
K="faid_sigma_clip faid_pick_flag bslz4_decode faid_integrate_raw faid_pf8_fill faid_pf8_prep faid_pf8_radial faid_pf8_cand faid_pick_write"
KN="faid_sigma_clip faid_pf8_fill faid_pick_flag bslz4_decode faid_integrate_raw faid_pf8_prep"
for k in $K; do
  [ -d $REC/$k ] || continue
  timeout 40 python3 tests/bench/cl_replay.py --backend cuda --repeat 20 $REC/$k > $OUT/replay_$k.txt 2>&1
  echo "== replay $k rc $?: $(grep -E 'first launch|median|differ|cl_replay' $OUT/replay_$k.txt | tr '\n' ' ' | cut -c1-300)"
done; save
NCU=/usr/local/cuda/bin/ncu
SEC="--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section InstructionStats"
for k in $KN; do
  [ -d $REC/$k ] || continue
  extra=""; [ $k = faid_sigma_clip -o $k = faid_pf8_fill -o $k = faid_pick_flag -o $k = bslz4_decode ] && extra="--section SourceCounters"
  timeout 60 $NCU --kernel-name $k --launch-count 1 $SEC $extra --print-summary none python3 tests/bench/cl_replay.py --backend cuda $REC/$k > $OUT/ncu_$k.txt 2>&1
  echo "== ncu $k rc $? $(grep -c 'Section: ' $OUT/ncu_$k.txt) sections $(grep -m1 -E 'No kernels|ERROR' $OUT/ncu_$k.txt)"; save
done
for k in faid_sigma_clip bslz4_decode; do
  [ -f $REC/$k/program.ptx ] && /usr/local/cuda/bin/ptxas -arch=sm_90 -v $REC/$k/program.ptx -o /tmp/$k.cubin > $OUT/ptxas_$k.txt 2>&1
done
save
date -u
