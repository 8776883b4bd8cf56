#!/usr/bin/env bash
# GPU probe (session of 2026-11-27): where the sigma clip's time goes (cycles, error model), one H100
set -u
OUT=${OUT:-/tmp/out}
export LD_LIBRARY_PATH=$PWD/.device/rt/usr/lib/x86_64-linux-gnu:$PWD/.device/rt/lib/x86_64-linux-gnu
if [ ! -d .device/rt ]; then mkdir -p .device/rt; for d in .device/debs/*.deb; do dpkg-deb -x $d .device/rt; done; fi
date -u; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
B=build-gpu/bin/faid-bench
run() { # name, args...
  local n=$1; shift
  timeout 90 $B --device gpu --frames ${FR:-200} --split full --variants fused --depth 1 --batch 1 "$@" > $OUT/$n.log 2>&1
  echo "== $n rc $? $(grep -E '^(sigma clip|peak finding|peak prep|integrate|decode) ' $OUT/$n.log | tr -s ' ' | tr '\n' ';')"
}
for em in azimuthal poisson; do
  for c in 0 1 2 5; do run clip_${em}_$c --peaks pyfai --set peaks.cycles=$c,peaks.error_model=$em; done
done
run clip_az5_cut3 --peaks pyfai --set peaks.cutoff_clip=3
run clip_az5_wg128 --peaks pyfai
FAID_SIGCLIP_WG=128 run clip_wg128 --peaks pyfai
for n in 500 2000; do run clip_npt$n --peaks pyfai --npt $n; done
timeout 120 $B --host-path --frames 300 > $OUT/hostpath.log 2>&1; echo "== host-path rc $?"; tail -25 $OUT/hostpath.log
lscpu | grep -E 'Model name|^CPU\(s\)|NUMA|L3'
date -u
