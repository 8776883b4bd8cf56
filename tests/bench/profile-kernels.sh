#!/usr/bin/env bash
# profile-kernels.sh: where each of faid's kernels spends its time, on the GPU host. Records one
# launch of each kernel named in KERNELS (faid-bench on the EIGER 4M frames with the launch
# recorder preloaded, tests/bench/clrec/), replays each record through CUDA
# (tests/bench/cl_replay.py: the recorded bytes or exit status 1) and profiles the replay with
# Nsight Compute, which does not see OpenCL launches. Prints one line per kernel
# (tests/bench/ncu_summary.py) and keeps the reports in $OUT. gpu-run.sh runs it when
# PROFILE_KERNELS is set.
#
# Environment: FAID_BIN (default build/bin), DEVICE (default gpu), OUT (default
# tests/out/profile), KERNELS (default below), BACKEND (cuda, default; opencl replays through
# pyopencl where there is no CUDA, and profiles nothing), NCU (the ncu binary; default ncu on the
# PATH or /usr/local/cuda/bin/ncu; "none" profiles nothing), NCU_SECTIONS (default below),
# BENCH_EXTRA (more faid-bench arguments, e.g. "--detector eiger_1m" for a run on PoCL), REPEAT
# (timed replays after the checked one, default 20), PYTHON (the replay's python, default python3:
# on the GPU host the one with cupy).
#
# Three recording runs, each its own folder (a kernel is recorded by the first run that has it):
# the pyfai picker one frame alone (sigma clip, picker, decoder, one-frame integration), the same
# with peakfinder8 (its five kernels), and the pipelined GPU stage without peaks (the batched
# integration, faid_integrate_raw_b). The second launch of each kernel is the one recorded.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1
BIN=${FAID_BIN:-build/bin}
DEVICE=${DEVICE:-gpu}
LOG=${OUT:-$root/tests/out/profile}
BACKEND=${BACKEND:-cuda}
REPEAT=${REPEAT:-20}
PYTHON=${PYTHON:-python3}
BENCH_EXTRA=${BENCH_EXTRA:-}
KERNELS=${KERNELS:-faid_sigma_clip faid_pick_flag faid_pick_write bslz4_decode faid_integrate_raw faid_integrate_raw_b faid_pf8_prep faid_pf8_radial faid_pf8_cand faid_pf8_fill faid_pf8_write}
NCU_SECTIONS=${NCU_SECTIONS:-SpeedOfLight Occupancy LaunchStats WarpStateStats SchedulerStats MemoryWorkloadAnalysis ComputeWorkloadAnalysis InstructionStats SourceCounters}
if [ -z "${NCU:-}" ]; then
    NCU=$(command -v ncu || { [ -x /usr/local/cuda/bin/ncu ] && echo /usr/local/cuda/bin/ncu; } || echo none)
fi
mkdir -p "$LOG" || { echo "profile-kernels: cannot create $LOG" >&2; exit 1; }
say() { echo "profile-kernels: $*" | tee -a "$LOG/profile.log"; }
clrec=$(cd "$BIN/.." && pwd)/lib/libfaid_clrec.so
[ -f "$clrec" ] || { say "ERROR: $clrec not found (build the target faid_clrec, carry build/lib)"; exit 1; }

# faid-bench's runtime libraries for the recording runs only: the replay's python and ncu keep
# the host's own
orig_ld=${LD_LIBRARY_PATH:-}
# shellcheck source=tests/bench/lib.sh
. "$root/tests/bench/lib.sh"
bench_runtime "$LOG/profile.log"
bench_ld=${LD_LIBRARY_PATH:-}
export LD_LIBRARY_PATH=$orig_ld
list=$(echo "$KERNELS" | tr ' ' ',')
rec=$LOG/records
rm -rf "$rec"
record() { # name, faid-bench arguments
    local name=$1
    shift
    # shellcheck disable=SC2086
    LD_LIBRARY_PATH=$bench_ld FAID_CLREC_DIR="$rec/$name" FAID_CLREC_KERNELS="$list" \
        FAID_CLREC_SKIP=1 LD_PRELOAD="$clrec" timeout 300 "$BIN/faid-bench" --device "$DEVICE" \
        --split full --no-check "$@" $BENCH_EXTRA >"$LOG/record_$name.log" 2>&1 ||
        say "WARNING: recording run $name failed (see $LOG/record_$name.log)"
}
record pyfai --frames 3 --variants fused --depth 1 --batch 1 --peaks pyfai
record pf8 --frames 3 --variants fused --depth 1 --batch 1 --peaks peakfinder8
record pipe --frames 12 --variants pipelined --depth 2 --batch 4
rm -f "$LOG"/replay_*.txt "$LOG"/ncu_*.txt "$LOG"/src_*.csv
for k in $KERNELS; do
    d=""
    for r in pyfai pf8 pipe; do
        [ -f "$rec/$r/$k/meta.json" ] && { d=$rec/$r/$k; break; }
    done
    if [ -z "$d" ]; then
        say "$k: no launch recorded (not run by these configurations?)"
        continue
    fi
    timeout 120 "$PYTHON" tests/bench/cl_replay.py --backend "$BACKEND" --repeat "$REPEAT" "$d" \
        >"$LOG/replay_$k.txt" 2>&1
    say "$k: replay exit status $? ($(grep -cE 'identical' "$LOG/replay_$k.txt") buffers identical)"
    if [ "$NCU" != none ] && [ "$BACKEND" = cuda ]; then
        secs=""
        for s in $NCU_SECTIONS; do secs="$secs --section $s"; done
        # shellcheck disable=SC2086
        timeout 180 "$NCU" --kernel-name "$k" --launch-count 1 $secs --print-summary none \
            --export "$LOG/ncu_$k" --force-overwrite \
            "$PYTHON" tests/bench/cl_replay.py --backend cuda "$d" >"$LOG/ncu_$k.run.txt" 2>&1 ||
            say "WARNING: ncu on $k: exit status $? (see $LOG/ncu_$k.run.txt)"
        # ncu prints no section when it exports (measured: every text report of the first run
        # was empty), so the text report comes from the exported one
        if [ -f "$LOG/ncu_$k.ncu-rep" ]; then
            timeout 120 "$NCU" --import "$LOG/ncu_$k.ncu-rep" --page details --print-summary none \
                >"$LOG/ncu_$k.txt" 2>&1 || say "WARNING: ncu --import of $k: exit status $?"
        fi
        # the machine instructions with their stall samples (SourceCounters), as CSV: where in
        # the kernel the warps wait (ncu_summary.py names the three that waited most)
        if [ -f "$LOG/ncu_$k.ncu-rep" ]; then
            timeout 120 "$NCU" --import "$LOG/ncu_$k.ncu-rep" --page source --csv \
                --print-source sass >"$LOG/src_$k.csv" 2>"$LOG/src_$k.err" ||
                say "note: no per-instruction table for $k (see $LOG/src_$k.err)"
        fi
    fi
done
"$PYTHON" tests/bench/ncu_summary.py "$LOG" | tee "$LOG/summary.txt"
