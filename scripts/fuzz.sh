#!/usr/bin/env bash
# Runs every cargo-fuzz target (fuzz/fuzz_targets) for SECONDS each (default 60), seeded from the repository's
# test models, and prints executions, coverage and crashes per target (also to .cache/fuzz/summary.txt).
#   bash scripts/fuzz.sh [SECONDS] [TARGET...]
# Needs a nightly toolchain (`rustup toolchain install nightly`) and cargo-fuzz (`cargo install cargo-fuzz`);
# it installs both when missing. A crash leaves its input in fuzz/artifacts/<target>/ and fails the run: fix it,
# then copy the input to fuzz/regressions/<target>/ (cli/tests/fuzz_regressions.rs replays those on stable).
# The fuzzers start from FUZZ_SEED (default 1), so a short run (CI's 30 s) explores the same inputs everywhere,
# only more or fewer of them; set another seed for new ground.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(onnx_import tflite_import npy_read compiler_log stablehlo_lower session_run graph_build)

rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked

# Seed corpora (regenerated each run; the fuzzer's own finds accumulate in .cache/fuzz/corpus).
seeds=.cache/fuzz/seeds
rm -rf "$seeds"
mkdir -p "$seeds"/{onnx,tflite,npy,log}
for m in examples/models/*.onnx; do cp "$m" "$seeds/onnx/"; done
if [ -d conformance/cases ]; then
    # small node models of every op family: one per case, up to 2 KB (larger ones slow the fuzzer)
    for d in conformance/cases/*/; do
        f="$d/model.onnx"
        [ -f "$f" ] && [ "$(stat -c %s "$f")" -le 2048 ] && cp "$f" "$seeds/onnx/$(basename "$d").onnx"
        [ -f "$d/input_0.npy" ] && [ "$(stat -c %s "$d/input_0.npy")" -le 2048 ] && cp "$d/input_0.npy" "$seeds/npy/$(basename "$d").npy"
    done
fi
for m in core/tests/data/converter/*.tflite core/tests/data/int8/*.tflite core/tests/data/rnn/*.tflite; do
    [ "$(stat -c %s "$m")" -le 65536 ] && cp "$m" "$seeds/tflite/"
done
cat > "$seeds/log/compiled.log" <<'LOG'
Edge TPU Compiler version 16.0.384591198
Started a compilation timeout timer of 180 seconds.

Model compiled successfully in 1354 ms.

Input model: m.tflite
Output model: m_edgetpu.tflite
On-chip memory used for caching model parameters: 6.03MiB
Number of Edge TPU subgraphs: 1
Total number of operations: 143
Number of operations that will run on Edge TPU: 139
Number of operations that will run on CPU: 4

Operator                       Count      Status

CONV_2D                        32         Mapped to Edge TPU
LOGISTIC                       1          Operation is otherwise supported, but not mapped due to some unspecified limitation
DEQUANTIZE                     2          Operation is working on an unsupported data type
Compilation child process completed within timeout period.
Compilation succeeded!
LOG
printf 'Edge TPU Compiler version 16.0.384591198\nERROR: Didn'"'"'t find op for builtin opcode '"'"'FULLY_CONNECTED'"'"' version '"'"'12'"'"'\n' > "$seeds/log/error.log"

declare -A seed_of=([onnx_import]=onnx [tflite_import]=tflite [npy_read]=npy [compiler_log]=log
                    [stablehlo_lower]="onnx tflite" [session_run]="onnx tflite" [graph_build]="")
summary=.cache/fuzz/summary.txt
: > "$summary"
status=0
cd fuzz
# FUZZ_BUILD=dev (CI's short pass): no optimisation, a much shorter build, fewer executions per second
if [ "${FUZZ_BUILD:-release}" = dev ]; then build=(--dev); else build=(-O); fi
cargo +nightly fuzz build "${build[@]}" 2>&1 | tail -3
for t in "${targets[@]}"; do
    corpus=../.cache/fuzz/corpus/$t
    mkdir -p "$corpus" "artifacts/$t"
    dirs=()
    for s in ${seed_of[$t]}; do dirs+=("../$seeds/$s"); done
    log=../.cache/fuzz/$t.log
    set +e
    cargo +nightly fuzz run "${build[@]}" "$t" "$corpus" "${dirs[@]}" -- -max_total_time="$secs" -rss_limit_mb=2048 \
        -timeout=10 -max_len=65536 -seed="${FUZZ_SEED:-1}" -print_final_stats=1 > "$log" 2>&1
    rc=$?
    set -e
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
    cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1 | grep -oE '[0-9]+')
    line="$t: ${runs:-0} executions in ${secs} s, coverage ${cov:-?} edges, exit $rc"
    if [ $rc -ne 0 ]; then
        line="$line  CRASH: see $log and fuzz/artifacts/$t/"
        status=1
    fi
    echo "$line" | tee -a "../$summary"
    if [ $rc -ne 0 ]; then
        # What a CI log must show to reproduce the crash elsewhere: the failure and the input itself.
        grep -E -A12 "panicked at|ERROR: (libFuzzer|AddressSanitizer|LeakSanitizer)|SUMMARY:" "$log" | head -60 || true
        for a in $(grep -oE "Test unit written to [^ ]+" "$log" | awk '{print $5}'); do
            [ -f "$a" ] || continue
            echo "--- crashing input $a ($(stat -c %s "$a") bytes), base64:"
            base64 -w 120 "$a" | head -800
        done
    fi
done
exit $status
