#!/usr/bin/env bash
# gpu-run.sh: one run on the offline GPU host (recipe of /work/shared/device.md): makes the
# runtime libraries and the NVIDIA OpenCL ICD available, lists the OpenCL devices, runs faid-bench
# on the GPU for a few configurations (with its built-in check against the float64 C reference),
# optionally the pyFAI + silx reference pipeline on the same frame and device, and prints a
# compact table last. Full logs and JSON go to $OUT (if set, else tests/out/gpu-run).
#
# Needs, carried with the working tree: build/ (faid-bench built on the Debian machine),
# .device/debs/*.deb (tests/bench/gpu-prepare.sh), optionally .whl/*.whl (gpu-prepare.sh --wheels)
# for the pyFAI + silx side-by-side run.
#
# Environment: FAID_BIN (default build/bin), DEVICE (default gpu), FRAMES (default 500),
# PYFAI_FRAMES (default 200), CONFIGS (default "full no bbox cake cake-lean u16": which runs to
# do; cake-lean = the cake as the daemon's output.cake lean reads it back, I alone),
# DEPTH and BATCH (slots and frames per slot of the pipelined variants, default 4 and 4), SWEEP
# (default "batch1 batch2 batch8 depth2 depth8 wg128 wg512 wg1024 dwg64 dwg128 parsers0": extra
# pipelined runs of the full-split configuration, one knob changed each, for tuning; "" skips),
# PEAK_VARIANTS (faid-bench variants of the peak configurations pk-pyfai / pk-pf8, default
# "fused,pipelined"), SCALE (device counts of the multi-device GPU-stage run, e.g. "1 2 4"; default
# empty: skipped), SCALE_CONFIGS (configurations scaled, default "full pk-pyfai"), SCALE_FRAMES
# (frames per device of those runs, default FRAMES), SCALE_SHARED (configurations whose largest
# device count runs once more with every device's frames in device 0's pinned memory, as the
# daemon's one input arena: faid-bench --pinned shared; default "full", "" skips), PYFAI_FASTEST
# (path of an extra pyFAI + silx driver run on the dumped frame, default .device/pyfai_fastest.py
# when present), DAEMON_BENCH (0 skips tests/bench/daemon-bench.sh, the whole daemon over ZeroMQ loopback against
# the transport ceiling, run with the best pipelined settings found above), DAEMON_FRAMES (its
# throughput frames, default 20000), DAEMON_COMPARE (its comparison daemons, default "nopin
# writer shared": without the pinned arena, with the files of record on, with every input in one
# shared ZeroMQ context), DAEMON_PEAKS (peaks.algorithm of a second daemon-bench run, one and
# two connections and the 1 kHz latency with peaks, issue 17; default pyfai, none skips it),
# DAEMON_PEAKS_COMPARE (its comparison daemons, default "idle nopin batch1 poll benchpeaks slotd2h
# collect collect4 collectrx collectfill collectrxfill"), WRITER_DIR (the writer
# run's directory), KINDS (frame kinds of the decoder / PCIe-floor runs, default
# "synthetic lowcount"), SIZES (detector presets of the size runs besides the EIGER 4M of the
# lowcount run, default "eiger_1m eiger_9m eiger_16m"; "" skips), SIZE_FRAMES (default 300),
# PEAK_SETS (issue 17: kernel variants of the peak path, each run as pk-pyfai and pk-pf8 with the
# one-frame (fused) and pipelined variants, checked against the reference device like every run;
# default "default c3 reg lm12 lm12r8 fz fzlm12r8 pf8v pf8vg r3 r4rec r4cls r4merge r4gather r4cf r4cfg
# r4np r4win gb4 gb8 gb8r4 gb8m80 gb8m64 wg512 ppf pscan c4 cg0 cg cgu8 cgr1 cgm80 cggb0 cg2 pois cgpois
# cg2pois pcand pcandpf pmerge pcandm pprep4 pband2 pband4 r5 perm1 perm2 perm1cg0 perm1u4 permpois r7spread r7wg r7wgall r8wg0 r8ppf0 r8azsel r8m64 r8azm80 r8w128 r8w128m80 r8m72 r8m96 r8m0 r8rake1 r8rake2 r8cgu4 r8cgu8 r8cgu16 r8gb0 r8fdiv0 r8order1 r9once0 all", names below in psets, a set's
# extra faid-bench arguments in pargs and its "=default" baseline in pbase ("default":
# today's defaults, "reg": the kernels before the run of 2026-11-26, named explicitly); "" skips; the
# issue 17 rows alone: CONFIGS=" " SWEEP="" KINDS="" SIZES="" DAEMON_BENCH=0 INT_VARIANTS=""),
# PEAK_DEPTH
# (slots of those pipelined runs, default 8: 32 frames in flight with BATCH 4, as the issue's
# figures), PEAK_EXTRA (more faid-bench arguments of those runs, e.g. "--detector eiger_1m" for a
# sanity run on PoCL),
# INT_VARIANTS (issue 17: variants of the batched integration kernel, FAID_ENGINE_INTEGRATE
# values, each run as GPU stage and compute alone on the synthetic frames beside "base", the
# default kernel; default "base gather entrynorm prefetch unroll8 gather,entrynorm,prefetch,unroll8";
# "" skips), INT_BATCHES (frames per slot of those runs, default "$BATCH 8"),
# DEC_VARIANTS (issue 17: build variants of the bslz4 decoder, kernels/codec/bslz4.cl's header,
# each run beside the default decoder as one frame alone (fused), GPU stage and compute alone on
# the synthetic frames, checked like every run; names in decdefs below, default "dglob zrun zrun2
# dglob+zrun2 bpg2 bpg2+zrun2 bpg2l+zrun2", each of them decoded byte for byte by unit.codec too;
# "" skips), DEC_BENCH_FRAMES (frames of the decoder-only run of each
# variant, `test_codec bench`: one launch at a time, back to back, and 2 and 4 queues of frames
# in flight, with the compiled program (NVIDIA: PTX) saved as decv_NAME.ptx; default 200, 0 skips;
# and `faid-bench --decode` on the benchmark's own synthetic frames, one frame alone and on
# DECODE_QUEUES queues, default 8), PROFILE_KERNELS (issue 17, round 7: kernels whose recorded
# launch tests/bench/profile-kernels.sh replays through CUDA and profiles with Nsight Compute,
# e.g. "faid_sigma_clip bslz4_decode", or "all" for its own list; default empty: skipped).
set -u

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1
# shellcheck source=tests/bench/lib.sh
. "$root/tests/bench/lib.sh"
BIN=${FAID_BIN:-build/bin}
DEVICE=${DEVICE:-gpu}
FRAMES=${FRAMES:-500}
PYFAI_FRAMES=${PYFAI_FRAMES:-200}
CONFIGS=${CONFIGS:-full no bbox cake cake-lean u16}
DEPTH=${DEPTH:-4}
BATCH=${BATCH:-4}
PEAK_VARIANTS=${PEAK_VARIANTS:-fused,pipelined}
SCALE=${SCALE:-}
SCALE_CONFIGS=${SCALE_CONFIGS:-full pk-pyfai}
SCALE_FRAMES=${SCALE_FRAMES:-$FRAMES}
SCALE_SHARED=${SCALE_SHARED-full}
PYFAI_FASTEST=${PYFAI_FASTEST:-.device/pyfai_fastest.py}
KINDS=${KINDS-synthetic lowcount}
SIZES=${SIZES-eiger_1m eiger_9m eiger_16m}
SIZE_FRAMES=${SIZE_FRAMES:-300}
PEAK_SETS=${PEAK_SETS-default c3 reg lm12 lm12r8 fz fzlm12r8 pf8v pf8vg r3 r4rec r4cls r4merge r4gather r4cf r4cfg r4np r4win gb4 gb8 gb8r4 gb8m80 gb8m64 wg512 ppf pscan c4 cg0 cg cgu8 cgr1 cgm80 cggb0 cg2 pois cgpois cg2pois pcand pcandpf pmerge pcandm pprep4 pband2 pband4 r5 perm1 perm2 perm1cg0 perm1u4 permpois r7spread r7wg r7wgall r8wg0 r8ppf0 r8azsel r8m64 r8azm80 r8w128 r8w128m80 r8m72 r8m96 r8m0 r8rake1 r8rake2 r8cgu4 r8cgu8 r8cgu16 r8gb0 r8fdiv0 r8order1 r9once0 all}
PEAK_DEPTH=${PEAK_DEPTH:-8}
PEAK_EXTRA=${PEAK_EXTRA:-}
INT_VARIANTS=${INT_VARIANTS-base gather entrynorm prefetch unroll8 gather,entrynorm,prefetch,unroll8}
INT_BATCHES=${INT_BATCHES-$(printf '%s\n' "$BATCH" 8 | awk '!seen[$0]++' | tr '\n' ' ')}
DEC_VARIANTS=${DEC_VARIANTS-dglob zrun zrun2 dglob+zrun2 bpg2 bpg2+zrun2 bpg2l+zrun2}
DEC_BENCH_FRAMES=${DEC_BENCH_FRAMES:-200}
DECODE_QUEUES=${DECODE_QUEUES:-8}
SWEEP=${SWEEP-batch1 batch2 batch8 depth2 depth8 wg128 wg512 wg1024 dwg64 dwg128 parsers0}
LOG=${OUT:-$root/tests/out/gpu-run}
mkdir -p "$LOG" || { echo "gpu-run: cannot create $LOG" >&2; exit 1; }
say() { echo "gpu-run: $*" | tee -a "$LOG/gpu-run.log"; }

# 1-2. runtime libraries from the Debian packages, unpacked privately (never into /), and
# NVIDIA's OpenCL driver registered with the ICD loader (no ICD file is installed there):
# tests/bench/lib.sh's bench_runtime, shared with fan-gpu-bench.sh
bench_runtime "$LOG/gpu-run.log"

