#!/usr/bin/env bash
# Round 6 (one H100): the whole daemon with the senders started together (--start-at): with
# peaks (pyfai) 1 / 2 connections and 3 latency runs; without peaks 1 / 4 connections
set -u
OUT=${OUT:-/tmp/out}
R=$PWD
if [ ! -d .device/rt ]; then mkdir -p .device/rt; for d in .device/debs/*.deb; do dpkg-deb -x $d .device/rt; done; fi
export LD_LIBRARY_PATH=$R/.device/rt/usr/lib/x86_64-linux-gnu:$R/.device/rt/lib/x86_64-linux-gnu
export FAID_BIN=$R/build-gpu/bin DEVICE=gpu
date -u; nvidia-smi --query-gpu=name --format=csv,noheader; nproc
if [ "${PK:-1}" = 1 ]; then
  o=$OUT/db_pyfai
  OUT=$o FRAMES=6000 PEAKS=pyfai CONNS=2 LAT_RUNS=3 CEIL_RUNS=3 BENCH=0 COMPARE="${COMPARE:-}" TIMEOUT=60 LAT_FRAMES=3000 \
    timeout ${DTMO:-240} bash tests/bench/daemon-bench.sh > $o.txt 2>&1
  echo "== daemon-bench peaks pyfai rc $?"
  sed -n '/^zmq ceiling, 1/,$p' $o/daemon-bench.txt | grep -v '^ *$' | head -40
  tar czf $OUT/db_pyfai_logs.tgz -C $o . 2>/dev/null
  date -u
fi
if [ "${NP:-1}" = 1 ]; then
  o=$OUT/db_none
  OUT=$o FRAMES=8000 PEAKS=none CONNS=4 LAT_RUNS=1 CEIL_RUNS=3 BENCH=0 COMPARE="" TIMEOUT=60 LAT_FRAMES=2000 \
    timeout ${NTMO:-150} bash tests/bench/daemon-bench.sh > $o.txt 2>&1
  echo "== daemon-bench peaks none, 4 connections, rc $?"
  sed -n '/^zmq ceiling, 1/,$p' $o/daemon-bench.txt | grep -v '^ *$' | head -30
  tar czf $OUT/db_none_logs.tgz -C $o . 2>/dev/null
  date -u
fi
