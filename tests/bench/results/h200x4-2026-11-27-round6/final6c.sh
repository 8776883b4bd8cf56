#!/usr/bin/env bash
# Round 6, 4 GPUs: the whole daemon on every GPU, 1 / 4 connections, no peaks, the senders
# started together (--start-at)
set -u
OUT=${OUT:-/tmp/out}
R=$PWD
if [ ! -d .device/rt ]; then mkdir -p .device/rt; for d in .device/debs/*.deb; do dpkg-deb -x $d .device/rt; done; fi
export LD_LIBRARY_PATH=$R/.device/rt/usr/lib/x86_64-linux-gnu:$R/.device/rt/lib/x86_64-linux-gnu
export FAID_BIN=$R/build-gpu/bin
date -u; nvidia-smi -L; nproc
o=$OUT/d4
OUT=$o DEVICE=auto FRAMES=${FR:-12000} CONNS=4 COMPARE="${COMPARE-}" LAT_RUNS=1 CEIL_RUNS=3 BENCH=0 TIMEOUT=60 LAT_FRAMES=2000 \
  timeout ${DTMO:-200} bash tests/bench/daemon-bench.sh > $o.txt 2>&1
echo "daemon 4 GPUs rc $?"; sed -n '/^zmq ceiling, 1/,$p' $o/daemon-bench.txt | grep -E '^(zmq|daemon|latency|clean|throughput| )' | head -30
tar czf $OUT/d4_logs.tgz -C $o . 2>/dev/null
date -u
