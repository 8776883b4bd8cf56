#!/usr/bin/env bash
# GPU probe 4 (2026-11-27): where the whole daemon's time goes with peaks (per-thread CPU, the
# replay's and the subscriber's own rates), pinned receive and the collect thread beside main;
# the same without peaks; one H100
set -u
OUT=${OUT:-/tmp/out}
R=$PWD
if [ ! -d .device/rt ]; then mkdir -p .device/rt; for d in .device/debs/*.deb; do dpkg-deb -x $d .device/rt; done; fi
export LD_LIBRARY_PATH=$R/.device/rt/usr/lib/x86_64-linux-gnu:$R/.device/rt/lib/x86_64-linux-gnu
export FAID_BIN=$R/build-gpu-probe/bin DEVICE=gpu
date -u; nvidia-smi --query-gpu=name --format=csv,noheader
for pk in ${PKS:-pyfai none}; do
  o=$OUT/db_$pk
  OUT=$o FRAMES=${DFR:-4000} PEAKS=$pk CONNS=2 LAT_RUNS=${LR:-1} BENCH=0 COMPARE="${COMPARE-rx rxcollect}" TIMEOUT=60 LAT_FRAMES=2000 \
    timeout ${DTMO:-250} bash .device/pb/tests/bench/daemon-bench.sh > $o.txt 2>&1
  echo "== daemon-bench peaks $pk rc $?"
  sed -n '/^zmq ceiling, 1/,$p' $o/daemon-bench.txt | grep -v '^ *$' | head -60
  for f in $o/tp1*.replay0 $o/tp1*.sub; do echo "-- $(basename $f): $(grep -E 'rate|frames:' $f | tr '\n' ' ')"; done
  tar czf $OUT/db_${pk}_logs.tgz -C $o . 2>/dev/null
  date -u
done
