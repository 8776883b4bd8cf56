#!/usr/bin/env bash
# Installs everything faid needs to build and test on Debian 12: the C toolchain and libraries
# from Debian's packages, and (with --python) the test-only Python references (pyFAI, hdf5plugin,
# numpy) into the virtual environment .venv at the project root. Idempotent: re-running is cheap.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)

pkgs=(build-essential cmake pkg-config git
      libzmq3-dev ocl-icd-opencl-dev opencl-c-headers pocl-opencl-icd clinfo
      liblz4-dev libmsgpack-dev libyaml-dev libcbor-dev libjansson-dev libhdf5-dev zlib1g-dev
      libmicrohttpd-dev libsystemd-dev prometheus chromium
      python3 python3-venv python3-pip valgrind
      clang libclang-rt-dev clang-format)

missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "faid: installing Debian packages: ${missing[*]}"
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if [ "${1:-}" = "--python" ]; then
    venv="$here/.venv"
    if [ ! -x "$venv/bin/python" ]; then
        echo "faid: creating $venv"
        python3 -m venv "$venv"
    fi
    if ! "$venv/bin/python" -c "import pyFAI, hdf5plugin, h5py, numpy, cbor2, lz4, websocket, jsonschema, openapi_spec_validator" 2>/dev/null; then
        echo "faid: installing Python test references into $venv"
        "$venv/bin/pip" install -q --upgrade pip
        "$venv/bin/pip" install -q -r "$here/tests/reference/requirements.txt"
    fi
    # faid's own Python package (client/python) with its Bluesky and Tango extras, editable so
    # that the checkout's sources are what runs.
    if ! "$venv/bin/python" -c "import faid, faid.bluesky, faid.tango, ophyd_async, tango" 2>/dev/null; then
        echo "faid: installing the faid Python package into $venv"
        "$venv/bin/pip" install -q -e "$here/client/python[bluesky,tango]" -c "$here/tests/reference/requirements.txt"
    fi
fi
