# shellcheck shell=bash
# shellcheck disable=SC2154 # root, ctl, BIN, LOG, TIMEOUT and say are the caller's
# tests/bench/lib.sh: the steps the bench scripts share, sourced by gpu-run.sh, daemon-bench.sh
# and fan-gpu-bench.sh (never run alone). Each function logs through the caller's `say` and
# writes under the caller's $LOG; $root is the repository root, $BIN the binaries and $ctl
# faidctl where a function names them.
#
#   bench_runtime LOGFILE          the GPU host's runtime libraries and NVIDIA OpenCL ICD
#   bench_port                     a free loopback port, never one handed out before in this run
#   bench_edit SRC DST K=V...      a dumped faid configuration with some keys replaced
#   bench_wait_up CTL PID NAME LOGFILE    until the daemon on control port CTL answers status
#   bench_stop CTL PID NAME STATUS_JSON RC_FILE    status saved, stopped, exit status saved
#   bench_ceilings CONFIG FRAMES CONNS JSON_1 PREFIX_N    the ZeroMQ ceilings, 1 and CONNS
#                                  connections (PREFIX_N<k>.json, k = 1..CONNS)

# The runtime libraries of .device/debs (tests/bench/gpu-prepare.sh) unpacked privately (never
# into /), and NVIDIA's OpenCL driver registered with the ICD loader (the GPU host installs no
# ICD file): /etc/OpenCL/vendors/nvidia.icd as root, else a private OCL_ICD_VENDORS folder.
bench_runtime() {
    local log=$1 f c nvlib=""
    rt=$root/.device/rt
    if ls "$root"/.device/debs/*.deb >/dev/null 2>&1; then
        mkdir -p "$rt"
        for f in "$root"/.device/debs/*.deb; do
            dpkg-deb -x "$f" "$rt" 2>>"$log" || dpkg -x "$f" "$rt" ||
                say "WARNING: could not unpack $f"
        done
    else
        say "WARNING: no .device/debs/*.deb (run tests/bench/gpu-prepare.sh on the build machine)"
    fi
    export LD_LIBRARY_PATH="$rt/usr/lib/x86_64-linux-gnu:$rt/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export PATH="$rt/usr/bin:$PATH"
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
            mkdir -p "$root/.device/icd"
            echo "$nvlib" >"$root/.device/icd/nvidia.icd"
            for f in /etc/OpenCL/vendors/*.icd; do [ -f "$f" ] && cp "$f" "$root/.device/icd/"; done
            export OCL_ICD_VENDORS=$root/.device/icd
            say "ICD: private OCL_ICD_VENDORS=$OCL_ICD_VENDORS ($nvlib)"
        fi
    else
        say "WARNING: libnvidia-opencl.so.1 not found: only non-NVIDIA OpenCL devices (PoCL) will show"
    fi
}

# A free loopback port not handed out before in this run ($LOG/ports): the kernel may give a
# released port again, and a fan-out's input once got its own output port and failed to bind.
bench_port() {
    local p
    for _ in $(seq 1 50); do
        p=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
        grep -qsx "$p" "$LOG/ports" || break
    done
    echo "$p" >>"$LOG/ports"
    echo "$p"
}

# bench_edit SRC DST section.key=value...: SRC (a `faid --dump-config`) with those keys' values
# replaced (a top-level key is written .key); fails naming any key SRC does not have.
bench_edit() {
    python3 - "$@" <<'EOF'
import sys
src, dst, *kv = sys.argv[1:]
want = {}
for a in kv:
    k, _, v = a.partition("=")
    sec, _, key = k.rpartition(".")
    want[(sec, key)] = v
out, sec, done = [], "", set()
for line in open(src):
    body = line.rstrip("\n")
    if body and not body.startswith((" ", "#")):
        key, _, val = body.partition(":")
        sec = key if not val.strip() else ""
        if ("", key) in want:
            body, _ = f"{key}: {want['', key]}", done.add(("", key))
    elif body.startswith("  ") and not body.lstrip().startswith("#"):
        key = body.strip().partition(":")[0]
        if (sec, key) in want:
            body, _ = f"  {key}: {want[sec, key]}", done.add((sec, key))
    out.append(body)
if set(want) - done:
    sys.exit(f"keys not found in the dumped configuration: {sorted(set(want) - done)}")
open(dst, "w").write("\n".join(out) + "\n")
EOF
}

# bench_wait_up CTL PID NAME LOGFILE: 0 once the daemon (faid or faid-fan) answers status on
# control port CTL; 1 when PID ended or TIMEOUT passed (the tail of LOGFILE is shown).
bench_wait_up() {
    for _ in $(seq 1 $((TIMEOUT * 2))); do
        "$ctl" status --control "tcp://127.0.0.1:$1" --timeout 1 >/dev/null 2>&1 && return 0
        kill -0 "$2" 2>/dev/null || break
        sleep 0.5
    done
    say "ERROR: $3 did not come up; tail of $4:"
    tail -n 20 "$4" | while IFS= read -r l; do say "  $l"; done
    return 1
}

# bench_stop CTL PID NAME STATUS_JSON RC_FILE: its status into STATUS_JSON, then `faidctl stop`
# (faid) or SIGTERM (faid-fan, NAME fan: it has no stop command), killed if it does not end
# within TIMEOUT; its exit status into RC_FILE; returns 1 unless it was 0.
bench_stop() {
    local rc=0
    "$ctl" status --control "tcp://127.0.0.1:$1" --json >"$4" 2>/dev/null ||
        say "WARNING: status of $3 failed"
    if [ "$3" = fan ]; then
        kill -TERM "$2" 2>/dev/null
    else
        "$ctl" stop --control "tcp://127.0.0.1:$1" >/dev/null 2>&1 || say "WARNING: faidctl stop of $3 failed"
    fi
    for _ in $(seq 1 $((TIMEOUT * 2))); do kill -0 "$2" 2>/dev/null || break; sleep 0.5; done
    kill -0 "$2" 2>/dev/null && { say "ERROR: $3 did not stop, killed"; kill -9 "$2"; }
    wait "$2" || rc=$?
    echo "$rc" >"$5"
    [ "$rc" = 0 ] || { say "ERROR: $3 exited with status $rc"; return 1; }
}

# bench_replay_ceilings CONFIG FRAMES CONNS JSON_1 PREFIX_N: the transport ceiling of the daemon's
# own sender: `faidctl replay --no-series` (the same frames as the daemon's runs) into
# `faid-bench --zmq-sink`, a C PULL socket that only receives, on one connection (JSON_1), then
# CONNS replays into CONNS sinks sending from one --start-at (PREFIX_N<k>.json); the files carry
# --zmq-ceiling's keys (msg_per_s, gb_per_s, messages, message_bytes, first_wall / last_wall: the
# sinks' first and last message, a clock common to the host, late_s: the replay's lateness).
# Why: the pairs of --zmq-ceiling (sender and receiver in one process) moved 1,255-1,335 msg/s
# where replay -> faid moved 1,604 results/s with peaks on the same H100 host (2026-11-27), so
# they were no ceiling of what the daemon is given.
bench_replay_ceilings() {
    local cfg=$1 n=$2 k=$3 j1=$4 pre=$5 rc=0
    _replay_pairs "$cfg" "$n" 1 "${j1%.json}_p" && cp "${j1%.json}_p1.json" "$j1" || rc=1
    if [ "$k" -gt 1 ]; then
        _replay_pairs "$cfg" $((n / k)) "$k" "$pre" || rc=1
    fi
    return $rc
}

# _replay_pairs CONFIG FRAMES_EACH K PREFIX: K sinks and K replays, PREFIX<i>.json, i = 1..K
_replay_pairs() {
    local cfg=$1 each=$2 k=$3 pre=$4 rc=0 i ports sinks=() reps=()
    ports=$(python3 -c "
import socket
ss = [socket.socket() for _ in range($k)]
for s in ss: s.bind(('127.0.0.1', 0))
print(' '.join(str(s.getsockname()[1]) for s in ss))
for s in ss: s.close()")
    # shellcheck disable=SC2206
    ports=($ports)
    for i in $(seq 1 "$k"); do
        "$BIN/faid-bench" --zmq-sink --bind --endpoint "tcp://127.0.0.1:${ports[$((i - 1))]}" \
            --frames "$each" --timeout "$TIMEOUT" --json "$pre$i.sink" >"$pre$i.sink.log" 2>&1 &
        sinks+=($!)
    done
    sleep 0.5
    local sync=()
    [ "$k" -gt 1 ] && sync=(--start-at "$(start_at)")
    for i in $(seq 1 "$k"); do
        "$ctl" replay --to "tcp://127.0.0.1:${ports[$((i - 1))]}" -c "$cfg" --frames "$each" \
            --distinct 8 --no-series --timeout "$TIMEOUT" --quiet ${sync[@]+"${sync[@]}"} \
            >"$pre$i.replay" 2>&1 &
        reps+=($!)
    done
    for p in "${reps[@]}"; do wait "$p" || { say "ERROR: a ceiling replay failed"; rc=1; }; done
    for p in "${sinks[@]}"; do wait "$p" || { say "ERROR: a ceiling sink failed"; rc=1; }; done
    for i in $(seq 1 "$k"); do
        python3 - "$pre$i.sink" "$pre$i.replay" "$pre$i.json" <<'PY' || rc=1
import json, re, sys
j = json.load(open(sys.argv[1]))
rep = open(sys.argv[2]).read()
m = re.search(r"late by ([\d.]+) s", rep)
n, s = j["messages"], (j["last_ns"] - j["first_ns"]) / 1e9
rate = (n - 1) / s if s > 0 else 0.0
mb = j["bytes"] / n if n else 0.0
json.dump({"transport": "tcp, faidctl replay -> C PULL", "io_threads": 1, "messages": n,
           "message_bytes": mb, "seconds": s, "msg_per_s": rate, "gb_per_s": rate * mb / 1e9,
           "first_wall": j["first_ns"] / 1e9, "last_wall": j["last_ns"] / 1e9,
           "late_s": float(m.group(1)) if m else 0.0}, open(sys.argv[3], "w"))
PY
    done
    return $rc
}

# bench_ceilings CONFIG FRAMES CONNS JSON_1 PREFIX_N: `faid-bench --zmq-ceiling` with the
# frames `faidctl replay` sends for CONFIG's detector (8 distinct), one connection (JSON_1,
# log next to it), then CONNS independent pairs at once with FRAMES / CONNS frames each
# (PREFIX_N<k>.json); CONNS 1 skips those. Returns 1 when one failed. The pairs send from one
# wall-clock moment (--start-at, START_MARGIN s ahead, default 4: each process makes its frames
# first), so that their common span is known (first_wall / last_wall in their JSON).
# start_at: a wall-clock time START_MARGIN seconds ahead (default 4), for --start-at of several
# senders started together (four replays started at once on a 64-core host began sending up to
# 0.6 s apart, 2026-11-27: the time each took to make its frames, which halved the span in which
# all four sent)
start_at() {
    python3 -c "import time; print('%.6f' % (time.time() + ${START_MARGIN:-4}))"
}

bench_pair_ceilings() { bench_ceilings "$@"; }

bench_ceilings() {
    local cfg=$1 n=$2 k=$3 j1=$4 pre=$5 rc=0 i p cps=()
    if ! "$BIN/faid-bench" --zmq-ceiling --config "$cfg" --frames "$n" --distinct 8 \
        --json "$j1" >"${j1%.json}.log" 2>&1; then
        say "ERROR: zmq ceiling failed, tail of ${j1%.json}.log:"
        tail -n 5 "${j1%.json}.log" | while IFS= read -r l; do say "  $l"; done
        rc=1
    fi
    [ "$k" -gt 1 ] || return $rc
    local t0
    t0=$(start_at)
    for i in $(seq 1 "$k"); do
        "$BIN/faid-bench" --zmq-ceiling --config "$cfg" --frames $((n / k)) --distinct 8 \
            --start-at "$t0" --json "$pre$i.json" >"$pre$i.log" 2>&1 &
        cps+=($!)
    done
    for p in "${cps[@]}"; do wait "$p" || { say "ERROR: a parallel zmq ceiling failed"; rc=1; }; done
    return $rc
}
