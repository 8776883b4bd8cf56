#!/usr/bin/env bash
# round 9: the whole daemon with peaks (pyfai) twice more at the commit that lands (one H100):
# one and two connections, three latency runs at 1 kHz each, for the spread of r9final's rows
set -u
OUT0=${OUT:-/tmp/out}; OUT=/tmp/r9rep; rm -rf $OUT; mkdir -p $OUT
R=$PWD
if [ ! -d .device/rt ]; then mkdir -p .device/rt; for d in .device/debs/*.deb; do dpkg-deb -x $d .device/rt; done; fi
export LD_LIBRARY_PATH=$R/.device/rt/usr/lib/x86_64-linux-gnu:$R/.device/rt/lib/x86_64-linux-gnu
export FAID_BIN=$R/build-gpu/bin DEVICE=gpu
date -u; nvidia-smi --query-gpu=name --format=csv,noheader; nproc
for k in 1 2; do
  o=$OUT/db_pyfai$k
  OUT=$o FRAMES=6000 PEAKS=pyfai CONNS=2 LAT_RUNS=3 CEIL_RUNS=3 BENCH=0 COMPARE="" TIMEOUT=60 LAT_FRAMES=3000 \
    timeout 200 bash tests/bench/daemon-bench.sh > $o.txt 2>&1
  echo "== daemon-bench peaks pyfai run $k rc $?"
  sed -n '/^zmq ceiling, 1/,/^clean stop/p' $o/daemon-bench.txt | grep -v '^ *$' | head -12
  date -u
done
cd $OUT && tar czf $OUT0/r9rep.tgz --exclude='records' --exclude='*.npy' --exclude='data' --exclude='*.bslz4' . ; ls -la $OUT0
