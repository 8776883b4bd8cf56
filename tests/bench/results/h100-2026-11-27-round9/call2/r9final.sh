#!/usr/bin/env bash
# round 9's final call (one H100): the whole-daemon rows at the commit that lands (peaks pyfai:
# one and two connections, three latency runs at 1 kHz; no peaks: one and four connections on
# the one GPU), then the lean 2D cake
set -u
OUT0=${OUT:-/tmp/out}; OUT=/tmp/r9final; rm -rf $OUT; mkdir -p $OUT
R=$PWD
if [ ! -d .device/rt ]; then mkdir -p .device/rt; for d in .device/debs/*.deb; do dpkg-deb -x $d .device/rt; done; fi
export LD_LIBRARY_PATH=$R/.device/rt/usr/lib/x86_64-linux-gnu:$R/.device/rt/lib/x86_64-linux-gnu
export FAID_BIN=$R/build-gpu/bin DEVICE=gpu
date -u; nvidia-smi --query-gpu=name --format=csv,noheader; nproc
o=$OUT/db_pyfai
OUT=$o FRAMES=6000 PEAKS=pyfai CONNS=2 LAT_RUNS=3 CEIL_RUNS=3 BENCH=0 COMPARE="" TIMEOUT=60 LAT_FRAMES=3000 \
  timeout 220 bash tests/bench/daemon-bench.sh > $o.txt 2>&1
echo "== daemon-bench peaks pyfai rc $?"
sed -n '/^zmq ceiling, 1/,$p' $o/daemon-bench.txt | grep -v '^ *$' | head -40
date -u
o=$OUT/db_none
OUT=$o FRAMES=8000 PEAKS=none CONNS=4 LAT_RUNS=1 CEIL_RUNS=3 BENCH=0 COMPARE="" TIMEOUT=60 LAT_FRAMES=2000 \
  timeout 140 bash tests/bench/daemon-bench.sh > $o.txt 2>&1
echo "== daemon-bench peaks none, 4 connections, rc $?"
sed -n '/^zmq ceiling, 1/,$p' $o/daemon-bench.txt | grep -v '^ *$' | head -30
date -u
mkdir -p $OUT/cake
OUT=$OUT/cake FAID_BIN=build-gpu/bin PEAK_SETS="" CONFIGS="cake-lean" SWEEP="" KINDS="" SIZES="" DAEMON_BENCH=0 \
  INT_VARIANTS="" DEC_VARIANTS="" PYFAI_FASTEST=/nonexistent timeout 120 bash tests/bench/gpu-run.sh > $OUT/cake/gpu-run.log 2>&1
echo "gpu-run cake rc $?"
grep -B2 -A6 -i "cake" $OUT/cake/gpu-run.log | tail -24
cd $OUT && tar czf $OUT0/r9final.tgz --exclude='records' --exclude='*.npy' --exclude='data' --exclude='*.bslz4' --exclude='*.ncu-rep' . ; ls -la $OUT0
date -u
