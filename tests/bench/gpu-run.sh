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
# PYFAI_FRAMES (default 200), CONFIGS (default "full no bbox cake u16": which runs to do).
set -u

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1
BIN=${FAID_BIN:-build/bin}
DEVICE=${DEVICE:-gpu}
FRAMES=${FRAMES:-500}
PYFAI_FRAMES=${PYFAI_FRAMES:-200}
CONFIGS=${CONFIGS:-full no bbox cake u16}
LOG=${OUT:-$root/tests/out/gpu-run}
mkdir -p "$LOG" || { echo "gpu-run: cannot create $LOG" >&2; exit 1; }
say() { echo "gpu-run: $*" | tee -a "$LOG/gpu-run.log"; }

# 1. runtime libraries from the Debian packages, unpacked privately (never into /)
rt=$root/.device/rt
if ls .device/debs/*.deb >/dev/null 2>&1; then
    mkdir -p "$rt"
    for f in .device/debs/*.deb; do
        dpkg-deb -x "$f" "$rt" 2>>"$LOG/gpu-run.log" || dpkg -x "$f" "$rt" ||
            say "WARNING: could not unpack $f"
    done
else
    say "WARNING: no .device/debs/*.deb (run tests/bench/gpu-prepare.sh on the build machine)"
fi
export LD_LIBRARY_PATH="$rt/usr/lib/x86_64-linux-gnu:$rt/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="$rt/usr/bin:$PATH"

# 2. register NVIDIA's OpenCL driver with the ICD loader (no ICD file is installed there)
nvlib=""
for c in /usr/lib/libnvidia-opencl.so.1 /usr/lib/x86_64-linux-gnu/libnvidia-opencl.so.1 \
    /usr/lib64/libnvidia-opencl.so.1; do
    [ -e "$c" ] && { nvlib=$c; break; }
done
[ -z "$nvlib" ] && nvlib=$(ldconfig -p 2>/dev/null | awk '/libnvidia-opencl.so.1/ {print $NF; exit}')
if [ -n "$nvlib" ]; then
    if mkdir -p /etc/OpenCL/vendors 2>/dev/null && { [ -f /etc/OpenCL/vendors/nvidia.icd ] ||
        echo "$nvlib" >/etc/OpenCL/vendors/nvidia.icd; } 2>/dev/null; then
        say "ICD: /etc/OpenCL/vendors/nvidia.icd -> $(cat /etc/OpenCL/vendors/nvidia.icd)"
    else
        # not root: a private vendors folder (ocl-icd honours OCL_ICD_VENDORS)
        mkdir -p "$root/.device/icd"
        echo "$nvlib" >"$root/.device/icd/nvidia.icd"
        for f in /etc/OpenCL/vendors/*.icd; do [ -f "$f" ] && cp "$f" "$root/.device/icd/"; done
        export OCL_ICD_VENDORS=$root/.device/icd
        say "ICD: private OCL_ICD_VENDORS=$OCL_ICD_VENDORS ($nvlib)"
    fi
else
    say "WARNING: libnvidia-opencl.so.1 not found: only non-NVIDIA OpenCL devices (PoCL) will show"
fi

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
    [u16]="--split full --dtype uint16"
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
    say "faid-bench $c: $bench --device $DEVICE --frames $FRAMES $a"
    # shellcheck disable=SC2086
    if ! "$bench" --device "$DEVICE" --frames "$FRAMES" $a $extra --json "$LOG/bench_$c.json" \
        >"$LOG/bench_$c.log" 2>&1; then
        say "ERROR: faid-bench $c failed, tail of $LOG/bench_$c.log:"
        tail -n 20 "$LOG/bench_$c.log" | tee -a "$LOG/gpu-run.log"
        status=1
    fi
done

# 5. pyFAI + silx reference on the same frame and device, when its wheels came along
if ls .whl/*.whl >/dev/null 2>&1 && [ -f "$LOG/data/frame.npy" ]; then
    site=$root/.device/site
    if [ ! -d "$site/pyFAI" ]; then
        python3 -m pip install --no-index --no-deps --target "$site" .whl/*.whl \
            >"$LOG/pip.log" 2>&1 || say "WARNING: installing the wheels failed (see $LOG/pip.log)"
    fi
    say "pyFAI + silx reference ($PYFAI_FRAMES frames)"
    if ! PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" python3 tests/bench/pyfai_reference.py \
        --frame "$LOG/data/frame.npy" --chunk "$LOG/data/chunk.bslz4" \
        --poni "$LOG/data/geometry.poni" --frames "$PYFAI_FRAMES" --json "$LOG/pyfai.json" \
        >"$LOG/pyfai.log" 2>&1; then
        say "WARNING: pyFAI reference failed, tail of $LOG/pyfai.log:"
        tail -n 15 "$LOG/pyfai.log" | tee -a "$LOG/gpu-run.log"
    fi
else
    say "pyFAI reference skipped (no .whl/*.whl or no dumped frame)"
fi

# 6. compact table, last
python3 - "$LOG" $CONFIGS <<'EOF' | tee "$LOG/summary.txt"
import json, os, sys
log, configs = sys.argv[1], sys.argv[2:]
rows = []
dev = ""
for c in configs:
    p = os.path.join(log, f"bench_{c}.json")
    if not os.path.exists(p):
        rows.append((c, "FAILED", *[""] * 9))
        continue
    j = json.load(open(p))
    dev = j["device"]
    for v in j["variants"]:
        rows.append((c, v["name"], f'{v["stage_us"]:.0f}', f'{v["h2d_us"]:.0f}',
                     f'{v["decode_us"]:.0f}', f'{v["preprocess_us"]:.0f}',
                     f'{v["integrate_us"]:.0f}', f'{v["d2h_us"]:.0f}', f'{v["total_us"]:.0f}',
                     f'{v["fps"]:.0f}', f'{v.get("max_rel_err", float("nan")):.1e}'))
print(f"\nfaid-bench on {dev}: median us per frame (device stages from events), fps end-to-end")
hdr = ("config", "variant", "stage", "h2d", "decode", "prep", "integr", "d2h", "total", "fps",
       "relerr")
w = [8, 9, 6, 6, 7, 6, 7, 5, 7, 7, 8]
print(" ".join(h.rjust(n) for h, n in zip(hdr, w)))
for r in rows:
    print(" ".join(str(x).rjust(n) for x, n in zip(r, w)))
p = os.path.join(log, "pyfai.json")
if os.path.exists(p):
    j = json.load(open(p))
    print(f'\npyFAI {j.get("pyfai")} + silx on {j.get("device")}: decode {j.get("silx_decode_us", 0):.0f} us, '
          f'integrate (host frame) {j.get("pyfai_host_us", 0):.0f} us, pipeline {j.get("pipeline_fps", 0):.0f} fps')
    full = os.path.join(log, "bench_full.json")
    if os.path.exists(full):
        best = max(v["fps"] for v in json.load(open(full))["variants"])
        print(f'faid / pyFAI pipeline (full split): {best / j["pipeline_fps"]:.1f}x')
EOF
exit $status