# 3. device listing and binary check
{ command -v clinfo >/dev/null && clinfo -l; } >"$LOG/clinfo.txt" 2>&1 ||
    say "WARNING: clinfo -l failed (see $LOG/clinfo.txt)"
cat "$LOG/clinfo.txt"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv \
    >"$LOG/nvidia-smi.txt" 2>&1 || true
bench=$BIN/faid-bench
if [ ! -x "$bench" ]; then
    say "ERROR: $bench not found or not executable (build it, and carry build/)"
    exit 1
fi
if ldd "$bench" | grep -q "not found"; then
    say "ERROR: $bench misses shared libraries:"
    ldd "$bench" | grep "not found" | tee -a "$LOG/gpu-run.log"
    exit 1
fi

# 4. benchmark runs: name -> faid-bench arguments
declare -A args=(
    [full]="--split full"
    [no]="--split no"
    [bbox]="--split bbox"
    [cake]="--split full --azim 360"
    [cake-lean]="--split full --azim 360 --cake-arrays 1"
    [u16]="--split full --dtype uint16"
    [pk-pyfai]="--split full --peaks pyfai"
    [pk-pf8]="--split full --peaks peakfinder8"
)
status=0
mkdir -p "$LOG/data"
for c in $CONFIGS; do
    a=${args[$c]:-}
    if [ -z "$a" ]; then
        say "WARNING: unknown configuration '$c' skipped (known: ${!args[*]})"
        continue
    fi
    extra=""
    [ "$c" = full ] && extra="--dump $LOG/data"
    case $c in pk-*) extra="--variants $PEAK_VARIANTS --dump $LOG/data" ;; esac
    say "faid-bench $c: $bench --device $DEVICE --frames $FRAMES --depth $DEPTH --batch $BATCH $a"
    # shellcheck disable=SC2086
    if ! "$bench" --device "$DEVICE" --frames "$FRAMES" --depth "$DEPTH" --batch "$BATCH" $a $extra \
        --json "$LOG/bench_$c.json" >"$LOG/bench_$c.log" 2>&1; then
        say "ERROR: faid-bench $c failed, tail of $LOG/bench_$c.log:"
        tail -n 20 "$LOG/bench_$c.log" | tee -a "$LOG/gpu-run.log"
        status=1
    fi
done

# 4a. the GPU stage against the PCIe floor and the compute alone, per frame kind (synthetic 6.7x,
# low-count 17x), EIGER 4M: pipelined (frames in pinned host memory -> profiles in host memory)
# and compute (frames already on the device: decode + integrate), the pinned H2D bandwidth of the
# frame size measured in the same process; then the same on the other detector sizes (low-count
# frames): frames/s and device memory. Every run checks frame 0 against the C reference and
# every result bit for bit against the synchronous one.
for kd in $KINDS; do
    say "kind $kd: $bench --split full --variants pipelined,compute --kind $kd"
    if ! "$bench" --device "$DEVICE" --frames "$FRAMES" --depth "$DEPTH" --batch "$BATCH" \
        --split full --variants pipelined,compute --kind "$kd" --json "$LOG/kind_$kd.json" \
        >"$LOG/kind_$kd.log" 2>&1; then
        say "ERROR: kind $kd failed, tail of $LOG/kind_$kd.log:"
        tail -n 10 "$LOG/kind_$kd.log" | tee -a "$LOG/gpu-run.log"
        status=1
    fi
done
for det in $SIZES; do
    say "size $det: $bench --detector $det --kind lowcount --variants pipelined,compute"
    if ! "$bench" --device "$DEVICE" --frames "$SIZE_FRAMES" --depth "$DEPTH" --batch "$BATCH" \
        --split full --variants pipelined,compute --kind lowcount --detector "$det" \
        --json "$LOG/size_$det.json" >"$LOG/size_$det.log" 2>&1; then
        say "ERROR: size $det failed, tail of $LOG/size_$det.log:"
        tail -n 10 "$LOG/size_$det.log" | tee -a "$LOG/gpu-run.log"
        status=1
    fi
done

# 4a'. issue 17: the batched integration kernel's variants (FAID_ENGINE_INTEGRATE, faid_engine.h),
# GPU stage and compute alone on the synthetic frames, old ("base") and new side by side; each
# run checks its pipelined results bit for bit against the default one-frame kernel's
for iv in $INT_VARIANTS; do
    for ib in $INT_BATCHES; do
        tag="${iv//,/+}_b$ib"
        say "integrate variant $iv, batch $ib: FAID_ENGINE_INTEGRATE=$iv $bench --split full --variants pipelined,compute"
        if ! FAID_ENGINE_INTEGRATE=$iv "$bench" --device "$DEVICE" --frames "$FRAMES" \
            --depth "$DEPTH" --batch "$ib" --split full --variants pipelined,compute \
            --kind synthetic --json "$LOG/intv_$tag.json" >"$LOG/intv_$tag.log" 2>&1; then
            say "ERROR: integrate variant $tag failed or differs, tail of $LOG/intv_$tag.log:"
            tail -n 10 "$LOG/intv_$tag.log" | tee -a "$LOG/gpu-run.log"
            status=1
        fi
    done
done

# 4a''. issue 17: the bslz4 decoder's build variants (FAID_CLCODEC_DEFINES, bslz4.cl's header),
# each beside the default decoder ("default", run first when any variant is asked for): decode
# alone (fused, one frame at a time), GPU stage and compute alone (16 frames in flight) on the
# synthetic frames; every run checks frame 0 against the C reference and every pipelined result
# bit for bit against the synchronous ones, and the table compares each run's result hash with
# the default decoder's (a variant that decodes other bytes integrates other profiles)
declare -A decdefs=(
    [default]=""
    [dglob]="-D DEC_GLOBAL=1"
    [zrun]="-D ZRUN=1"
    [zrun2]="-D ZRUN=2"
    [dglob+zrun2]="-D DEC_GLOBAL=1 -D ZRUN=2"
    [cmpl+zrun2]="-D CMP_LOCAL=1 -D ZRUN=2"
    [bpg2]="-D BPG=2 -D DEC_GLOBAL=1"
    [bpg2+zrun2]="-D BPG=2 -D DEC_GLOBAL=1 -D ZRUN=2"
    [bpg2l+zrun2]="-D BPG=2 -D ZRUN=2"
)
decrun=""
[ -n "$DEC_VARIANTS" ] && decrun="default $DEC_VARIANTS"
for dv in $decrun; do
    if [ -z "${decdefs[$dv]+x}" ]; then
        say "WARNING: unknown decoder variant '$dv' skipped (known: ${!decdefs[*]})"
        continue
    fi
    say "decoder variant $dv: FAID_CLCODEC_DEFINES='${decdefs[$dv]}' $bench --split full --variants fused,pipelined,compute --kind synthetic"
    if ! FAID_CLCODEC_DEFINES="${decdefs[$dv]}" "$bench" --device "$DEVICE" --frames "$FRAMES" \
        --depth "$DEPTH" --batch "$BATCH" --split full --variants fused,pipelined,compute \
        --kind synthetic --json "$LOG/decv_$dv.json" >"$LOG/decv_$dv.log" 2>&1; then
        say "ERROR: decoder variant $dv failed or differs, tail of $LOG/decv_$dv.log:"
        tail -n 10 "$LOG/decv_$dv.log" | tee -a "$LOG/gpu-run.log"
        rm -f "$LOG/decv_$dv.json"
        status=1
    elif ! python3 - "$LOG" "$dv" >>"$LOG/decv_$dv.log" 2>&1 <<'EOF'
# faid-bench reports frame 0's error against the C reference but does not fail on it, and a
# decoder that is wrong the same way every time passes its identity check: a variant must hash
# to the default decoder's results and stay within the reference tolerance
import json, os, sys
log, dv = sys.argv[1], sys.argv[2]
j = json.load(open(os.path.join(log, f"decv_{dv}.json")))
err = max(v.get("max_rel_err", 0) for v in j["variants"])
p = os.path.join(log, "decv_default.json")
h0 = json.load(open(p)).get("result_hash") if os.path.exists(p) else None
bad = err > 1e-5 or (dv != "default" and h0 is not None and j.get("result_hash") != h0)
if bad:
    print(f"gpu-run: max rel err {err:.2e}, result hash {j.get('result_hash')}, the default's {h0}")
sys.exit(1 if bad else 0)
EOF
    then
        say "ERROR: decoder variant $dv gives other results than the default decoder, tail of $LOG/decv_$dv.log:"
        tail -n 1 "$LOG/decv_$dv.log" | tee -a "$LOG/gpu-run.log"
        mv "$LOG/decv_$dv.json" "$LOG/decv_$dv.wrong.json"
        status=1
    fi
    # the decoder alone (EIGER 4M sparse-count frame of test_codec, checked byte for byte there)
    if [ "$DEC_BENCH_FRAMES" -gt 0 ] && [ -x "$BIN/test_codec" ] &&
        ! FAID_CLCODEC_DEFINES="${decdefs[$dv]}" FAID_BENCH_PTX="$LOG/decv_$dv.ptx" \
            "$BIN/test_codec" bench "$DEVICE" "$DEC_BENCH_FRAMES" 4 3 >"$LOG/decb_$dv.log" 2>&1; then
        say "ERROR: decoder variant $dv: test_codec bench failed or WRONG, tail of $LOG/decb_$dv.log:"
        tail -n 5 "$LOG/decb_$dv.log" | tee -a "$LOG/gpu-run.log"
        status=1
    fi
    # the decoder alone on the benchmark's own frames (faid-bench --decode: the synthetic frames
    # of the compute-alone rows, one frame alone and DECODE_QUEUES queues of frames in flight,
    # every queue's last frame compared byte for byte)
    if ! FAID_CLCODEC_DEFINES="${decdefs[$dv]}" "$bench" --decode --device "$DEVICE" \
        --frames "$FRAMES" --depth "$DECODE_QUEUES" --json "$LOG/decode_$dv.json" \
        >"$LOG/decode_$dv.log" 2>&1; then
        say "ERROR: decoder variant $dv: faid-bench --decode failed or differs, tail of $LOG/decode_$dv.log:"
        tail -n 6 "$LOG/decode_$dv.log" | tee -a "$LOG/gpu-run.log"
        rm -f "$LOG/decode_$dv.json"
        status=1
    fi
