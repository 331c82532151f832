#!/usr/bin/env bash
# The whole model zoo: build the release CLI, build or fetch every model (cached in .cache/zoo), run the coverage
# table into zoo/COVERAGE.md.  `--fast`: the CI subset, checked against zoo/expected_fast.txt (a cell listed there
# that stops passing fails the run); its table goes to .cache/zoo/COVERAGE-fast.md.  Needs .venv and .venv-tf
# (bash scripts/test.sh sets them up).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --workspace --release --quiet  # what .ci/run builds: a no-op there
if [ "${1:-}" = "--fast" ]; then
    python3 zoo/build.py --fast
    only=$(python3 -c 'import sys; sys.path.insert(0, "zoo"); import build; print(",".join(build.FAST))')
    .venv/bin/python -W ignore zoo/coverage.py --only "$only" --out .cache/zoo/COVERAGE-fast.md \
        --expect zoo/expected_fast.txt
else
    python3 zoo/build.py "$@"
    .venv/bin/python -W ignore zoo/coverage.py
fi
