#!/usr/bin/env bash
# round 9, four GPUs of one host (issue 17's 4-GPU rows at the commit that lands): the GPU stage
# and both peak paths on 1 and 4 devices (faid-bench --devices gpu:N), then the whole daemon on
# every GPU with 4 input connections, no peaks, twice; the host's topology and NUMA nodes
set -u
OUT0=${OUT:-/tmp/out}; OUT=/tmp/r9x4; rm -rf $OUT; mkdir -p $OUT
R=$PWD
if [ ! -d .device/rt ]; then mkdir -p .device/rt; for d in .device/debs/*.deb; do dpkg-deb -x $d .device/rt; done; fi
export LD_LIBRARY_PATH=$R/.device/rt/usr/lib/x86_64-linux-gnu:$R/.device/rt/lib/x86_64-linux-gnu
date -u; nvidia-smi -L; nproc
nvidia-smi topo -m > $OUT/topo.txt 2>&1; (numactl --hardware || lscpu | grep -i numa) > $OUT/numa.txt 2>&1
mkdir -p $OUT/scale
OUT=$OUT/scale FAID_BIN=build-gpu/bin SCALE="1 4" SCALE_CONFIGS="full pk-pyfai pk-pf8" SCALE_FRAMES=5000 SCALE_SHARED="" \
  PEAK_SETS="" CONFIGS=" " SWEEP="" KINDS="" SIZES="" DAEMON_BENCH=0 INT_VARIANTS="" DEC_VARIANTS="" PYFAI_FASTEST=/nonexistent \
  timeout 170 bash tests/bench/gpu-run.sh > $OUT/scale/gpu-run.log 2>&1
echo "scale rc $?"
sed -n '/^GPU stage on several devices/,/^$/p' $OUT/scale/gpu-run.log | grep -v "^ *dev " | head -12
date -u
export FAID_BIN=$R/build-gpu/bin
for k in 1 2; do
  o=$OUT/d4_$k
  OUT=$o DEVICE=auto FRAMES=16000 CONNS=4 COMPARE="" LAT_RUNS=1 CEIL_RUNS=3 BENCH=0 TIMEOUT=60 LAT_FRAMES=2000 \
    timeout 130 bash tests/bench/daemon-bench.sh > $o.txt 2>&1
  echo "== daemon 4 GPUs run $k rc $?"
  sed -n '/^zmq ceiling, 1/,/^clean stop/p' $o/daemon-bench.txt | grep -v '^ *$' | head -8
  date -u
done
cd $OUT && tar czf $OUT0/r9x4.tgz --exclude='*.jsonl' --exclude='records' --exclude='*.npy' --exclude='data' --exclude='*.bslz4' . ; ls -la $OUT0
