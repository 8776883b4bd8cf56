#!/usr/bin/env bash
# fan-gpu-bench.sh: issue 18's multi-GPU comparison, all on loopback in one run. Measures, never
# asserts on time.
#
#   a. one faid with `devices` = NGPU GPUs (their indices from `faidctl devices --json`), peaks
#      on (peaks.algorithm PEAKS), CONNS input endpoints, one `faidctl replay` per endpoint at
#      once (FRAMES / CONNS frames each, one series), one `faidctl sub --count FRAMES` on its
#      PUB: results/s from the first result to the last (sub's `result rate`), results seen of
#      frames sent, the frames sub found missing and the messages lost to it (msg_number gaps),
#      and the daemon's own received / processed / failed / dropped over the series; once the
#      daemon has accounted for every frame sent, a sub still waiting is stopped (it never waits
#      for its timeout). Every daemon's output.sndhwm is 1000000: on four H200 with peaks
#      (2026-11-26) sub saw 5,980 of 6,000 results with all processed and waited for its
#      timeout; the likely cause is the default (2 x queue.depth = 128 results), which a burst
#      of results from four GPUs overflows, and a PUB drops for that subscriber; sub's lost
#      messages (msg_number gaps) beside its missing frames now tell that from results never
#      published;
#   b. faid-fan bound on loopback with CONNS input endpoints and NGPU instances (one faid each,
#      input.protocol fan, input.mode connect, `devices` = ONE GPU index, the same reduction
#      settings as a), FAN_CONNS (default 1) fan-out input endpoints and one `faidctl replay`
#      each. Why 1: every replay sends the series' start and end, the fan-out passes each end
#      to every instance and an instance ends the series at the first (on PoCL, FAN_CONNS=2 left
#      30 of 60 frames unpublished and 15 reported lost); one `faidctl sub --until-end`
#      per instance's PUB: results summed, results/s = summed results / the longest instance's
#      first-to-last result span (the instances run side by side: blocks of fan.block frames in
#      turn);
#      every frame accounted: results + the fan-out's lost + dropped = frames sent; the fan-out's
#      status (routed, dropped, lost) and each instance's counters;
#   c. the ZeroMQ ceiling (`faid-bench --zmq-ceiling`, the frames replay sends) with 1 and with
#      CONNS connections at once (summed), as daemon-bench.sh measures it.
# One compact table last (also $OUT/fan-gpu-bench.txt). Exit status 0 when every step ran, every
# daemon stopped with status 0 and every frame was accounted for.
#
# Environment: FAID_BIN (default build/bin), DEVICE_KIND (gpu, the default, or cpu: every daemon
# uses `devices: cpu`, the one PoCL device, for a check of the script on a machine without GPUs),
# NGPU (default 4), FRAMES (default 8000), PEAKS (default pyfai; none = off), CONNS (default 4),
# PRESET (detector.preset when CONFIG is not set; default the embedded EIGER 4M), CONFIG (a
# faid YAML for the detector and reduction; endpoints, devices, queue, pipeline, stats and log are
# replaced), FAN_CONNS (b's replays into the fan-out, default 1), INFLIGHT / BATCH (default 8 and 2, as daemon-bench.sh), BLOCK (fan.block, default 16),
# WARMUP (frames of the warm-up series of each daemon, default 32), TIMEOUT (seconds any step may
# wait, default 240), OUT (default tests/out/fan-gpu-bench).
# With DEVICE_KIND=gpu it does gpu-run.sh's steps 1-2 (runtime libraries of .device/debs, the
# NVIDIA OpenCL ICD: tests/bench/lib.sh's bench_runtime, which daemon start and stop, ports,
# configuration edits and the ceilings come from too).
set -u

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1
# shellcheck source=tests/bench/lib.sh
. "$root/tests/bench/lib.sh"
BIN=${FAID_BIN:-build/bin}
DEVICE_KIND=${DEVICE_KIND:-gpu}
NGPU=${NGPU:-4}
FRAMES=${FRAMES:-8000}
PEAKS=${PEAKS:-pyfai}
CONNS=${CONNS:-4}
PRESET=${PRESET:-}
CONFIG=${CONFIG:-}
INFLIGHT=${INFLIGHT:-8}
BATCH=${BATCH:-2}
BLOCK=${BLOCK:-16}
FAN_CONNS=${FAN_CONNS:-1}
WARMUP=${WARMUP:-32}
TIMEOUT=${TIMEOUT:-240}
LOG=${OUT:-$root/tests/out/fan-gpu-bench}
mkdir -p "$LOG" || { echo "fan-gpu-bench: cannot create $LOG" >&2; exit 1; }
LOG=$(cd "$LOG" && pwd)
rm -f "$LOG"/ports "$LOG"/*.yaml "$LOG"/*.log "$LOG"/*.sub "$LOG"/*.replay* "$LOG"/*.json "$LOG"/*.rc \
    "$LOG"/fan-gpu-bench.txt
say() { echo "fan-gpu-bench: $*" | tee -a "$LOG/fan-gpu-bench.log"; }
ctl=$BIN/faidctl
status=0
T() { timeout -k 5 "$TIMEOUT" "$@"; } # every client is bounded: the script never hangs

# gpu-run.sh steps 1-2
[ "$DEVICE_KIND" = gpu ] && bench_runtime "$LOG/fan-gpu-bench.log"

for b in faid faidctl faid-bench faid-fan; do
    [ -x "$BIN/$b" ] || { say "ERROR: $BIN/$b not found or not executable"; exit 1; }
done

# devices: a = the first NGPU GPU indices as a list, instance i = GPU index i alone
if [ "$DEVICE_KIND" = gpu ]; then
    mapfile -t gpus < <(T "$ctl" devices --json 2>>"$LOG/fan-gpu-bench.log" | python3 -c '
import json, sys
for d in json.load(sys.stdin)["devices"]:
    if d.get("type") == "gpu":
        print(d["index"])')
    if [ "${#gpus[@]}" -lt "$NGPU" ]; then
        say "ERROR: $NGPU GPUs wanted, faidctl devices lists ${#gpus[@]} (${gpus[*]:-none})"
        exit 1
    fi
    gpus=("${gpus[@]:0:$NGPU}")
    dev_all="[$(IFS=,; echo "${gpus[*]}")]"
else
    gpus=()
    for _ in $(seq 1 "$NGPU"); do gpus+=("$DEVICE_KIND"); done
    dev_all=$DEVICE_KIND
fi
say "devices: a = $dev_all, instances = ${gpus[*]}; FRAMES $FRAMES, CONNS $CONNS, PEAKS $PEAKS"

: >"$LOG/ports"
port() { bench_port; }
base_args=()
if [ -n "$CONFIG" ]; then
    base_args=(-c "$CONFIG")
elif [ -n "$PRESET" ]; then # the preset's shape and pixel size come with it in the dump
    printf 'detector:\n  preset: %s\n' "$PRESET" >"$LOG/preset.yaml"
    base_args=(-c "$LOG/preset.yaml")
fi
if ! "$BIN/faid" "${base_args[@]}" --dump-config >"$LOG/base.yaml" 2>>"$LOG/fan-gpu-bench.log"; then
    say "ERROR: faid --dump-config failed"
    exit 1
fi

edit() { bench_edit "$@"; }
ep() { echo "\"tcp://127.0.0.1:$1\""; }
eplist() { local s="" p; for p in "$@"; do s="$s${s:+, }$(ep "$p")"; done; echo "[$s]"; }
common=("queue.policy=block" "pipeline.inflight=$INFLIGHT" "pipeline.batch=$BATCH"
    "stats.interval=0" "log.level=info" "peaks.algorithm=$PEAKS" "output.lossless_endpoint=null"
    "output.sndhwm=1000000")

pids=()    # every daemon still running (killed by the trap)
# shellcheck disable=SC2317 # (called by the EXIT trap)
cleanup() { local p; for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; }
trap cleanup EXIT INT TERM

# up CONTROL_PORT PID NAME: waits until it answers status (log $LOG/NAME.log)
up() { bench_wait_up "$1" "$2" "$3" "$LOG/$3.log"; }
# down CONTROL_PORT PID NAME: status into NAME.status.json, stop, exit status into NAME.rc
down() { bench_stop "$1" "$2" "$3" "$LOG/$3.status.json" "$LOG/$3.rc" || status=1; }
# replays NAME SERIES N ENDPOINT_PORT...: one replay per port at once (frame ranges of their own,
# contiguous: sub's missing frames count only frames never seen)
replays() {
    local name=$1 sid=$2 n=$3
    shift 3
    local k=$# i=0 each=$((n / $#)) rps=() rc=0 p cnt
    for p in "$@"; do
        cnt=$each
        [ "$i" = $((k - 1)) ] && cnt=$((n - each * (k - 1)))
        T "$ctl" replay --to "tcp://127.0.0.1:$p" -c "$LOG/base.yaml" --frames "$cnt" \
            --first-frame $((i * each)) --series-id "$sid" --distinct 8 --timeout "$TIMEOUT" \
            --quiet >"$LOG/$name.replay$i" 2>&1 &
        rps+=($!)
        i=$((i + 1))
    done
    for p in "${rps[@]}"; do wait "$p" || rc=1; done
    [ "$rc" = 0 ] || { say "ERROR: a replay of $name failed (see $LOG/$name.replay*)"; status=1; }
}

# c. the ceilings, 1 and CONNS connections
say "c: zmq ceiling, 1 and $CONNS connections, $FRAMES frames"
bench_ceilings "$LOG/base.yaml" "$FRAMES" "$CONNS" "$LOG/ceiling_1.json" "$LOG/ceiling_n" || status=1

# a. one daemon on all NGPU devices
pin=()
for _ in $(seq 1 "$CONNS"); do pin+=("$(port)"); done
pout=$(port)
pctl=$(port)
if edit "$LOG/base.yaml" "$LOG/a.yaml" "${common[@]}" "devices=$dev_all" "input.mode=bind" \
    "input.endpoint=$(eplist "${pin[@]}")" "output.endpoint=$(ep "$pout")" \
    "control.endpoint=$(ep "$pctl")" 2>>"$LOG/fan-gpu-bench.log"; then
    say "a: faid, devices $dev_all, $CONNS input endpoints (log $LOG/a.log)"
    "$BIN/faid" -c "$LOG/a.yaml" 2>"$LOG/a.log" &
    apid=$!
    pids+=("$apid")
    if up "$pctl" "$apid" a; then
        T "$ctl" sub --from "tcp://127.0.0.1:$pout" --count "$WARMUP" --until-end --timeout "$TIMEOUT" \
            --quiet >"$LOG/a_warm.sub" 2>&1 &
        sp=$!
        sleep 1
        replays a_warm 1 "$WARMUP" "${pin[0]}"
        wait "$sp" || { say "ERROR: a warm-up sub failed"; status=1; }
        T "$ctl" reset --control "tcp://127.0.0.1:$pctl" >/dev/null 2>&1
        T "$ctl" status --control "tcp://127.0.0.1:$pctl" --json >"$LOG/a_warm.status.json" 2>/dev/null
        # --count alone: each of the CONNS replays sends an end, and sub --until-end stopped at
        # the first one with 30 of 60 results on PoCL
        T "$ctl" sub --from "tcp://127.0.0.1:$pout" --count "$FRAMES" --timeout "$TIMEOUT" \
            --quiet --rcvhwm 1000000 >"$LOG/a.sub" 2>&1 &
        sp=$!
        sleep 1
        say "a: $FRAMES frames over $CONNS connections"
        replays a 2 "$FRAMES" "${pin[@]}"
        # every frame sent accounted for by the daemon (processed, failed or dropped), then a
        # second for the last results to reach sub: a sub still waiting has lost some, and is
        # stopped (its summary counts them) rather than waiting for its timeout
        want=$(python3 -c 'import json,sys; c=json.load(open(sys.argv[1])).get("counters",{}); print(c.get("received",0)+int(sys.argv[2]))' \
            "$LOG/a_warm.status.json" "$FRAMES" 2>/dev/null || echo "$FRAMES")
        for _ in $(seq 1 $((TIMEOUT * 2))); do
            kill -0 "$sp" 2>/dev/null || break
            T "$ctl" status --control "tcp://127.0.0.1:$pctl" --json 2>/dev/null | python3 -c '
import json, sys
c = json.load(sys.stdin).get("counters", {})
sys.exit(0 if c.get("processed", 0) + c.get("failed", 0) + c.get("dropped", 0) >= int(sys.argv[1]) else 1)' "$want" && break
            sleep 0.5
        done
        sleep 1
        if kill -0 "$sp" 2>/dev/null; then
            say "a: sub still waiting once the daemon accounted for every frame: stopped"
            kill -INT "$sp"
        fi
        wait "$sp"
        down "$pctl" "$apid" a
    else
        status=1
    fi
else
    say "ERROR: a's configuration"; status=1
fi

# b. faid-fan and NGPU instances, one device each
fin=()
for _ in $(seq 1 "$FAN_CONNS"); do fin+=("$(port)"); done
finst=$(port)
fout=$(port)
fctl=$(port)
ipout=()
ipctl=()
edit "$LOG/base.yaml" "$LOG/fan.yaml" "input.mode=bind" "input.endpoint=$(eplist "${fin[@]}")" \
    "fan.instances_endpoint=$(ep "$finst")" "fan.output_endpoint=$(ep "$fout")" \
    "fan.control_endpoint=$(ep "$fctl")" "fan.block=$BLOCK" 2>>"$LOG/fan-gpu-bench.log" ||
    { say "ERROR: the fan-out's configuration"; status=1; }
say "b: faid-fan, $FAN_CONNS input endpoints, fan.block $BLOCK (log $LOG/fan.log)"
"$BIN/faid-fan" -c "$LOG/fan.yaml" 2>"$LOG/fan.log" &
fpid=$!
pids+=("$fpid")
bok=1
up "$fctl" "$fpid" fan || bok=0
ipid=()
for i in $(seq 0 $((NGPU - 1))); do
    ipout+=("$(port)")
    ipctl+=("$(port)")
    edit "$LOG/base.yaml" "$LOG/i$i.yaml" "${common[@]}" "devices=${gpus[$i]}" "input.mode=connect" \
        "input.protocol=fan" "input.endpoint=$(ep "$finst")" "output.endpoint=$(ep "${ipout[$i]}")" \
        "control.endpoint=$(ep "${ipctl[$i]}")" "instance.name=i$i" 2>>"$LOG/fan-gpu-bench.log" ||
        { say "ERROR: instance $i's configuration"; bok=0; }
    say "b: instance i$i, devices ${gpus[$i]} (log $LOG/i$i.log)"
    "$BIN/faid" -c "$LOG/i$i.yaml" 2>"$LOG/i$i.log" &
    ipid+=($!)
    pids+=($!)
done
for i in $(seq 0 $((NGPU - 1))); do up "${ipctl[$i]}" "${ipid[$i]}" "i$i" || bok=0; done
# every instance has said hello to the fan-out
if [ "$bok" = 1 ]; then
    for _ in $(seq 1 $((TIMEOUT * 2))); do
        n=$(T "$ctl" status --control "tcp://127.0.0.1:$fctl" --json 2>/dev/null | python3 -c '
import json, sys
print(sum(1 for i in json.load(sys.stdin).get("instances", []) if i.get("state") == "live"))' 2>/dev/null)
        [ "${n:-0}" -ge "$NGPU" ] && break
        sleep 0.5
    done
    [ "${n:-0}" -ge "$NGPU" ] || { say "ERROR: only ${n:-0} of $NGPU instances live at the fan-out"; bok=0; }
fi
bsubs() { # NAME: one sub per instance, --until-end
    sps=()
    for i in $(seq 0 $((NGPU - 1))); do
        T "$ctl" sub --from "tcp://127.0.0.1:${ipout[$i]}" --until-end --timeout "$TIMEOUT" --quiet \
            --rcvhwm 1000000 >"$LOG/$1.i$i.sub" 2>&1 &
        sps+=($!)
    done
    sleep 1
}
if [ "$bok" = 1 ]; then
    bsubs b_warm
    replays b_warm 1 "$((WARMUP * NGPU))" "${fin[0]}"
    for p in "${sps[@]}"; do wait "$p" || { say "ERROR: a warm-up sub of b failed"; status=1; }; done
    T "$ctl" status --control "tcp://127.0.0.1:$fctl" --json >"$LOG/fan_warm.status.json" 2>/dev/null
    for i in $(seq 0 $((NGPU - 1))); do
        T "$ctl" reset --control "tcp://127.0.0.1:${ipctl[$i]}" >/dev/null 2>&1
    done
    bsubs b
    say "b: $FRAMES frames over $FAN_CONNS connection(s) to the fan-out"
    replays b 2 "$FRAMES" "${fin[@]:0:$FAN_CONNS}"
    for p in "${sps[@]}"; do wait "$p" || { say "ERROR: a sub of b failed (see $LOG/b.i*.sub)"; status=1; }; done
else
    status=1
fi
for i in $(seq 0 $((NGPU - 1))); do
    if kill -0 "${ipid[$i]}" 2>/dev/null; then down "${ipctl[$i]}" "${ipid[$i]}" "i$i"; else status=1; fi
done
if kill -0 "$fpid" 2>/dev/null; then down "$fctl" "$fpid" fan; else status=1; fi
pids=()
trap - EXIT INT TERM

python3 - "$LOG" "$NGPU" "$CONNS" "$FRAMES" "$WARMUP" "$dev_all" "$PEAKS" <<'EOF' | tee "$LOG/fan-gpu-bench.txt"
import glob, json, os, re, sys
log, ngpu, conns, frames, warm, dev, peaks = sys.argv[1:]
ngpu, conns, frames, warm = int(ngpu), int(conns), int(frames), int(warm)
def read(n):
    p = os.path.join(log, n)
    return open(p).read() if os.path.exists(p) else ""
def jread(n):
    try:
        return json.loads(read(n))
    except ValueError:
        return {}
def num(pat, text, default=None):
    m = re.search(pat, text, re.M)
    return float(m.group(1)) if m else default
def f(x, fmt="{:.0f}"):
    return "-" if x is None else fmt.format(x)
c1 = jread("ceiling_1.json").get("msg_per_s")
cn = [jread(os.path.basename(p)).get("msg_per_s") for p in glob.glob(os.path.join(log, "ceiling_n*.json"))]
cn = sum(cn) if cn and all(cn) else None
# the results' own span (sub's "result rate"), never a rate stretched by a wait for what never
# came; a sub stopped early says so below
asub = read("a.sub")
ra = num(r"^result rate: ([\d.]+) results/s", asub) if "result rate:" in asub else None
ra = ra if ra else None
na = num(r"results: (\d+)", asub, 0)
a_missing = num(r"missing frames: (\d+)", asub)
a_lostmsg = num(r"lost messages: (\d+)", asub)
a_why = (re.search(r"^stopped: (.*)$", asub, re.M) or [None, "-"])[1]
ca_all = jread("a.status.json").get("counters", {})
caw = jread("a_warm.status.json").get("counters", {})
# the measured series' share of the daemon's counters (the warm-up's removed)
ca = {k: v - (caw.get(k) or 0) for k, v in ca_all.items() if isinstance(v, (int, float))}
sent = lambda name: sum(num(r"frames: (\d+)", read(os.path.basename(p)), 0)
                        for p in glob.glob(os.path.join(log, f"{name}.replay*")))
sa, sb = sent("a"), sent("b")
nb, spans = 0, []
for i in range(ngpu):
    t = read(f"b.i{i}.sub")
    n = num(r"results: (\d+)", t, 0)
    span = num(r"^result rate: [\d.]+ results/s from the first result to the last, over ([\d.]+) s",
               t)
    nb += n
    if n > 1 and span:
        spans.append(span)
rb = (nb - 1) / max(spans) if spans and nb > 1 else None
fs = jread("fan.status.json")
fw = jread("fan_warm.status.json")
fc = fs.get("counters", fs)
fcw = fw.get("counters", fw)
def d(k):  # the measured series' share of the fan-out's counters (the warm-up's removed)
    v = fc.get(k)
    return None if v is None else v - (fcw.get(k) or 0)
lost, dropped, routed = d("lost"), d("dropped"), d("routed")
acc_b = nb + (lost or 0) + (dropped or 0)
insts = [jread(f"i{i}.status.json").get("counters", {}) for i in range(ngpu)]
rcs = {os.path.basename(p)[:-3]: read(os.path.basename(p)).strip()
       for p in glob.glob(os.path.join(log, "*.rc"))}
ok_a = sa == frames and na == frames and ca.get("received") == ca.get("processed") and not ca.get("failed")
ok_b = sb == frames and acc_b == frames
ok = ok_a and ok_b and bool(rcs) and all(v == "0" for v in rcs.values())
print(f"\nissue 18 on {dev} ({ngpu} devices), {frames} frames, {conns} connections, peaks.algorithm {peaks}")
rows = [("a: 1 daemon, all devices", f"{f(ra)} results/s", "1.00",
         f"{int(na)} results seen of {int(sa)} sent (sub: missing {f(a_missing)}, lost messages "
         f"{f(a_lostmsg)}, stopped: {a_why}); the daemon: received {ca.get('received', '-')} "
         f"processed {ca.get('processed', '-')} failed {ca.get('failed', '-')} dropped "
         f"{ca.get('dropped', '-')}"),
        (f"b: fan-out + {ngpu} instances", f"{f(rb)} results/s", f(rb and ra and rb / ra, "{:.2f}"),
         f"{int(nb)} results + lost {f(lost)} + dropped {f(dropped)} = {int(acc_b)} of {int(sa and sb)} sent; "
         f"routed {f(routed)}; per instance results "
         + "/".join(str(int(num(r'results: (\d+)', read(f'b.i{i}.sub'), 0))) for i in range(ngpu))
         + "; failed " + "/".join(str(c.get("failed", "-")) for c in insts)),
        ("c: zmq ceiling, 1 conn", f"{f(c1)} msg/s", f(c1 and ra and c1 / ra, "{:.2f}"), ""),
        (f"c: zmq ceiling, {conns} conn", f"{f(cn)} msg/s", f(cn and ra and cn / ra, "{:.2f}"),
         "independent pairs at once, summed"),
        ("clean stop", ",".join(f"{k}={v}" for k, v in sorted(rcs.items())), "",
         f"a accounted {'ok' if ok_a else 'NOT OK'}, b accounted {'ok' if ok_b else 'NOT OK'}")]
print(f"{'row':<28} {'rate':>18} {'x a':>6}  frames accounted / notes")
for r in rows:
    print(f"{r[0]:<28} {r[1]:>18} {r[2]:>6}  {r[3]}")
sys.exit(0 if ok else 1)
EOF
[ "${PIPESTATUS[0]}" = 0 ] || status=1
exit $status
