#!/usr/bin/env bash
# Formats every C and C++ file git tracks with clang-format (.clang-format:
# Google style, 100 columns), or with --check reports the files that are not
# formatted and exits 1. scripts/test.sh runs the check.
#
#   scripts/format.sh            rewrite the files in place
#   scripts/format.sh --check    change nothing; fail if anything would change
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
command -v clang-format >/dev/null 2>&1 \
  || { echo "format.sh: clang-format not found (scripts/setup.sh installs it)" >&2; exit 1; }

mapfile -t files < <(git ls-files -- '*.cc' '*.h' '*.c')
if [[ "${1:-}" == "--check" ]]; then
  unformatted=()
  for f in "${files[@]}"; do
    if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then unformatted+=("$f"); fi
  done
  if ((${#unformatted[@]} > 0)); then
    echo "format.sh: not formatted (run scripts/format.sh): ${unformatted[*]}" >&2
    exit 1
  fi
  echo "format.sh: ${#files[@]} files formatted"
else
  clang-format -i "${files[@]}"
fi
