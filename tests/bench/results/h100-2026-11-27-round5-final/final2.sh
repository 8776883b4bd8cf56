#!/usr/bin/env bash
# Round 5 final, call 2 (one H100): the whole daemon with peaks (pyfai), twice, 3 latency runs each
set -u
OUT=${OUT:-/tmp/out}
R=$PWD
if [ ! -d .device/rt ]; then mkdir -p .device/rt; for d in .device/debs/*.deb; do dpkg-deb -x $d .device/rt; done; fi
export LD_LIBRARY_PATH=$R/.device/rt/usr/lib/x86_64-linux-gnu:$R/.device/rt/lib/x86_64-linux-gnu
export FAID_BIN=$R/build-gpu/bin DEVICE=gpu
date -u; nvidia-smi --query-gpu=name --format=csv,noheader
for k in ${ROUNDS:-1 2}; do
  o=$OUT/db_pyfai_$k
  OUT=$o FRAMES=6000 PEAKS=pyfai CONNS=2 LAT_RUNS=3 CEIL_RUNS=3 BENCH=0 COMPARE="${COMPARE:-}" TIMEOUT=60 LAT_FRAMES=3000 \
    timeout ${DTMO:-270} bash tests/bench/daemon-bench.sh > $o.txt 2>&1
  echo "== daemon-bench peaks pyfai round $k rc $?"
  sed -n '/^zmq ceiling, 1/,$p' $o/daemon-bench.txt | grep -v '^ *$' | head -44
  tar czf $OUT/db_pyfai_${k}_logs.tgz -C $o . 2>/dev/null
  date -u
done
