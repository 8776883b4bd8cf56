#!/usr/bin/env bash
# faid live demo, the README's main command. On a fresh Debian 12 machine it:
#   1. installs the Debian packages faid needs (deploy/install-deps.sh; no Python),
#   2. builds faid and faidctl into build/,
#   3. starts the daemon `faid` with its embedded default configuration (EIGER 4M, 1000 bins in
#      q_nm^-1, full pixel splitting, Poisson errors) on every GPU (devices: auto; without one,
#      the CPU OpenCL device), on loopback ports,
#   4. subscribes with `faidctl sub`, writing every profile to a folder,
#   5. replays synthetic bslz4-compressed EIGER 4M frames (rings, Bragg spots, Poisson noise,
#      module gaps) with `faidctl replay`,
#   6. prints throughput, latency and where the profiles went, and stops the daemon cleanly.
#
#   bash deploy/demo.sh        FAID_DEMO_FRAMES=N (default 20), FAID_BUILD_DIR=..., FAID_DEVICE=...
#                              (FAID_DEMO_PREBUILT=1: use the binaries in $FAID_BIN, no install/build)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${FAID_BUILD_DIR:-build}
frames=${FAID_DEMO_FRAMES:-20}
device=${FAID_DEVICE:-auto}
jobs=$(nproc 2>/dev/null || echo 2)

if [ "${FAID_DEMO_PREBUILT:-0}" = 1 ]; then
    # The test suite runs the demo on the binaries it has just built (and must not rebuild).
    bin=${FAID_BIN:-$build/bin}
else
    echo "== faid demo: dependencies"
    bash deploy/install-deps.sh

    echo "== faid demo: build ($build)"
    cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
    cmake --build "$build" -j"$jobs" --target faid faidctl
    bin=$build/bin
fi

echo "== faid demo: OpenCL devices"
"$bin/faidctl" devices || true

# Loopback ports that nothing else holds, so the demo never collides with a running faid.
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
pin=$(port); pout=$(port); pctl=$(port)
work=$(mktemp -d "${TMPDIR:-/tmp}/faid-demo.XXXXXX")
out=$work/profiles
mkdir -p "$out"
# The embedded default, with only the endpoints and the device changed.
"$bin/faid" --dump-config | sed \
    -e "s|\"tcp://\*:5555\"|\"tcp://127.0.0.1:$pin\"|" \
    -e "s|\"tcp://\*:5556\"|\"tcp://127.0.0.1:$pout\"|" \
    -e "s|\"tcp://127.0.0.1:5557\"|\"tcp://127.0.0.1:$pctl\"|" \
    -e "s|^devices: .*|devices: $device|" >"$work/faid.yaml"
grep -q "127.0.0.1:$pin" "$work/faid.yaml" || { echo "demo: could not set the endpoints" >&2; exit 1; }

echo "== faid demo: start the daemon (log: $work/faid.log)"
"$bin/faid" -c "$work/faid.yaml" 2>"$work/faid.log" &
faid_pid=$!
cleanup() { kill "$faid_pid" 2>/dev/null || true; }
trap cleanup EXIT
ctl=(--control "tcp://127.0.0.1:$pctl")
for _ in $(seq 1 120); do
    "$bin/faidctl" status "${ctl[@]}" --timeout 1 >/dev/null 2>&1 && break
    kill -0 "$faid_pid" 2>/dev/null || { cat "$work/faid.log"; echo "demo: faid exited" >&2; exit 1; }
    sleep 0.5
done

echo "== faid demo: subscribe, then replay $frames synthetic EIGER 4M frames"
"$bin/faidctl" sub --from "tcp://127.0.0.1:$pout" --count "$frames" --timeout 600 --out "$out" \
    2>"$work/sub.log" &
sub_pid=$!
sleep 1  # let the subscription reach the PUB socket before the first result
"$bin/faidctl" replay --to "tcp://127.0.0.1:$pin" --frames "$frames" --preset eiger_4m
wait "$sub_pid" && sub_rc=0 || sub_rc=$?

echo
echo "== faid demo: daemon status"
"$bin/faidctl" status "${ctl[@]}" | grep -E "state|processed|failed|dropped|fps|p50|p99|max|name" || true
"$bin/faidctl" stop "${ctl[@]}" >/dev/null
wait "$faid_pid" && faid_rc=0 || faid_rc=$?
trap - EXIT

echo
echo "== faid demo: summary"
n=$(find "$out" -name '*.dat' | wc -l)
first=$(find "$out" -name '*.dat' | sort | head -n 1)
echo "profiles: $n files in $out (columns: radial I sigma std count)"
if [ -n "$first" ]; then
    echo "first profile: $first"
    # sed reads all of sort's output (head would close the pipe early: SIGPIPE under pipefail).
    grep -v '^#' "$first" | sort -g -r -k2 | sed -n '1,3s/^/  strongest bin: /p'
fi
echo "daemon log: $work/faid.log; faid exit status $faid_rc"
[ "$sub_rc" -eq 0 ] && [ "$faid_rc" -eq 0 ] && [ "$n" -eq "$frames" ]
