#!/usr/bin/env bash
# faid demo: installs the Debian packages faid needs (deploy/install-deps.sh; no Python), builds
# into build/, generates one synthetic EIGER 4M frame (rings, Bragg spots, Poisson noise, module
# gaps at the bad-pixel value) and reduces it with the embedded default configuration (EIGER 4M,
# 1000 bins in q_nm^-1, full pixel splitting, Poisson errors, solid angle) on the best device
# (first GPU, else the CPU OpenCL device), then shows where the profile went and its first lines.
#
#   bash deploy/demo.sh            # FAID_BUILD_DIR=... to build elsewhere, FAID_DEVICE=ref|cpu|N
set -euo pipefail
cd "$(dirname "$0")/.."
build=${FAID_BUILD_DIR:-build}
device=${FAID_DEVICE:-auto}
jobs=$(nproc 2>/dev/null || echo 2)

echo "== faid demo: dependencies"
bash deploy/install-deps.sh

echo "== faid demo: build ($build)"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j"$jobs" --target faidctl

out=$(mktemp -d "${TMPDIR:-/tmp}/faid-demo.XXXXXX")
echo "== faid demo: OpenCL devices"
"$build/bin/faidctl" devices || true

echo "== faid demo: reduce a synthetic EIGER 4M frame (device: $device)"
"$build/bin/faidctl" process --synthetic 1 --device "$device" -o "$out"

dat="$out/synthetic_00000.dat"
echo
echo "frame:   $out/synthetic.npy (2167 x 2070 uint32)"
echo "profile: $dat ($(grep -vc '^#' "$dat") bins: radial I sigma std count)"
echo
head -n 22 "$dat"
echo "..."
echo
echo "strongest bins (Debye-Scherrer rings):"
grep -v '^#' "$dat" | sort -g -r -k2 | head -n 5
echo
echo "Reduce your own frames: $build/bin/faidctl process -c deploy/faid.example.yaml -o OUT FRAMES.npy"
echo "(options: docs/configuration.md)"