done

# 4b. tuning sweep: the pipelined variant of the full-split run with one knob changed
for w in $SWEEP; do
    envs=(FAID_SWEEP=1) # (env needs one assignment; this one is unused)
    a="--depth $DEPTH --batch $BATCH"
    case $w in
        depth*) a="--depth ${w#depth} --batch $BATCH" ;;
        batch*) a="--depth $DEPTH --batch ${w#batch}" ;;
        dwg*) envs=(FAID_CLCODEC_WG="${w#dwg}") ;;
        wg*) envs=(FAID_ENGINE_WG="${w#wg}") ;;
        parsers*) a="$a --parsers ${w#parsers}" ;;
        *) say "WARNING: unknown sweep item '$w' skipped"; continue ;;
    esac
    say "sweep $w: ${envs[*]} $bench --split full --variants pipelined --no-check $a"
    # shellcheck disable=SC2086
    if ! env "${envs[@]}" "$bench" --device "$DEVICE" --frames "$FRAMES" --split full \
        --variants pipelined --no-check $a --json "$LOG/sweep_$w.json" \
        >"$LOG/sweep_$w.log" 2>&1; then
        say "WARNING: sweep $w failed, tail of $LOG/sweep_$w.log:"
        tail -n 5 "$LOG/sweep_$w.log" | tee -a "$LOG/gpu-run.log"
    fi
done

# 4c. multi-device GPU stage: the pipelined variant on the first N GPUs at once (faid-bench
# --devices gpu:N: one engine and thread per device, frames round-robin, aggregate frames/s,
# every device's results bit-identical to device 0's; per device where its host thread's time
# went, its device's busy fraction and the PCIe floor alone and all at once); SCALE_SHARED: the
# largest count once more with --pinned shared (the daemon's one pinned arena for every device)
nmax=0
for n in $SCALE; do [ "$n" -gt "$nmax" ] && nmax=$n; done
for c in $SCALE_CONFIGS; do
    [ -z "$SCALE" ] && break
    a=${args[$c]:-}
    runs="$SCALE"
    case " $SCALE_SHARED " in *" $c "*) runs="$runs shared" ;; esac
    for n in $runs; do
        tag=${c}_$n pin=""
        [ "$n" = shared ] && { n=$nmax tag=shared_${c}_$nmax pin="--pinned shared"; }
        say "scale $c x$n $pin: $bench --devices gpu:$n --frames $((SCALE_FRAMES * n)) $a $pin"
        # shellcheck disable=SC2086
        if ! "$bench" --devices "gpu:$n" --frames $((SCALE_FRAMES * n)) --depth "$DEPTH" \
            --batch "$BATCH" $a $pin --json "$LOG/scale_$tag.json" >"$LOG/scale_$tag.log" 2>&1; then
            say "WARNING: scale $c x$n $pin failed or found a difference, tail of $LOG/scale_$tag.log:"
            tail -n 8 "$LOG/scale_$tag.log" | tee -a "$LOG/gpu-run.log"
            status=1
        fi
    done
done

