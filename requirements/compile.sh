#!/usr/bin/env bash
# Regenerates the pinned requirement files from their .in files: exact versions and sha256 hashes
# of every distribution, for `pip install --require-hashes --no-deps` (scripts/install-deps.sh).
# Run it by hand when a .in file changes or to move the pins forward; it needs PyPI.
#   requirements/compile.sh          # test.txt and cuda.txt
set -euo pipefail
cd "$(dirname "$0")"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 -m venv "$work/tools"
"$work/tools/bin/pip" install -q pip-tools==7.6.2
compile() {  # compile IN OUT
  "$work/tools/bin/pip-compile" --quiet --generate-hashes --strip-extras --allow-unsafe \
    --no-emit-index-url --no-emit-find-links --resolver=backtracking -o "$2" "$1"
}

compile test.in test.txt
# tensorflow-serving-api requires the package `tensorflow`; tensorflow-cpu is the same package
# (the same `import tensorflow`) without the CUDA build, and both must not be installed at once.
# So it is pinned here without its dependencies, which test.txt already holds (grpcio, protobuf,
# tensorflow-cpu of the same minor version).
tfsa=tensorflow-serving-api
tf_version=$(sed -nE 's/^tensorflow-cpu==([0-9.]+).*/\1/p' test.txt)
"$work/tools/bin/pip" download -q --no-deps --only-binary :all: -d "$work/tfsa" "$tfsa==$tf_version"
{
  echo "$tfsa==$tf_version \\"
  for f in "$work"/tfsa/*; do
    echo "    --hash=sha256:$(sha256sum "$f" | cut -d' ' -f1) \\"
  done | sed '$ s/ \\$//'
  echo "    # via requirements/compile.sh (with --no-deps: its 'tensorflow' is tensorflow-cpu)"
} >>test.txt

compile cuda.in cuda.txt
