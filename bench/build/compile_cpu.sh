#!/usr/bin/env bash
# CPU seconds (user + sys) of compiling each named target's own objects (not the libraries it
# links), one object after another with ccache bypassed, in an existing build tree: to compare
# build configurations (unity batches against file by file, say) on the same sources.
#
#   bench/build/compile_cpu.sh BUILD_DIR TARGET...
#
# Prints one line per target (its CPU seconds, running total) and the total. Recompiles the
# objects in place (same flags, so the tree stays valid).
set -euo pipefail
dir=$1
shift
times=$(mktemp)
trap 'rm -f "$times"' EXIT
total=0
for target in "$@"; do
  seconds=0
  while IFS= read -r command; do
    [ -n "$command" ] || continue
    (cd "$dir" && /usr/bin/time -o "$times" -f "%U %S" bash -c "$command" >/dev/null 2>&1)
    seconds=$(awk -v s="$seconds" '{print s + $1 + $2}' "$times")
  done < <(cd "$dir" && ninja -t commands "$target" | grep -E "CMakeFiles/$target\.dir/.*\.o -c " |
    sed -E 's#^[^ ]*ccache ##')
  total=$(awk -v a="$total" -v b="$seconds" 'BEGIN {print a + b}')
  printf '%-45s %8.1f CPU-s (total %.1f)\n' "$target" "$seconds" "$total"
done
printf '%s: %.1f CPU-s\n' "$dir" "$total"