# 4d. issue 17: the peak path's kernel variants, selected by environment knobs, one faid-bench
# run per set and finder (the same frames, the same check against the reference device: peak
# lists bit for bit, background within float64 rounding; a set that fails it is not reported)
# The defaults changed after the GPU run of 2026-11-26 (one H100, EIGER 4M, docs/PERFORMANCE.md):
# fused, LM=12 R=8 where it fits, peakfinder8's hash and local candidates. Every set but
# "default" names every knob, starting from the kernels before that run ($old), so that a set
# still means the kernels it meant then.
old="FAID_PEAKS_FUSED=0 FAID_SIGCLIP_LM=0 FAID_PEAKS_KOPTS=-DPF8_HASH=0,-DPF8_LOCAL_CAND=0,-DPF8_CLASS=0,-DPF8_RECS=0 FAID_PF8_MERGE=0"
pf8v="FAID_PEAKS_KOPTS=-DPF8_HASH=1,-DPF8_LOCAL_CAND=1"
declare -A psets=(
    [default]=""                                     # today's defaults (docs/peaks.md)
    # round 4's sigma clip before its GPU run: 8 in registers, no batched gather
    [c3]="FAID_SIGCLIP_R=8 FAID_SIGCLIP_GB=0"
    [reg]="$old"                                     # the register sigma clip, as before the run
    # entries per work-item in local memory: 12 x 256 x 8 B = 24 KB + 15 KB of the scan's arrays,
    # inside the 48 KB that NVIDIA's OpenCL gives a work-group (16 would leave 0.8 KB)
    [lm12]="$old FAID_SIGCLIP_LM=12"                 # 12 in local memory, the rest in registers
    [lm12r8]="$old FAID_SIGCLIP_LM=12 FAID_SIGCLIP_R=8" # 8 in registers, the rest in global
    [lm8r8]="$old FAID_SIGCLIP_LM=8 FAID_SIGCLIP_R=8" # smaller on-chip share, more in global
    [lm32wg128]="$old FAID_SIGCLIP_WG=128 FAID_SIGCLIP_LM=32 FAID_SIGCLIP_R=8"
    [fz]="$old FAID_PEAKS_FUSED=1"                   # pixels from the raw frame, no preprocess
    [fzlm12]="$old FAID_PEAKS_FUSED=1 FAID_SIGCLIP_LM=12"
    [fzlm12r8]="$old FAID_PEAKS_FUSED=1 FAID_SIGCLIP_LM=12 FAID_SIGCLIP_R=8"
    # peakfinder8's fill: hash table of the queue, candidates compacted in local memory, wider grid
    [pf8v]="$old $pf8v"
    [pf8vg]="$old $pf8v FAID_PF8_FILL_GROUPS=512"
    # round 3's defaults (before round 4's records, class bytes and merged scan became defaults)
    [r3]="FAID_PEAKS_KOPTS=-DPF8_CLASS=0,-DPF8_RECS=0 FAID_PF8_MERGE=0"
    # round 4 (peakfinder8's fill, write and prep; each set names every round-4 knob; r4merge is
    # the defaults since the H100 run of 2026-11-26; docs/PERFORMANCE.md):
    # the fill's records copied by the write, each pixel's class byte, the scan in the write,
    # the radial pass gathering from img, the fill in the candidates' pass (a window per seed)
    [r4rec]="FAID_PEAKS_KOPTS=-DPF8_RECS=1,-DPF8_CLASS=0 FAID_PF8_MERGE=0"
    [r4cls]="FAID_PEAKS_KOPTS=-DPF8_RECS=1,-DPF8_CLASS=1 FAID_PF8_MERGE=0"
    [r4merge]="FAID_PEAKS_KOPTS=-DPF8_RECS=1,-DPF8_CLASS=1 FAID_PF8_MERGE=1"
    [r4gather]="FAID_PEAKS_KOPTS=-DPF8_RECS=1,-DPF8_CLASS=1 FAID_PF8_MERGE=1 FAID_PF8_GATHER=1"
    [r4cf]="FAID_PEAKS_KOPTS=-DPF8_RECS=1,-DPF8_CLASS=0 FAID_PF8_MERGE=1 FAID_PF8_CANDFILL=1"
    [r4cfg]="FAID_PEAKS_KOPTS=-DPF8_RECS=1,-DPF8_CLASS=0 FAID_PF8_MERGE=1 FAID_PF8_CANDFILL=1 FAID_PF8_GATHER=1"
    # no prep launch either: radial, candidates, write (3 launches instead of 6)
    [r4np]="FAID_PEAKS_KOPTS=-DPF8_RECS=1,-DPF8_CLASS=0 FAID_PF8_MERGE=1 FAID_PF8_CANDFILL=1 FAID_PF8_NOPREP=1"
    # the windows in a fill launch of their own instead (the candidates' pass stays lean)
    [r4win]="FAID_PEAKS_KOPTS=-DPF8_RECS=1,-DPF8_CLASS=0,-DPF8_WINFILL=1 FAID_PF8_MERGE=1 FAID_PF8_NOPREP=1"
    # round 4 of the sigma clip and the picker (latency variants, off by default): the clip's
    # gather in batches of 4 or 8 entries with their loads issued together; the picker's loads of
    # its 4 pixels (and of each row of a seed's patch) issued together; both on the defaults
    [gb4]="FAID_SIGCLIP_R=8 FAID_SIGCLIP_GB=4"
    [gb8]="FAID_SIGCLIP_R=8 FAID_SIGCLIP_GB=8"
    # 4 entries in registers instead of 8 (fewer registers, perhaps 3 work-groups per SM instead
    # of 2; bins above 4,096 entries overflow, their walks batched): same order, same bits
    [gb8r4]="FAID_SIGCLIP_GB=8 FAID_SIGCLIP_R=4"
    # the clip's registers capped (NVIDIA's -cl-nv-maxrregcount): 3 or 4 work-groups of 256 per SM
    # instead of (probably) 2, perhaps with spills (the "registers" lines say)
    [gb8m80]="FAID_SIGCLIP_R=8 FAID_SIGCLIP_GB=8 FAID_SIGCLIP_MAXREG=80"
    [gb8m64]="FAID_SIGCLIP_R=8 FAID_SIGCLIP_GB=8 FAID_SIGCLIP_MAXREG=64"
    # 512 work-items per bin (4 in local memory: 45 KB; 8 in registers): 6,144 entries on chip,
    # the largest bin 23 per work-item; another order of the sums than 256 (=default may say NO;
    # the lists are checked against the reference device as always)
    [wg512]="FAID_SIGCLIP_WG=512 FAID_SIGCLIP_LM=4 FAID_SIGCLIP_R=8 FAID_SIGCLIP_GB=8"
    [ppf]="FAID_PEAKS_KOPTS=-DPP_PREFETCH=1"
    # the picker's write ranks its span with one scan instead of 4; faid_pk_scan (both finders)
    # loads its counts at once
    [pscan]="FAID_PEAKS_KOPTS=-DPP_WSCAN1=1,-DPK_SCAN_PF=32"
    # the sigma clip's and the picker's round-4 variants together
    [c4]="FAID_SIGCLIP_R=8 FAID_SIGCLIP_GB=8 FAID_PEAKS_KOPTS=-DPP_PREFETCH=1,-DPP_WSCAN1=1,-DPK_SCAN_PF=32"
    # round 5 (issue 17): the sigma clip's gather coalesced across the work-group (chunks of 256 x
    # 4 entries, the local entries in each work-item's CSR order); cgu8: chunks of 256 x 8;
    # cgr1: 1 in registers and 15 in local memory (fewer registers, the same 4,096 on chip);
    # pois / cgpois: the poisson model without / with it (extra faid-bench arguments: pargs);
    # cgm80: with the registers capped at 80 (3 work-groups per SM if it holds without spills);
    # cggb0: the passes' overflow walks one entry at a time (fewer registers than 8 at a time);
    # cg2: each chunk through a tile in local memory, the overflow entries (1.36 M of 4.24 M)
    # written coalesced too (cg2pois: chunks of 3, so that the tile fits the scan's arrays)
    # (since the H100 runs of 2026-11-27 the default is CG 1 with chunks of 256 x 8 = cgu8;
    # cg0 is the kernel before it, round 4's default)
    [cg0]="FAID_SIGCLIP_CG=0"
    [cg]="FAID_SIGCLIP_CG=1 FAID_SIGCLIP_CGU=4"
    [cgu8]="FAID_SIGCLIP_CG=1 FAID_SIGCLIP_CGU=8"
    [cgr1]="FAID_SIGCLIP_CG=1 FAID_SIGCLIP_R=1 FAID_SIGCLIP_LM=15"
    [cgm80]="FAID_SIGCLIP_CG=1 FAID_SIGCLIP_MAXREG=80"
    [cggb0]="FAID_SIGCLIP_CG=1 FAID_SIGCLIP_GB=0"
    [cg2]="FAID_SIGCLIP_CG=2"
    [pois]=""
    [cgpois]="FAID_SIGCLIP_CG=1"
    [cg2pois]="FAID_SIGCLIP_CG=2 FAID_SIGCLIP_CGU=3"
    # round 5 (issue 17, docs/PERFORMANCE.md "Speed round 5"): the picker's candidates first
    # (about 2,000 of 4.49 M pixels pass the first test on these frames, 1 % of the warps): the
    # flag pass decides the first test of every pixel with no patch loop between them, then the
    # patch test of its candidates, and writes each span's sorted peaks instead of a flag byte per
    # pixel; the write reads them instead of ranking 1,024 flags. pcandpf: the 4 pixels' loads
    # issued at once too (PP_PREFETCH's first half); pmerge: the scan merged into the write (no
    # faid_pk_scan launch, 8 us of 111), alone and with pcand; pprep4: peakfinder8's prep with 4
    # pixels per work-item, their loads issued at once (prep 69 us against a 28 us floor);
    # pband2 / pband4: the prep by bands of 2 / 4 rows, cval stored in the bins' order from local
    # memory (its scattered stores touch 5.3x the sectors of a coalesced store, 1.6x by bands of
    # 4); r5: pcandpf + pmerge + pband4 with the sigma clip's round-4 knobs (c4's)
    [pcand]="FAID_PEAKS_KOPTS=-DPP_CAND=1"
    [pcandpf]="FAID_PEAKS_KOPTS=-DPP_CAND=1,-DPP_CAND_PF=1"
    [pmerge]="FAID_PEAKS_KOPTS=-DPP_MERGE=1"
    [pcandm]="FAID_PEAKS_KOPTS=-DPP_CAND=1,-DPP_MERGE=1"
    [pprep4]="FAID_PEAKS_KOPTS=-DPF8_PREP4=1"
    [pband2]="FAID_PEAKS_KOPTS=-DPF8_BAND=2"
    [pband4]="FAID_PEAKS_KOPTS=-DPF8_BAND=4"
    [r5]="FAID_SIGCLIP_R=8 FAID_SIGCLIP_GB=8 FAID_PEAKS_KOPTS=-DPP_CAND=1,-DPP_CAND_PF=1,-DPP_MERGE=1,-DPF8_BAND=4"
    # round 6 (issue 17, docs/PERFORMANCE.md "Speed round 6"): the sigma clip reads its bins'
    # pixels from a copy of the frame in the background matrix' entry order (consecutive reads
    # instead of the gather through the indices), made per frame by a scatter in pixel order
    # (perm1) or a gather (perm2); with and without the coalesced gather's chunks (cg0: each
    # work-item reads its own consecutive entries); permpois: the poisson model with it
    [perm1]="FAID_SIGCLIP_PERM=1"
    [perm2]="FAID_SIGCLIP_PERM=2"
    [perm1cg0]="FAID_SIGCLIP_PERM=1 FAID_SIGCLIP_CG=0"
    [perm1u4]="FAID_SIGCLIP_PERM=1 FAID_SIGCLIP_CGU=4"
    [permpois]="FAID_SIGCLIP_PERM=1"
    # round 7 (issue 17, docs/PERFORMANCE.md "Round 7"): peakfinder8's fill gives each
    # candidate a warp of its own (its 18 candidates were 18 lanes of one warp: a profile of the
    # replayed launch showed one SM busy and 5 threads active per warp); r4* skip the pyfai run
    # the same way, this one is peakfinder8's alone too
    [r7spread]="FAID_PEAKS_KOPTS=-DPF8_SPREAD=32"
    # and a work-group per candidate (up to 4 per group, else one per work-item): the flood fill
    # a level at a time, the values and the disc loaded by the group, one work-item summing in
    # the reference's order; r7wgall: for every candidate
    [r7wg]="FAID_PEAKS_KOPTS=-DPF8_WGSEED=4"
    [r7wgall]="FAID_PEAKS_KOPTS=-DPF8_WGSEED=1000000"
    # round 8 (docs/PERFORMANCE.md "Round 8"): r7wg's fill is the default since; r8wg0 a
    # candidate per work-item, as before (peakfinder8's alone, as r7*)
    [r8wg0]="FAID_PEAKS_KOPTS=-DPF8_WGSEED=0"
    # the picker's flag pass with its 4 pixels' loads first and the patch loop as it is
    # (PP_PREFETCH without its rows of patch loads: PP_PF_HW=0)
    [r8ppf0]="FAID_PEAKS_KOPTS=-DPP_PREFETCH=1,-DPP_PF_HW=0"
    # the sigma clip: the azimuthal recurrence by selects (SC_AZSEL), the registers capped at 64
    # (4 work-groups per SM instead of 2 at 121: its profile found it latency-bound, 24 %
    # occupancy), both with the cap at 80 (cgm80's), and work-groups of 128 with 24 entries
    # each in local memory (4 per SM, half the work-items at each barrier)
    [r8azsel]="FAID_PEAKS_KOPTS=-DSC_AZSEL=1"
    [r8m64]="FAID_SIGCLIP_MAXREG=64"
    [r8azm80]="FAID_SIGCLIP_MAXREG=80 FAID_PEAKS_KOPTS=-DSC_AZSEL=1"
    [r8w128]="FAID_SIGCLIP_WG=128 FAID_SIGCLIP_LM=24 FAID_SIGCLIP_R=4 FAID_SIGCLIP_GB=8 FAID_SIGCLIP_CG=1"
    [r8w128m80]="FAID_SIGCLIP_WG=128 FAID_SIGCLIP_LM=24 FAID_SIGCLIP_R=4 FAID_SIGCLIP_GB=8 FAID_SIGCLIP_CG=1 FAID_SIGCLIP_MAXREG=80"
    [r8m72]="FAID_SIGCLIP_MAXREG=72"
    [r8m96]="FAID_SIGCLIP_MAXREG=96"
    # the cap at 80 is the default since (cgm80 won both calls); r8m0: none, the compiler's 121;
    # r8rake1: the clip's raking values chunk-major in local memory (SC_RAKE; lost in call f)
    [r8m0]="FAID_SIGCLIP_MAXREG=0"
    [r8rake1]="FAID_PEAKS_KOPTS=-DSC_RAKE=1"
    # r8rake2: padded after each chunk instead (no conflict on either side); the gather's chunks
    # of 256 x 4 and x 16 entries now that their loads issue together; the passes' overflow
    # walks one entry at a time (fewer registers under the cap)
    [r8rake2]="FAID_PEAKS_KOPTS=-DSC_RAKE=2"
    [r8cgu4]="FAID_SIGCLIP_CGU=4"
    # (chunks of 4 the default since calls g and h; r8cgu8: 8, as before)
    [r8cgu8]="FAID_SIGCLIP_CGU=8"
    [r8cgu16]="FAID_SIGCLIP_CGU=16"
    [r8gb0]="FAID_SIGCLIP_GB=0"
    # the gather's owner by the integer division, as before SC_FDIV
    [r8fdiv0]="FAID_PEAKS_KOPTS=-DSC_FDIV=0"
    # the clip's work-groups from the largest bin to the smallest (SC_ORDER; call i: one frame
    # alone 151 -> 143 us, pipelined 4,037 -> 3,917 frames/s, so off)
    [r8order1]="FAID_PEAKS_KOPTS=-DSC_ORDER=1"
    # round 9: every work-item computing a pass's mean, std and next threshold itself, as before
    # SC_ONCE (work-item 0 for all, the default since)
    [r9once0]="FAID_PEAKS_KOPTS=-DSC_ONCE=0"
    # every variant (peakfinder8: PF8_CLASS left out, the candidates' pass holds the classes in
    # its window; GATHER is moot under NOPREP, WINFILL and the fill groups without the fill
    # launch; the picker: PP_CAND's write, no scan launch (PP_MERGE), its patch tests load rows
    # as PP_PREFETCH does; PP_WSCAN1 left out, moot under PP_CAND; PF8_PREP4 and PF8_BAND too,
    # moot under FAID_PF8_NOPREP; the sigma clip's coalesced gather with R 4, the default since
    # round 4: with it 8 would need a staging array of its own, 57 KB of local memory in all,
    # more than NVIDIA's 48 KB)
    [all]="FAID_PEAKS_FUSED=1 FAID_SIGCLIP_LM=12 FAID_SIGCLIP_R=4 FAID_SIGCLIP_GB=8 FAID_SIGCLIP_CG=1 FAID_PEAKS_KOPTS=-DPF8_HASH=1,-DPF8_LOCAL_CAND=1,-DPF8_RECS=1,-DPF8_CLASS=0,-DPP_PREFETCH=1,-DPK_SCAN_PF=32,-DPP_CAND=1,-DPP_MERGE=1 FAID_PF8_FILL_GROUPS=512 FAID_PF8_MERGE=1 FAID_PF8_CANDFILL=1 FAID_PF8_GATHER=1 FAID_PF8_NOPREP=1"
)
# more faid-bench arguments of a set (after PEAK_EXTRA), and the set whose results its "=default"
# column compares with (default: "default"; a set of another error model has its own baseline)
declare -A pargs=(
    [pois]="--set peaks.error_model=poisson"
    [cgpois]="--set peaks.error_model=poisson"
    [cg2pois]="--set peaks.error_model=poisson"
    [permpois]="--set peaks.error_model=poisson"
)
declare -A pbase=([cgpois]=pois [cg2pois]=pois [permpois]=pois)
PEAK_BASES=""
for ps in "${!pbase[@]}"; do PEAK_BASES="$PEAK_BASES $ps:${pbase[$ps]}"; done
for ps in $PEAK_SETS; do
    if [ -z "${psets[$ps]+x}" ]; then
        say "WARNING: unknown peak set '$ps' skipped (known: ${!psets[*]})"
        continue
    fi
    for c in pk-pyfai pk-pf8; do
        # the r4* and r7* sets change peakfinder8's kernels alone: no pyfai run (its cells print "-")
        case "$ps:$c" in r4*:pk-pyfai | r7*:pk-pyfai | r8wg*:pk-pyfai) continue ;; esac
        a="${args[$c]} $PEAK_EXTRA ${pargs[$ps]:-}"
        say "peak set $ps ($c): ${psets[$ps]:-defaults} $bench $a --depth $PEAK_DEPTH"
        # shellcheck disable=SC2086
        # FAID_CL_VERBOSE=1: the build logs, with ptxas's registers per kernel on NVIDIA (the
        # summary's "registers" lines)
        if ! env FAID_PEAKSET="$ps" FAID_CL_VERBOSE=1 ${psets[$ps]} "$bench" --device "$DEVICE" --frames "$FRAMES" \
            --depth "$PEAK_DEPTH" --batch "$BATCH" $a --variants fused,pipelined \
            --json "$LOG/pkset_${ps}_$c.json" >"$LOG/pkset_${ps}_$c.log" 2>&1; then
            say "WARNING: peak set $ps ($c) failed or found a difference, tail of $LOG/pkset_${ps}_$c.log:"
            tail -n 8 "$LOG/pkset_${ps}_$c.log" | tee -a "$LOG/gpu-run.log"
            rm -f "$LOG/pkset_${ps}_$c.json"
            status=1
        fi
    done
