#!/usr/bin/env bash
# Round 5 final, call 1 (one H100): the peak kernel sets beside the defaults; the whole daemon
# without peaks (main / rx / collect)
set -u
OUT=${OUT:-/tmp/out}
R=$PWD
if [ ! -d .device/rt ]; then mkdir -p .device/rt; for d in .device/debs/*.deb; do dpkg-deb -x $d .device/rt; done; fi
export LD_LIBRARY_PATH=$R/.device/rt/usr/lib/x86_64-linux-gnu:$R/.device/rt/lib/x86_64-linux-gnu
export FAID_BIN=$R/build-gpu/bin DEVICE=gpu
date -u; nvidia-smi --query-gpu=name --format=csv,noheader
OUT=$OUT/pk FRAMES=${FR:-300} CONFIGS=" " KINDS="" SWEEP="" SIZES="" INT_VARIANTS="" DAEMON_BENCH=0 \
  PEAK_SETS="${SETS:?}" timeout ${TMO:-300} bash tests/bench/gpu-run.sh > $OUT/pk.txt 2>&1
echo "gpu-run rc $?"
grep -n -A50 "issue 17, peak" $OUT/pk.txt | grep -v '^[0-9]*-faid-bench on\|config  *variant' | head -64
grep -E "WRONG|FAILED|WARNING" $OUT/pk.txt | grep -v 'debs\|libnvidia' | head -20
date -u
if [ "${DB:-1}" = 1 ]; then
  o=$OUT/db_none
  OUT=$o FRAMES=6000 PEAKS=none CONNS=2 LAT_RUNS=1 CEIL_RUNS=3 BENCH=0 COMPARE="${COMPARE:-}" TIMEOUT=60 LAT_FRAMES=2000 \
    timeout ${DTMO:-200} bash tests/bench/daemon-bench.sh > $o.txt 2>&1
  echo "== daemon-bench peaks none rc $?"
  sed -n '/^zmq ceiling, 1/,$p' $o/daemon-bench.txt | grep -v '^ *$' | head -40
  tar czf $OUT/db_none_logs.tgz -C $o . 2>/dev/null
fi
date -u
