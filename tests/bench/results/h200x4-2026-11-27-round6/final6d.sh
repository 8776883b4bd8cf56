#!/usr/bin/env bash
# Round 6, 4 GPUs, last call: compute alone against the slot shape on one device (is it the
# decodes and the integration sharing the device?), then the whole daemon on every GPU with
# long series (the senders' end spread weighs less)
set -u
OUT=${OUT:-/tmp/out}
R=$PWD
if [ ! -d .device/rt ]; then mkdir -p .device/rt; for d in .device/debs/*.deb; do dpkg-deb -x $d .device/rt; done; fi
export LD_LIBRARY_PATH=$R/.device/rt/usr/lib/x86_64-linux-gnu:$R/.device/rt/lib/x86_64-linux-gnu
export FAID_BIN=$R/build-gpu/bin
date -u; nvidia-smi -L | head -1; nproc
B=build-gpu/bin/faid-bench
mkdir -p $OUT/shape
for db in "16 1" "8 2" "4 4" "2 8" "8 4" "4 8"; do
  set -- $db
  timeout 60 $B --device 0 --frames 400 --split full --variants pipelined,compute --depth $1 --batch $2 --json $OUT/shape/d$1_b$2.json > $OUT/shape/d$1_b$2.log 2>&1
  echo "depth $1 batch $2 rc $?: $(grep -E '^compute alone' $OUT/shape/d$1_b$2.log | head -1)"
done
timeout 60 $B --decode --device 0 --frames 400 --depth 8 > $OUT/shape/decode8.log 2>&1; tail -3 $OUT/shape/decode8.log
date -u
o=$OUT/d4
OUT=$o DEVICE=auto FRAMES=${FR:-40000} CONNS=4 COMPARE="" LAT_RUNS=1 CEIL_RUNS=3 BENCH=0 TIMEOUT=90 LAT_FRAMES=2000 \
  timeout ${DTMO:-300} bash tests/bench/daemon-bench.sh > $o.txt 2>&1
echo "daemon 4 GPUs rc $?"; sed -n '/^zmq ceiling, 1/,$p' $o/daemon-bench.txt | grep -E '^(zmq|daemon|latency|clean|throughput| )' | head -30
for f in $o/tpn.replay*; do grep -E '^rate:' $f | cut -c1-60; done
tar czf $OUT/d4_logs.tgz -C $o . 2>/dev/null
date -u
