#!/usr/bin/env bash
# GPU probe (2026-11-27, round 5 mid-session): the helpers' first kernel variants and the daemon's
# pinned receive / collect thread, one H100; scripts and binaries of the probe merge (probe1)
set -u
OUT=${OUT:-/tmp/out}
R=$PWD
if [ ! -d .device/rt ]; then mkdir -p .device/rt; for d in .device/debs/*.deb; do dpkg-deb -x $d .device/rt; done; fi
export LD_LIBRARY_PATH=$R/.device/rt/usr/lib/x86_64-linux-gnu:$R/.device/rt/lib/x86_64-linux-gnu
export FAID_BIN=$R/build-gpu-probe/bin DEVICE=gpu
date -u; nvidia-smi --query-gpu=name --format=csv,noheader
if [ "${PK:-1}" = 1 ]; then
OUT=$OUT/pk FRAMES=${FR:-300} CONFIGS=" " KINDS="" SWEEP="" SIZES="" INT_VARIANTS="" DAEMON_BENCH=0 \
  PEAK_SETS="${SETS:-default cg cgu8 cgr1 pcand pcandpf pmerge pcandm pprep4 all}" \
  timeout ${TMO:-300} bash .device/pb/tests/bench/gpu-run.sh > $OUT/pk.txt 2>&1
echo "gpu-run rc $?"
grep -n -A40 "issue 17, peak" $OUT/pk.txt | head -60
grep -E "WRONG|FAILED|WARNING" $OUT/pk.txt | head -20; grep -A20 "registers per work-item" $OUT/pk.txt | head -24
date -u
fi
if [ "${DB:-1}" = 1 ]; then
OUT=$OUT/db FRAMES=${DFR:-4000} PEAKS=pyfai CONNS=2 LAT_RUNS=1 BENCH=0 COMPARE="${COMPARE-rx collect rxcollect}" TIMEOUT=60 LAT_FRAMES=2000 \
  timeout ${DTMO:-260} bash .device/pb/tests/bench/daemon-bench.sh > $OUT/db.txt 2>&1
echo "daemon-bench rc $?"
grep -E '^(zmq|daemon|latency|clean|throughput)' $OUT/db.txt | head -40
date -u
fi
