#!/usr/bin/env bash
# Fails when a tracked C++/CUDA source differs from the repository's .clang-format (Debian's
# clang-format 14, which formatted the tree). Lists each file that drifted and how to fix it.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
FORMAT=${CLANG_FORMAT:-clang-format-14}
command -v "$FORMAT" >/dev/null || { echo "check-format: $FORMAT is not installed (scripts/install-deps.sh debian)"; exit 1; }
total=$(git ls-files '*.cc' '*.h' '*.cu' '*.cuh' | wc -l)
mapfile -t drifted < <(git ls-files -z '*.cc' '*.h' '*.cu' '*.cuh' |
  xargs -0 -n 64 -P 2 "$FORMAT" --dry-run --Werror 2>&1 |
  sed -nE 's/^([^: ]+\.(cc|h|cu|cuh)):[0-9]+:[0-9]+: error: .*/\1/p' | sort -u)
if [ ${#drifted[@]} -gt 0 ]; then
  echo "check-format: ${#drifted[@]} of $total files differ from .clang-format:"
  printf '  %s\n' "${drifted[@]}"
  echo "check-format: fix with: $FORMAT -i ${drifted[*]}"
  exit 1
fi
echo "check-format: all $total C++/CUDA sources match .clang-format"
