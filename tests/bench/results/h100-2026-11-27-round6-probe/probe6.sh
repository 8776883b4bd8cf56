#!/usr/bin/env bash
# GPU probe (session of 2026-11-27 05:00, round 6): the sigma clip from the copy in entry order
# (FAID_SIGCLIP_PERM) beside the defaults, one H100
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
B=build-gpu/bin/faid-bench
for s in "" "FAID_SIGCLIP_PERM=1" "FAID_SIGCLIP_PERM=2"; do
  env $s FAID_X=1 timeout 60 $B --device gpu --frames 200 --split full --variants fused --depth 1 --batch 1 --peaks pyfai --set peaks.cycles=0 > $OUT/c0_${s##*=}.log 2>&1
  echo "== cycles 0 [$s] rc $?: $(grep -E '^ *full +fused' $OUT/c0_${s##*=}.log | tr -s ' ')"
done
tar czf $OUT/pk_logs.tgz -C $OUT/pk . 2>/dev/null
date -u