done

# The pyFAI + silx wheels (.whl/), installed once into $site for steps 5 and 5a.
site=$root/.device/site
install_wheels() {
    if [ ! -d "$site/pyFAI" ]; then
        python3 -m pip install --no-index --no-deps --target "$site" .whl/*.whl \
            >"$LOG/pip.log" 2>&1 || say "WARNING: installing the wheels failed (see $LOG/pip.log)"
    fi
}

# 5. pyFAI + silx reference on the same frame and device, when its wheels came along
if ls .whl/*.whl >/dev/null 2>&1 && [ -f "$LOG/data/frame.npy" ] && [ -f "$LOG/bench_full.json" ]; then
    install_wheels
    say "pyFAI + silx reference ($PYFAI_FRAMES frames)"
    if ! PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" python3 tests/bench/pyfai_reference.py \
        --frame "$LOG/data/frame.npy" --chunk "$LOG/data/chunk.bslz4" \
        --poni "$LOG/data/geometry.poni" --frames "$PYFAI_FRAMES" --json "$LOG/pyfai.json" \
        >"$LOG/pyfai.log" 2>&1; then
        say "WARNING: pyFAI reference failed, tail of $LOG/pyfai.log:"
        tail -n 15 "$LOG/pyfai.log" | tee -a "$LOG/gpu-run.log"
    fi
    if [ -f "$PYFAI_FASTEST" ]; then
        say "pyFAI + silx at their fastest: $PYFAI_FASTEST"
        PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" python3 "$PYFAI_FASTEST" "$LOG/data" \
            --frames "$PYFAI_FRAMES" >"$LOG/pyfai_fastest.log" 2>&1 ||
            say "WARNING: $PYFAI_FASTEST failed (see $LOG/pyfai_fastest.log)"
        # its last output is one indented JSON object
        python3 -c 'import json,sys; t=open(sys.argv[1]).read(); i=t.rfind("\n{"); json.dump(json.loads(t[i+1:] if i>=0 else t), open(sys.argv[2],"w"))' \
            "$LOG/pyfai_fastest.log" "$LOG/pyfai_fastest.json" 2>/dev/null || true
    fi
else
    say "pyFAI reference skipped (no .whl/*.whl or no dumped frame)"
fi
# 5a. pyFAI's OpenCL peak finder on the same frame, beside the peak configurations
if ls .whl/*.whl >/dev/null 2>&1 && [ -f "$LOG/data/mask.npy" ] &&
    ls "$LOG"/bench_pk-*.json >/dev/null 2>&1; then
    install_wheels
    say "pyFAI OCL_PeakFinder reference ($PYFAI_FRAMES frames)"
    if ! PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" python3 tests/bench/pyfai_peaks_reference.py \
        "$LOG/data" --frames "$PYFAI_FRAMES" --json "$LOG/pyfai_peaks.json" \
        >"$LOG/pyfai_peaks.log" 2>&1; then
        say "WARNING: pyFAI peak reference failed, tail of $LOG/pyfai_peaks.log:"
        tail -n 15 "$LOG/pyfai_peaks.log" | tee -a "$LOG/gpu-run.log"
    fi
fi

# 5b. the whole daemon over ZeroMQ loopback (tests/bench/daemon-bench.sh, its own pipeline
# settings); its compact table is printed right before faid-bench's
if [ "${DAEMON_BENCH:-1}" != 0 ]; then
    say "daemon-bench: tests/bench/daemon-bench.sh (log $LOG/daemon-bench.log)"
    # COMPARE writer: the same daemon with the files of record on (writer.directory
    # WRITER_DIR, default $LOG/writer-files): its results/s against the main run's is the
    # pipeline's throughput with the writer on vs off (issue 15: within 5 %)
    if ! FAID_BIN="$BIN" DEVICE="$DEVICE" OUT="$LOG" FRAMES="${DAEMON_FRAMES:-20000}" \
        COMPARE="${DAEMON_COMPARE:-nopin writer shared}" WRITER_DIR="${WRITER_DIR:-}" \
        bash tests/bench/daemon-bench.sh >"$LOG/daemon-bench.out" 2>&1; then
        say "WARNING: daemon-bench failed or found a problem, tail of $LOG/daemon-bench.out:"
        tail -n 12 "$LOG/daemon-bench.out" | tee -a "$LOG/gpu-run.log"
    fi
    # issue 17's peak rows: the daemon with peak finding, one and two connections against the
    # ceiling, three latency runs at 1 kHz; idle = input.pinned_copy idle, nopin = no arena,
    # batch1 = one frame per slot, poll = pipeline.collect_poll_us 200 (latency), benchpeaks =
    # faid-bench's peak parameters (its stage table sets the daemon beside faid-bench on the
    # daemon's own configuration files), slotd2h = one read-back per slot (the path before),
    # collect / collect4 / collectrx = pipeline.collect_thread true (with copy_threads 4, with
    # input.pinned_receive): a collect thread per device, one and two connections and three
    # latency runs each (issue 17, round 5); collectfill / collectrxfill = collect / collectrx
    # with pipeline.collect_launch fill (partial batches left to the collect thread)
    if [ "${DAEMON_PEAKS:-pyfai}" != none ]; then
        say "daemon-bench with peaks.algorithm ${DAEMON_PEAKS:-pyfai} (log $LOG/daemon-peaks/daemon-bench.log)"
        if ! FAID_BIN="$BIN" DEVICE="$DEVICE" OUT="$LOG/daemon-peaks" \
            FRAMES="${DAEMON_FRAMES:-20000}" CONNS=2 PEAKS="${DAEMON_PEAKS:-pyfai}" \
            COMPARE="${DAEMON_PEAKS_COMPARE:-idle nopin batch1 poll benchpeaks slotd2h collect collect4 collectrx collectfill collectrxfill}" \
            bash tests/bench/daemon-bench.sh >"$LOG/daemon-peaks.out" 2>&1; then
            say "WARNING: daemon-bench with peaks failed or found a problem, tail of $LOG/daemon-peaks.out:"
            tail -n 12 "$LOG/daemon-peaks.out" | tee -a "$LOG/gpu-run.log"
        fi
    fi
fi

# 5c. where each kernel's time goes (issue 17, round 7): tests/bench/profile-kernels.sh records a
# launch of each kernel named in PROFILE_KERNELS, replays it through CUDA and profiles the replay
# with Nsight Compute (which does not see OpenCL launches); its table comes before faid-bench's
if [ -n "${PROFILE_KERNELS:-}" ]; then
    say "kernel profiles: tests/bench/profile-kernels.sh ($PROFILE_KERNELS; log $LOG/profile/profile.log)"
    # "all": the script's own list
    pk=$PROFILE_KERNELS
    [ "$pk" = all ] && pk=""
    FAID_BIN="$BIN" DEVICE="$DEVICE" OUT="$LOG/profile" KERNELS="$pk" \
        bash tests/bench/profile-kernels.sh >"$LOG/profile.out" 2>&1 ||
        say "WARNING: profile-kernels.sh failed, tail of $LOG/profile.out:"
    tail -n 20 "$LOG/profile.out" | tee -a "$LOG/gpu-run.log"
fi

# 6. compact table, last (the tuning sweep, the pyFAI comparison and daemon-bench come before it)
PEAK_SETS="$PEAK_SETS" PEAK_BASES="$PEAK_BASES" PEAK_DEPTH="$PEAK_DEPTH" BATCH="$BATCH" INTV="$INT_VARIANTS" INTB="$INT_BATCHES" DECV="$decrun" \
    python3 - "$LOG" "$SWEEP" $CONFIGS <<'EOF' | tee "$LOG/summary.txt"
import json, os, re, sys
log, sweep, configs = sys.argv[1], sys.argv[2].split(), sys.argv[3:]
def fmt(v, k, f="{:.0f}"):
    x = v.get(k)
    return "" if x is None else f.format(x)
if sweep:
    print("\ntuning sweep, full split, pipelined, one knob changed each (median us per frame)")
    hdr = ("knob", "fps", "infl", "batch", "decode", "integr", "h2d", "parse", "stage", "latency")
    w = [10, 8, 5, 5, 7, 7, 6, 6, 6, 8]
    print(" ".join(h.rjust(n) for h, n in zip(hdr, w)))
    for k in sweep:
        p = os.path.join(log, f"sweep_{k}.json")
        if not os.path.exists(p):
            print(k.rjust(10), "FAILED".rjust(8))
            continue
        v = json.load(open(p))["variants"][0]
        row = (k, fmt(v, "fps"), fmt(v, "depth"), fmt(v, "batch"), fmt(v, "decode_us"),
               fmt(v, "integrate_us"),
               fmt(v, "h2d_us"), fmt(v, "table_us"), fmt(v, "stage_us"), fmt(v, "total_us"))
        print(" ".join(str(x).rjust(n) for x, n in zip(row, w)))
# best full-split figure: the main run's variants and the sweep's
cands = []
full = os.path.join(log, "bench_full.json")
if os.path.exists(full):
    cands += json.load(open(full))["variants"]
for k in sweep:
    p = os.path.join(log, f"sweep_{k}.json")
    if os.path.exists(p):
        v = dict(json.load(open(p))["variants"][0])
        v["name"] = f'{v["name"]} ({k})'
        cands.append(v)
best = max(cands, key=lambda v: v["fps"]) if cands else None
p = os.path.join(log, "pyfai.json")
if os.path.exists(p):
    j = json.load(open(p))
    print(f'\npyFAI {j.get("pyfai")} + silx on {j.get("device")}: decode {j.get("silx_decode_us", 0):.0f} us, '
          f'integrate (host frame) {j.get("pyfai_host_us", 0):.0f} us, pipeline {j.get("pipeline_fps", 0):.0f} fps')
    if best and j.get("pipeline_fps"):
        print(f'faid {best["name"]} / pyFAI pipeline (full split): {best["fps"] / j["pipeline_fps"]:.1f}x')
if best:
    print(f'\nbest full-split GPU stage: {best["fps"]:.0f} frames/s ({best["name"]}, '
          f'{best.get("depth", 1)} in flight, batch {best.get("batch", 1)})')
p = os.path.join(log, "pyfai_fastest.json")
if os.path.exists(p):
    j = json.load(open(p))
    print("pyFAI + silx at their fastest (pyfai_fastest.py): " + ", ".join(
        f"{k} {v:.0f}" for k, v in j.items() if k.endswith("_fps")))
    if best and j.get("pipeline_poisson_fps"):
        print(f'faid best full split / pyFAI poisson pipeline: {best["fps"] / j["pipeline_poisson_fps"]:.1f}x')
# peaks: faid's configurations beside pyFAI's OCL_PeakFinder
pk = os.path.join(log, "pyfai_peaks.json")
pj = json.load(open(pk)) if os.path.exists(pk) else None
if pj:
    print(f'\npyFAI {pj.get("pyfai")} OCL_PeakFinder + silx decode on {pj.get("device")}: '
          f'decode {pj.get("decode_us", 0):.0f} us (wg {pj.get("decode_wg")}), sigma clip + picking on a '
          f'device frame {pj.get("find_on_device_us", 0):.0f} us (block {pj.get("find_wg")}), pipeline '
          f'{pj.get("pipeline_fps", 0):.0f} fps, 2 threads {pj.get("pipeline_2threads_fps", 0):.0f} fps, '
          f'{pj.get("num_peaks")} peaks on frame 0')
for c in configs:
    p = os.path.join(log, f"bench_{c}.json")
    if not c.startswith("pk-") or not os.path.exists(p):
        continue
    j = json.load(open(p))
    vb = max(j["variants"], key=lambda v: v["fps"])
    eq = {1: "equal", 0: "DIFFER"}.get(j.get("peaks_ref_equal", -1), "not checked")
    line = (f'faid {c} ({j.get("peaks")}, 5 clip cycles) {vb["name"]}: {vb["fps"]:.0f} fps '
            f'(target >= 8000); peaks of frames 0-3 {j.get("num_peaks")}, lists vs reference device: {eq}')
    if pj and pj.get("best_fps"):
        line += f'; / pyFAI best {pj["best_fps"]:.0f} fps = {vb["fps"] / pj["best_fps"]:.1f}x'
    print(line)
# GPU stage against the PCIe floor, compute alone, detector sizes (step 4a)
kinds = sorted(f for f in os.listdir(log) if f.startswith(("kind_", "size_")) and f.endswith(".json"))
if kinds:
    print("\nGPU stage vs PCIe floor and compute alone (full split, 1000 bins, poisson; floor = pinned H2D"
          " of the compressed size, same run; compute = frames already on the device, decode + integrate;"
          " targets: stage >= 90 % of the floor, compute <= 25 us per EIGER 4M frame)")
    hdr = ("run", "pixels", "ratio", "MB in", "floor/s", "stage/s", "%floor", "cmp us", "cmp/s",
           "dec", "int", "dev MB", "ident", "relerr")
    w = [15, 9, 5, 6, 8, 8, 6, 7, 7, 6, 6, 7, 5, 8]
    print(" ".join(h.rjust(n) for h, n in zip(hdr, w)))
    for f in kinds:
        j = json.load(open(os.path.join(log, f)))
        vs = {v["name"]: v for v in j["variants"]}
        pi, co = vs.get("pipelined", {}), vs.get("compute", {})
        fl = j.get("floor_fps", 0)
        ok = all(v.get("identical") == 1 for v in (pi, co) if v)
        row = (f[:-5], j["rows"] * j["cols"], f'{j["raw_bytes"] / j["chunk_bytes_mean"]:.1f}',
               f'{j["chunk_bytes_mean"] / 1e6:.2f}', f"{fl:.0f}", fmt(pi, "fps"),
               f'{100 * pi["fps"] / fl:.1f}' if fl and pi else "-",
               f'{1e6 / co["fps"]:.1f}' if co.get("fps") else "-", fmt(co, "fps"),
               fmt(co, "decode_us", "{:.1f}"), fmt(co, "integrate_us", "{:.1f}"),
               f'{j.get("device_bytes", 0) / 1e6:.0f}', "yes" if ok else "NO",
               f'{max(v.get("max_rel_err", 0) for v in (pi, co) if v):.1e}' if (pi or co) else "-")
        print(" ".join(str(x).rjust(n) for x, n in zip(row, w)))
# issue 17: the decoder alone on the benchmark's frames (step 4a'', faid-bench --decode)
dv = sorted(f for f in os.listdir(log) if f.startswith("decode_") and f.endswith(".json"))
if dv:
    print("\nissue 17, the device decoder alone (faid-bench --decode; alone = one frame's device "
          "time; in flight = wall time per frame over the queues, nothing else on the device)")
    print(" ".join(str(x).rjust(n) for x, n in zip(("set", "alone us", "queues", "inflight us", "frames/s", "ident"), (12, 9, 7, 12, 9, 6))))
    for f in dv:
        j = json.load(open(os.path.join(log, f)))
        row = (f[7:-5], f'{j["alone_us"]:.1f}', j["queues"], f'{j["inflight_us"]:.1f}', f'{j["fps"]:.0f}',
               "yes" if j["ident"] else "NO")
        print(" ".join(str(x).rjust(n) for x, n in zip(row, (12, 9, 7, 12, 9, 6))))
# issue 17, integration: the kernel variants side by side (step 4a'), with the issue's targets
iv = sorted(f for f in os.listdir(log) if f.startswith("intv_") and f.endswith(".json"))
iv_missing = [f'{v.replace(",", "+")}_b{b}' for v in os.environ.get("INTV", "").split()
              for b in os.environ.get("INTB", "").split()
              if f'intv_{v.replace(",", "+")}_b{b}.json' not in iv]
pf = os.path.join(log, "pyfai_fastest.json")
pyf = json.load(open(pf)).get("pipeline_poisson_fps") if os.path.exists(pf) else None
for t in iv_missing:
    print(f"issue 17, integration: {t} FAILED or differs, no figures (see intv_{t}.log)")
if iv:
    j0 = json.load(open(os.path.join(log, iv[0])))
    print(f'\nissue 17, integration ({j0["rows"]} x {j0["cols"]} {j0["dtype"]} synthetic bslz4, '
          f'{j0["chunk_bytes_mean"] / 1e6:.2f} MB, split {j0["split"]}, {j0["npt"]} bins, {j0["error_model"]};'
          " FAID_ENGINE_INTEGRATE variants; floor = pinned H2D of the compressed size, same process;"
          " cmp = compute alone, us per frame; x pyFAI = stage / pyFAI + silx at its fastest, poisson)")
    hdr = ("variant", "batch", "stage/s", "floor/s", "%floor", "cmp us", "dec", "int", "x pyFAI",
           "ident", "=base", "relerr")
    w = [34, 5, 8, 8, 6, 7, 6, 6, 7, 5, 5, 8]
    # "=base": the one-frame results of the 4 distinct frames hash to the default kernel's
    # (ident then carries it to every pipelined result of the variant)
    bh = {}
    for f in iv:
        if f.startswith("intv_base_b"):
            bh = {"h": json.load(open(os.path.join(log, f))).get("result_hash")}
            break
    print(" ".join(h.rjust(n) for h, n in zip(hdr, w)))
    bestv = None
    for f in iv:
        j = json.load(open(os.path.join(log, f)))
        vs = {v["name"]: v for v in j["variants"]}
        pi, co = vs.get("pipelined", {}), vs.get("compute", {})
        fl = j.get("floor_fps", 0)
        same = {None: "-"}.get(bh.get("h"), "yes" if j.get("result_hash") == bh.get("h") else "NO")
        ok = all(v.get("identical") == 1 for v in (pi, co) if v) and same != "NO"
        name, b = f[5:-5].rsplit("_b", 1)
        row = (name, b, fmt(pi, "fps"), f"{fl:.0f}",
               f'{100 * pi["fps"] / fl:.1f}' if fl and pi.get("fps") else "-",
               f'{1e6 / co["fps"]:.1f}' if co.get("fps") else "-",
               fmt(co, "decode_us", "{:.1f}"), fmt(co, "integrate_us", "{:.1f}"),
               f'{pi["fps"] / pyf:.1f}' if pyf and pi.get("fps") else "-",
               "yes" if all(v.get("identical") == 1 for v in (pi, co) if v) else "NO", same,
               f'{max(v.get("max_rel_err", 0) for v in (pi, co) if v):.1e}' if (pi or co) else "-")
        print(" ".join(str(x).rjust(n) for x, n in zip(row, w)))
        if ok and pi.get("fps") and co.get("fps") and (bestv is None or pi["fps"] > bestv[2]["fps"]):
            bestv = (name, b, pi, co, fl)
    if bestv:
        name, b, pi, co, fl = bestv
        print(f'GPU stage, integration only: {pi["fps"]:.0f} frames/s = '
              f'{100 * pi["fps"] / fl:.1f} % of the PCIe floor ({fl:.0f}) [{name}, batch {b}]; target >= 90 %')
        print(f'compute alone (decode + integrate, frames on the device): {1e6 / co["fps"]:.1f} us '
              f'[{name}, batch {b}]; target <= 40 us (stretch 25)')
        print(f'versus pyFAI + silx at its fastest (poisson): ' +
              (f'{pi["fps"] / pyf:.1f}x ({pyf:.0f} frames/s)' if pyf else "not run") + "; target >= 20x")
# issue 17, the decoder's build variants (step 4a''), the default decoder first
decv = [v for v in os.environ.get("DECV", "").split()]
for v in decv:
    if not os.path.exists(os.path.join(log, f"decv_{v}.json")):
        print(f"issue 17, decoder: variant {v} FAILED or differs, no figures (see decv_{v}.log)")
decv = [v for v in decv if os.path.exists(os.path.join(log, f"decv_{v}.json"))]
if decv:
    j0 = json.load(open(os.path.join(log, f"decv_{decv[0]}.json")))
    print(f'\nissue 17, decoder variants ({j0["rows"]} x {j0["cols"]} {j0["dtype"]} synthetic bslz4, '
          f'{j0["chunk_bytes_mean"] / 1e6:.2f} MB, split {j0["split"]}, {j0["npt"]} bins; '
          "FAID_CLCODEC_DEFINES builds of bslz4.cl; dec alone = fused, one frame, median decode "
          "kernel us; cmp = compute alone, frames on the device, us per frame; stage = pipelined "
          "frames/s; =default: result hash equal to the default decoder's; target: compute alone <= 40 us)")
    print("  decoder alone (test_codec bench, EIGER 4M uint32 sparse counts; us per frame): dec 1q = "
          "back-to-back launches on one queue, dec 4q = 4 queues of frames in flight")
    hdr = ("variant", "dec alone", "cmp us", "cmp dec", "stage/s", "floor/s", "%floor", "ident",
           "=default", "relerr", "dec 1q", "dec 4q")
    w = [12, 9, 7, 7, 8, 8, 6, 5, 8, 8, 7, 7]
    def decb(v):
        p = os.path.join(log, f"decb_{v}.log")
        t = open(p).read() if os.path.exists(p) else ""
        if "WRONG" in t:
            return "WRONG", "WRONG"
        a = re.search(r"back-to-back launches ([0-9.]+) us/frame", t)
        b = re.search(r"4 queues: ([0-9.]+) us/frame", t)
        return (a.group(1) if a else "-"), (b.group(1) if b else "-")
    print(" ".join(h.rjust(n) for h, n in zip(hdr, w)))
    h0 = j0.get("result_hash") if decv[0] == "default" else None
    for v in decv:
        j = json.load(open(os.path.join(log, f"decv_{v}.json")))
        vs = {x["name"]: x for x in j["variants"]}
        fu, pi, co = vs.get("fused", {}), vs.get("pipelined", {}), vs.get("compute", {})
        fl = j.get("floor_fps", 0)
        dd = all(x.get("device_decode") == 1 for x in (fu, pi, co) if x)
        row = (v, fmt(fu, "decode_us", "{:.1f}"),
               f'{1e6 / co["fps"]:.1f}' if co.get("fps") else "-",
               fmt(co, "decode_us", "{:.1f}"), fmt(pi, "fps"), f"{fl:.0f}",
               f'{100 * pi["fps"] / fl:.1f}' if fl and pi.get("fps") else "-",
               "yes" if all(x.get("identical") == 1 for x in (pi, co) if x) else "NO",
               "-" if h0 is None else ("yes" if j.get("result_hash") == h0 else "NO"),
               f'{max(x.get("max_rel_err", 0) for x in (fu, pi, co) if x):.1e}') + decb(v)
        print(" ".join(str(x).rjust(n) for x, n in zip(row, w)) + ("" if dd else "  (NOT decoded on the device)"))
# multi-device scaling: a line per run, then a row per device (issue 17: where each device's run
# went; faid_bench.c multi_main, tests/bench/README.md "Several devices")
sc = sorted(f for f in os.listdir(log) if f.startswith("scale_") and f.endswith(".json"))
if sc:
    print("\nGPU stage on several devices (pipelined, frames round-robin; ratio to 1 device; target 3.6x on 4 (integration), 3.8x on 4 (peaks))")
    print("  per device: fps (its share of 1 device alone); its host thread, us per frame: submit / parser wait / device wait /"
          " collect / check / other; device busy: kernels % / copies % (OpenCL event times / its wall);"
          " PCIe floor GB/s alone -> all devices at once")
    one = {}
    def key(f):
        c, n = f[:-5].rsplit("_", 1)
        return (c.startswith("scale_shared_"), c.replace("scale_shared_", "scale_"), int(n))
    for f in sorted(sc, key=key):
        j = json.load(open(os.path.join(log, f)))
        shared = f.startswith("scale_shared_")
        c = f[len("scale_shared_" if shared else "scale_"):].rsplit("_", 1)[0]
        n = j["ndevices"]
        if n == 1 and not shared:
            one[c] = j
        per = " ".join(f'{d["fps"]:.0f}' for d in j["devices"])
        ratio = f'{j["fps"] / one[c]["fps"]:.2f}x' if c in one else "-"
        name = c + (" shared" if shared else "")
        print(f'{name:>16} {n} dev {j["fps"]:9.0f} fps  {ratio:>6}  per device {per}  identical '
              f'{"yes" if j["identical_devices"] and j["identical_pipelined"] else "NO"}'
              + (f'  peaks vs ref {"equal" if j.get("peaks_ref_equal") == 1 else "DIFFER" if j.get("peaks_ref_equal") == 0 else "-"}' if j.get("peaks") != "none" else "")
              + (f'  builds in window {j["builds_timed"]}, CPUs busy {j["cpus_busy"]:.1f}' if "builds_timed" in j else ""))
        alone = one[c]["devices"][0]["fps"] if c in one else None
        for i, d in enumerate(j["devices"] if "host_submit_us" in j["devices"][0] else []):
            share = f'({d["fps"] / alone:.2f})' if alone else ""
            print(f'{"":>16}   dev {i} {d["fps"]:7.0f} {share:>6}  host {d["host_submit_us"]:6.1f} /'
                  f' {d["host_parse_wait_us"]:5.1f} / {d["host_wait_us"]:6.1f} / {d["host_collect_us"]:5.1f} /'
                  f' {d["host_check_us"]:5.1f} / {d["host_other_us"]:5.1f}  busy {100 * d["busy_kernels"]:5.1f} /'
                  f' {100 * d["busy_copies"]:5.1f} %  h2d {d["h2d_us"]:5.1f} kern/frame'
                  f' {d["decode_us"] + d["preprocess_us"] + d["integrate_us"] + d["pkpre_us"] + d["clip_us"] + d["find_us"]:6.1f} us'
                  f'  floor {d["floor_alone_gbs"]:5.1f} -> {d["floor_together_gbs"]:5.1f}')
# issue 17: the peak path's kernel variants (step 4d), the issue's rows with their targets
psets = os.environ.get("PEAK_SETS", "").split()
if psets:
    print("\nissue 17, peak finding (the frames of the pk runs, 5 clip cycles; pipelined = "
          f'{os.environ.get("PEAK_DEPTH", "8")} slots x {os.environ.get("BATCH", "4")} frames in flight; '
          "one frame alone = the fused variant's median device times; a set whose peak lists or "
          "results differ from the reference device is not reported)")
    # "=default": the set's background and peak lists (faid-bench's peaks_hash over the 4
    # distinct frames) bit for bit those of the set "default" of the same run, pyfai/pf8 (every
    # set of the same work-group size sums in the same order; round 3's variants only move loads)
    hdr = ("set", "clip+pyfai fps", "clip+pf8 fps", "pkprep us", "clip us", "pyfai find us",
           "pf8 find us", "bg rel.err", "=default")
    w = [10, 15, 13, 10, 8, 14, 12, 10, 9]
    print(" ".join(h.rjust(n) for h, n in zip(hdr, w)))
    print(" ".join(str(x).rjust(n) for x, n in zip(
        ("target", ">= 8000", ">= 6000", "~floor", "~floor", "~floor", "~floor", "", ""), w)))
    # memory-traffic floors (docs/PERFORMANCE.md, "Speed round 3"): bytes read + written per
    # pixel / the HBM bandwidth (H100 SXM 3.35 TB/s, H200 4.8 TB/s); upper bounds of the bins'
    # entries by the pixel count: Poisson preprocess raw + normp + float4 out, sigma clip index +
    # float4 gather, picker radius + float4 + flag, peakfinder8 prep (float4, valid, pos_of,
    # img, cval) + radial (cval once) + candidates (img, bin_of, flag)
    first = next((os.path.join(log, f) for f in sorted(os.listdir(log))
                  if f.startswith("pkset_") and f.endswith(".json")), None)
    if first:
        j = json.load(open(first))
        npix = j["rows"] * j["cols"]
        bw = 4.8e12 if "H200" in j.get("device", "") else 3.35e12
        esz = {"uint8": 1, "int8": 1, "uint16": 2, "int16": 2}.get(j.get("dtype"), 4)
        fl = [npix * b / bw * 1e6 for b in (esz + 4 + 16, 20, 21, 42)]
        print(" ".join(str(x).rjust(n) for x, n in zip(
            ("floor us", f'{j["rows"]}x{j["cols"]}', "", f"{fl[0]:.0f}", f"{fl[1]:.0f}", f"{fl[2]:.0f}", f"{fl[3]:.0f}",
             f"{bw / 1e12:.2f}TB/s"), w)))
    def pkhash(ps, c):
        p = os.path.join(log, f"pkset_{ps}_{c}.json")
        return json.load(open(p)).get("peaks_hash") if os.path.exists(p) else None
    bases = dict(x.split(":", 1) for x in os.environ.get("PEAK_BASES", "").split())
    for ps in psets:
        r = {}
        ok = True
        err = 0.0
        base = bases.get(ps, "default")
        same = "/".join("-" if pkhash(ps, c) is None or pkhash(base, c) is None
                        else "yes" if pkhash(ps, c) == pkhash(base, c) else "NO"
                        for c in ("pk-pyfai", "pk-pf8"))
        if base != "default":
            same += f" ({base})"
        for c in ("pk-pyfai", "pk-pf8"):
            p = os.path.join(log, f"pkset_{ps}_{c}.json")
            if not os.path.exists(p):
                ok = False
                continue
            j = json.load(open(p))
            vs = {v["name"]: v for v in j["variants"]}
            good = j.get("peaks_ref_equal") == 1 and all(v.get("identical", 1) != 0 for v in vs.values())
            ok &= good
            err = max(err, j.get("bg_rel_err", 0.0))
            r[c] = (vs.get("pipelined", {}), vs.get("fused", {}), good)
        def cell(c, k, src):
            if c == "pk-pyfai" and ps.startswith(("r4", "r7", "r8wg")):
                return "-"
            if c not in r or not r[c][2]:
                return "WRONG" if c in r else "FAILED"
            return fmt(r[c][src], k)
        pre = "pk-pf8" if ps.startswith(("r4", "r7", "r8wg")) else "pk-pyfai"  # the run that has them
        row = (ps, cell("pk-pyfai", "fps", 0), cell("pk-pf8", "fps", 0),
               cell(pre, "pkpre_us", 1), cell(pre, "clip_us", 1),
               cell("pk-pyfai", "find_us", 1), cell("pk-pf8", "find_us", 1), f"{err:.1e}", same)
        print(" ".join(str(x).rjust(n) for x, n in zip(row, w)))
    print("finder kernels, one frame alone (fused variant, median us): pyfai flag / scan / write;"
          " peakfinder8 prep / radial / candidates / fill / scan / write (0: no such launch, "
          "FAID_PF8_NOPREP / FAID_PF8_CANDFILL / FAID_PF8_MERGE; launches = peakfinder8's count)")
    for ps in psets:
        parts = []
        for c, nk in (("pk-pyfai", 3), ("pk-pf8", 6)):
            p = os.path.join(log, f"pkset_{ps}_{c}.json")
            if not os.path.exists(p):
                continue
            j = json.load(open(p))
            v = {x["name"]: x for x in j["variants"]}.get("fused", {})
            if j.get("peaks_ref_equal") == 1 and v:
                parts.append(f"{c[3:]} " + " / ".join(fmt(v, f"find{k}_us") for k in range(1, nk + 1)))
                if nk == 6:
                    parts[-1] += f" (launches {sum(1 for k in range(1, 7) if v.get(f'find{k}_us', 0) > 0)})"
        print(f"{ps:>10}  " + "; ".join(parts))
    # ptxas's registers and spills per kernel (FAID_CL_VERBOSE=1 on NVIDIA's OpenCL): what
    # decides how many work-groups of the sigma clip an SM holds (docs/PERFORMANCE.md, round 3)
    want = ("faid_sigma_clip", "faid_pick_flag", "faid_pk_scan", "faid_pick_write")
    lines = []
    for ps in psets:
        p = os.path.join(log, f"pkset_{ps}_pk-pyfai.log")
        if not os.path.exists(p):
            continue
        regs, cur = {}, None
        pat = (r"Compiling entry function '(\w+)'|(\d+) bytes spill stores|"
               r"Used (\d+) registers(?:, (\d+) bytes smem)?")
        for m in re.finditer(pat, open(p, errors="replace").read()):
            if m.group(1):
                cur = m.group(1)
            elif cur and m.group(2):
                regs.setdefault(cur, {})["spill"] = int(m.group(2))
            elif cur and m.group(3):
                regs.setdefault(cur, {})["regs"] = int(m.group(3))
                regs[cur]["smem"] = int(m.group(4) or 0)
        got = [f'{k} {regs[k].get("regs", "?")} ({regs[k].get("smem", 0)} B local, spill '
               f'{regs[k].get("spill", 0)} B)' for k in want if k in regs]
        if got:
            lines.append(f"{ps:>10}  " + "; ".join(got))
    if lines:
        print("registers per work-item (ptxas, FAID_CL_VERBOSE=1), pk-pyfai's kernels:")
        print("\n".join(lines))
for p in (os.path.join(log, "daemon-bench.txt"), os.path.join(log, "daemon-peaks", "daemon-bench.txt")):
    if os.path.exists(p):
        print(open(p).read().rstrip("\n"))
# the 2D cake (360 x 1000): read back in full vs the daemon's lean cake (I alone), issue 17
cake = {}
for c in ("cake", "cake-lean"):
    p = os.path.join(log, f"bench_{c}.json")
    if c in configs and os.path.exists(p):
        cake[c] = max(json.load(open(p))["variants"], key=lambda v: v["fps"])
if cake:
    print("\n2D cake 360 x 1000, best variant: " + "; ".join(
        f'{c} {v["fps"]:.0f} frames/s ({v["name"]}, d2h {fmt(v, "d2h_us")} us, ident '
        f'{ {1: "yes", 0: "NO"}.get(v.get("identical", -1), "-")})' for c, v in cake.items())
        + " (target: cake-lean >= 2000 frames/s)")
rows = []
dev = ""
for c in configs:
    p = os.path.join(log, f"bench_{c}.json")
    if not os.path.exists(p):
        rows.append((c, "FAILED", *[""] * 16))
        continue
    j = json.load(open(p))
    dev = j["device"]
    for v in j["variants"]:
        ident = {1: "yes", 0: "NO"}.get(v.get("identical", -1), "-")
        rows.append((c, v["name"], fmt(v, "depth"), fmt(v, "batch"), fmt(v, "stage_us"),
                     fmt(v, "table_us"),
                     fmt(v, "h2d_us"), fmt(v, "decode_us"), fmt(v, "preprocess_us"),
                     fmt(v, "integrate_us"), fmt(v, "pkpre_us"), fmt(v, "clip_us"),
                     fmt(v, "find_us"),
                     fmt(v, "d2h_us"), fmt(v, "total_us"),
                     fmt(v, "fps"), ident, f'{v.get("max_rel_err", float("nan")):.1e}'))
print(f"\nfaid-bench on {dev}: median us per frame (device stages from OpenCL events; total ="
      f" submit-to-result latency); fps = frames / wall time; infl = frames in flight at most;"
      f" bat = frames per integration launch;"
      f" ident = bits equal to the synchronous result")
hdr = ("config", "variant", "infl", "bat", "stage", "parse", "h2d", "decode", "prep", "integr",
       "pkprep", "clip", "find", "d2h", "total", "fps", "ident", "relerr")
w = [8, 14, 4, 3, 6, 6, 6, 7, 6, 7, 6, 6, 6, 5, 7, 7, 5, 8]
print(" ".join(h.rjust(n) for h, n in zip(hdr, w)))
for r in rows:
    print(" ".join(str(x).rjust(n) for x, n in zip(r, w)))
EOF
exit $status
