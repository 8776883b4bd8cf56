#!/usr/bin/env bash
# Checks that every tracked C source and header is formatted as the project's .clang-format says
# (clang-format --dry-run -Werror): lists the files that differ and exits 1, or exits 0.
# Fix with: git ls-files '*.c' '*.h' | xargs clang-format -i
# tests/run-all.sh runs it first (FAID_CHECK_FORMAT=0 skips it); the tree was formatted with
# clang-format 14 on 2026-11-22 (63 files changed).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || { echo "format-check: clang-format not installed" >&2; exit 1; }
bad=()
while IFS= read -r f; do
    clang-format --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done < <(git ls-files '*.c' '*.h')
if [ ${#bad[@]} -gt 0 ]; then
    echo "format-check: ${#bad[@]} file(s) differ from .clang-format (clang-format $(clang-format --version | grep -o '[0-9][0-9.]*' | head -1)):" >&2
    printf '  %s\n' "${bad[@]}" >&2
    exit 1
fi
echo "format-check: every tracked .c/.h file is formatted"
