#!/usr/bin/env bash
# gpu-prepare.sh: run HERE (the Debian build machine, which reaches the package registries) before
# handing the tree to the offline GPU host. It fetches what faid's binaries need at run time there
# and what the side-by-side pyFAI + silx reference needs, into the git-ignored .device/ folder:
#
#   .device/debs/*.deb   Debian runtime packages (libzmq, liblz4, msgpack-c, libyaml, libcbor, jansson,
#                        clinfo, ...), unpacked on the GPU host by tests/bench/gpu-run.sh
#   .whl/*.whl           (with --wheels) cp312 manylinux wheels of pyFAI, silx, pyopencl and the
#                        dependencies the GPU host's Python 3.12 lacks; versions pinned to the ones
#                        in the project's .venv so that both sides run the same pyFAI
#
# Usage: tests/bench/gpu-prepare.sh [--wheels]
# Then build (cmake --build build) and let the GPU run carry build/, .device/ and .whl/.
# See /work/shared/device.md (the recipe) and tests/bench/README.md.
set -u

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1

want_wheels=0
for a in "$@"; do
    case "$a" in
    --wheels) want_wheels=1 ;;
    -h | --help)
        sed -n '2,17p' "$0"
        exit 0
        ;;
    *)
        echo "gpu-prepare: unknown option '$a' (try --help)" >&2
        exit 2
        ;;
    esac
done

# Runtime libraries of faid, faidctl and faid-bench, plus their own dependencies that a minimal
# Ubuntu image may lack, and clinfo for the device listing.
debs="libzmq5 libsodium23 libpgm-5.3-0 libnorm1 libbsd0 libmd0 liblz4-1 libmsgpackc2 \
libyaml-0-2 libcbor0.8 libjansson4 libmicrohttpd12 clinfo"
# libhdf5 and what it links that the GPU host lacks (faidctl replay --h5, the h5 fuzz target of
# .device/fuzz/run.sh).
debs="$debs libhdf5-103-1 libsz2 libaec0 libcurl4 libnghttp2-14 librtmp1 libssh2-1 libpsl5 \
libldap-2.5-0 libbrotli1 libsasl2-2 libsasl2-modules-db libunistring2"

command -v apt-get >/dev/null || { echo "gpu-prepare: apt-get not found (run this on the Debian build machine)" >&2; exit 1; }
mkdir -p .device/debs
fail=0
(
    cd .device/debs || exit 1
    for p in $debs; do
        if ls "${p}"_*.deb >/dev/null 2>&1; then
            echo "gpu-prepare: have $(ls "${p}"_*.deb | head -1)"
            continue
        fi
        if ! apt-get download "$p" >/dev/null 2>&1; then
            echo "gpu-prepare: apt-get download $p failed (try 'apt-get update' first)" >&2
            exit 1
        fi
        echo "gpu-prepare: got $(ls "${p}"_*.deb | head -1)"
    done
) || fail=1

if [ "$want_wheels" = 1 ]; then
    pip=""
    for c in "$root/.venv/bin/pip" pip3 pip; do
        if command -v "$c" >/dev/null 2>&1; then pip=$c; break; fi
    done
    if [ -z "$pip" ]; then
        echo "gpu-prepare: no pip found for --wheels" >&2
        fail=1
    else
        # version of a package in the project's venv, empty if absent
        ver() { "$root/.venv/bin/python" -c "import importlib.metadata as m; print(m.version('$1'))" 2>/dev/null; }
        mkdir -p .whl
        # no hdf5plugin: its 46 MB wheel alone nearly fills the 64 MiB the device tool carries,
        # and neither reference script needs it (pyFAI and silx import without it)
        for p in pyFAI silx pyopencl fabio numexpr pytools platformdirs siphash24 \
            typing_extensions; do
            v=$(ver "$p")
            spec=$p${v:+==$v}
            if ! "$pip" download --no-deps --only-binary=:all: --python-version 3.12 \
                --implementation cp --platform manylinux2014_x86_64 \
                --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
                --platform any -d .whl "$spec" >/dev/null 2>&1; then
                echo "gpu-prepare: pip download $spec failed" >&2
                fail=1
            else
                echo "gpu-prepare: wheel $spec"
            fi
        done
    fi
fi

if [ "$fail" != 0 ]; then
    echo "gpu-prepare: incomplete (see the messages above)" >&2
    exit 1
fi
msg="$(ls .device/debs | wc -l) debs in .device/debs"
[ "$want_wheels" = 1 ] && msg="$msg, $(ls .whl | wc -l) wheels in .whl"
echo "gpu-prepare: ready: $msg"
