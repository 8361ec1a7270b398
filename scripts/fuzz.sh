#!/usr/bin/env bash
# Fuzzes every parser of untrusted bytes with clang's libFuzzer (ASan+UBSan) in its own tree,
# build-fuzz/. Usage: scripts/fuzz.sh [seconds-per-target, default 60] [target-name regex]
# Crash reproducers land in build-fuzz/crashes/; copy each into its target's corpus folder under
# tests/fuzz/ so the ctest replay (gcc build, sanitized) keeps it fixed.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
seconds="${1:-60}"
filter="${2:-.}"
bash "$ROOT/scripts/install-deps.sh"
fuzz_dir="$ROOT/build-fuzz"
say "Configuring the libFuzzer tree in build-fuzz (clang, -fsanitize=fuzzer,address,undefined)"
CC=clang CXX=clang++ cmake -S "$ROOT" -B "$fuzz_dir" -G Ninja -DMODELFLEET_LIBFUZZER=ON -DMODELFLEET_CUDA=OFF \
  -DMODELFLEET_SANITIZED_TESTS=OFF -DMODELFLEET_WERROR=OFF >/dev/null
mapfile -t lines < <(grep -E "^[^ ]*${filter}" "$fuzz_dir/fuzz_targets.txt" || true)
[ ${#lines[@]} -gt 0 ] || { echo "fuzz.sh: no fuzz targets match '$filter'"; exit 1; }
mkdir -p "$fuzz_dir/crashes"
for line in "${lines[@]}"; do
  read -r name binary corpus <<<"$line"
  say "Building $name"
  cmake --build "$fuzz_dir" -j "$(nproc)" --target "$name"
  work="$fuzz_dir/corpus/$name"
  mkdir -p "$work"
  say "Fuzzing $name for ${seconds}s (seeds: ${corpus#"$ROOT"/})"
  "$binary" -max_total_time="$seconds" -artifact_prefix="$fuzz_dir/crashes/$name-" -rss_limit_mb=4096 "$work" "$corpus"
done
say "No crashes found"
