#!/usr/bin/env bash
# The whole check on a GPU machine, in one go: build, the test suite (CUDA and slow cases included),
# compute-sanitizer's four tools over every CUDA variant, and the benchmarks (the full-sum sweep, the
# dims suite, the ladder, the statistics suite, the eager suite, the CPU sweep, exact sums and,
# on machines with two GPUs or more, sums across 1, 2, 4, ... of them, the bits compared across
# the world sizes). Logs and results go to $LOGS (default ./gpu_check_out); a summary is
# printed last and kept in summary.txt. Needs no network: torch, pytest, ninja and cmake must
# already be installed.
#
#   bash scripts/gpu_check.sh            # everything
#   STAGES="build test" bash scripts/gpu_check.sh
#   STAGES=test TEST_FILES="tests/test_dims.py tests/test_stats.py" bash scripts/gpu_check.sh
#   BENCH_ARGS="--quick" bash scripts/gpu_check.sh    # arguments for benchmarks/bench.py
#   DIMS_ARGS="--ops sum" bash scripts/gpu_check.sh   # arguments for benchmarks/bench.py --dims
#   STAGES=distributed DISTRIBUTED_ARGS="--sizes 2^20,2^30" bash scripts/gpu_check.sh
#   PREBUILT=DIR bash scripts/gpu_check.sh   # the library of scripts/prebuilt.sh instead of a build
# Each stage has a time limit in seconds (TEST_TIMEOUT, SANITIZE_TIMEOUT per tool, BENCH_TIMEOUT for
# bench, dims and ladder each).
set -uo pipefail
cd "$(dirname "$0")/.."
LOGS=${LOGS:-$PWD/gpu_check_out}
STAGES=${STAGES:-"build test sanitize bench dims ladder stats eager cpu exact distributed"}
BENCH_ARGS=${BENCH_ARGS:-}
DIMS_ARGS=${DIMS_ARGS:-}
mkdir -p "$LOGS"
export PYTHONUNBUFFERED=1
summary=()
note() { summary+=("$1"); echo "== $1"; }

{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
  nvcc --version | tail -1
} > "$LOGS/device.txt" 2>&1
note "device: $(tr '\n' ';' < "$LOGS/device.txt")"

has() { [[ " $STAGES " == *" $1 "* ]]; }

if has build && [ -n "${PREBUILT:-}" ]; then
  # Built elsewhere for this machine's torch and GPU (scripts/prebuilt.sh): in place, as a build
  # leaves it, and importable from the checkout.
  if python3 -c "import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open('torch_reduce/_C.abi3.so', 'wb'))" \
       "$PREBUILT/_C.abi3.so.xz" && cp "$PREBUILT/_C.build.json" torch_reduce/ &&
     python3 -c 'import torch_reduce' > "$LOGS/build.log" 2>&1; then
    note "build: prebuilt ($PREBUILT)"
    export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
  else
    note "build: the prebuilt library FAILED to load (see build.log)"; tail -30 "$LOGS/build.log"
  fi
elif has build; then
  start=$SECONDS
  if MAX_JOBS=${MAX_JOBS:-$(nproc)} python3 -m pip install --no-build-isolation --no-deps -e . > "$LOGS/build.log" 2>&1; then
    note "build: ok ($((SECONDS - start)) s)"
  else
    note "build: FAILED (see build.log)"; tail -30 "$LOGS/build.log"
  fi
fi

if has test; then
  # With pytest-xdist (the GPU machines have it): a worker a core up to 15, two threads each (the
  # CPU tests of 15 workers of 16 threads each on 16 cores took 25-76 s a test, the whole stage
  # past 20 minutes; this way about 150 s on an H200 machine), torch.compile's kernels compiled in
  # each worker's own process (its pool of compile processes once hung a worker's exit), then the
  # tests past 2^31 elements alone (beside 15 workers they once ran out of GPU memory).
  start=$SECONDS
  if python3 -c "import xdist" 2> /dev/null; then
    workers=$(( $(nproc) > 16 ? 15 : $(nproc) - 1 ))
    workers=$(( workers < 1 ? 1 : workers ))
    # -v: a line a test as it ends, so a run cut by the time limit still names its failures.
    OMP_NUM_THREADS=2 TORCHINDUCTOR_COMPILE_THREADS=1 timeout "${TEST_TIMEOUT:-1200}" python3 -m pytest ${TEST_FILES:-tests} \
      -v -rfEs -p no:cacheprovider -n "$workers" --dist loadgroup -k "not past_int32" > "$LOGS/pytest.log" 2>&1
    result=$(grep -E '^(=+ )?[0-9]+ (passed|failed)|no tests ran' "$LOGS/pytest.log" | tail -1 | tr -d '=')
    [ -n "$result" ] || result="cut short: $(grep -c ' PASSED ' "$LOGS/pytest.log") passed, $(grep -c ' FAILED ' "$LOGS/pytest.log") failed so far"
    note "tests ($workers workers): $result ($((SECONDS - start)) s)"
    grep -E '\] (FAILED|ERROR) ' "$LOGS/pytest.log" | sed 's/^.*\] //' | sort -u | head -40
    start=$SECONDS
    timeout "${TEST_TIMEOUT:-1200}" python3 -m pytest ${TEST_FILES:-tests} -q -rfEs -p no:cacheprovider -k "past_int32" \
      > "$LOGS/pytest_past_int32.log" 2>&1
    note "tests past 2^31 elements: $(grep -E '^(=+ )?[0-9]+ (passed|failed|deselected)|no tests ran' "$LOGS/pytest_past_int32.log" | tail -1 | tr -d '=') ($((SECONDS - start)) s)"
    grep -E '^(FAILED|ERROR)' "$LOGS/pytest_past_int32.log" | head -20
  else
    timeout "${TEST_TIMEOUT:-1200}" python3 -m pytest ${TEST_FILES:-tests} -q -rfEs -p no:cacheprovider > "$LOGS/pytest.log" 2>&1
    note "tests: $(grep -E '^(=+ )?[0-9]+ (passed|failed)|no tests ran' "$LOGS/pytest.log" | tail -1 | tr -d '=') ($((SECONDS - start)) s)"
    grep -E '^(FAILED|ERROR)' "$LOGS/pytest.log" | head -20
  fi
fi

if has sanitize; then
  # Every kernel is instrumented, torch's too: initcheck must see the kernels that write our
  # inputs, or it reports them as uninitialised. Without the caching allocator every tensor is
  # its own allocation, so memcheck sees its true bounds.
  for tool in memcheck racecheck synccheck initcheck; do
    start=$SECONDS
    PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout "${SANITIZE_TIMEOUT:-600}" compute-sanitizer --tool "$tool" \
      --error-exitcode 99 --print-limit 20 python3 scripts/sanitize_cases.py > "$LOGS/sanitize_$tool.log" 2>&1
    rc=$?
    errors=$(grep -Eo 'ERROR SUMMARY: [0-9]+ error|RACECHECK SUMMARY: [0-9]+ hazard[s]? displayed' "$LOGS/sanitize_$tool.log" | tail -1)
    cases=$(grep -Eo 'sanitize_cases: .*' "$LOGS/sanitize_$tool.log" | tail -1)
    note "sanitize $tool: exit $rc; ${errors:-no summary line}; ${cases:-no result line} ($((SECONDS - start)) s)"
    # the normalizing ops' kernels (softmax family, cross_entropy), every path once
    PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout "${SANITIZE_TIMEOUT:-600}" compute-sanitizer --tool "$tool" \
      --error-exitcode 99 --print-limit 20 python3 scripts/sanitize_normalizing.py > "$LOGS/sanitize_norm_$tool.log" 2>&1
    rc=$?
    errors=$(grep -Eo 'ERROR SUMMARY: [0-9]+ error|RACECHECK SUMMARY: [0-9]+ hazard[s]? displayed' "$LOGS/sanitize_norm_$tool.log" | tail -1)
    note "sanitize $tool (normalizing ops): exit $rc; ${errors:-no summary line}"
  done
fi

if has bench; then
  start=$SECONDS
  # shellcheck disable=SC2086
  if timeout "${BENCH_TIMEOUT:-1200}" python3 benchmarks/bench.py --out "$LOGS/bench" $BENCH_ARGS > "$LOGS/bench.log" 2>"$LOGS/bench.err"; then
    note "bench: ok ($((SECONDS - start)) s); tables in bench.log and bench/results.md"
  else
    note "bench: FAILED"; tail -20 "$LOGS/bench.err"
  fi
fi

if has dims; then
  start=$SECONDS
  # shellcheck disable=SC2086
  if timeout "${BENCH_TIMEOUT:-1200}" python3 benchmarks/bench.py --dims --out "$LOGS/bench" $DIMS_ARGS > "$LOGS/dims.log" 2>"$LOGS/dims.err"; then
    note "dims: ok ($((SECONDS - start)) s); tables in dims.log and bench/results_dims.md"
  else
    note "dims: FAILED"; tail -20 "$LOGS/dims.err"
  fi
fi

if has ladder; then
  start=$SECONDS
  if timeout "${BENCH_TIMEOUT:-1200}" python3 benchmarks/bench.py --ladder --out "$LOGS/bench" > "$LOGS/ladder.log" 2>"$LOGS/ladder.err"; then
    note "ladder: ok ($((SECONDS - start)) s); table in ladder.log and bench/ladder.md"
  else
    note "ladder: FAILED"; tail -20 "$LOGS/ladder.err"
  fi
fi

# A suite script of benchmarks/ (NAME.py), its tables to $LOGS/bench.
suite() {
  local name=$1
  start=$SECONDS
  if (cd benchmarks && timeout "${BENCH_TIMEOUT:-1200}" python3 "$name.py" --out "$LOGS/bench" > "$LOGS/$name.log" 2>"$LOGS/$name.err"); then
    note "$name: ok ($((SECONDS - start)) s); table in $name.log and bench/$name.md"
  else
    note "$name: FAILED"; tail -20 "$LOGS/$name.err"
  fi
}

has stats && suite stats
has eager && suite eager  # calls from a plain Python loop: eager time, host cost, kernel time
has cpu && suite cpu  # the CPU sweep on this machine's cores (one thread and every core)

if has exact; then  # variant="exact" against auto and CUB, N(0,1) data and data over many binades
  start=$SECONDS
  if timeout "${BENCH_TIMEOUT:-1200}" python3 benchmarks/bench.py --variants auto,exact,cub \
       --dtypes float16,bfloat16,float32,float64 --modes hot,cold,eager --out "$LOGS/exact" > "$LOGS/exact.log" 2>"$LOGS/exact.err" &&
     timeout "${BENCH_TIMEOUT:-1200}" python3 benchmarks/bench.py --data wide --variants auto,exact \
       --dtypes float16,bfloat16,float32,float64 --sizes 2^24,2^28 --modes hot --out "$LOGS/exact_wide" >> "$LOGS/exact.log" 2>>"$LOGS/exact.err"; then
    note "exact: ok ($((SECONDS - start)) s); tables in exact.log, exact/ and exact_wide/"
  else
    note "exact: FAILED"; tail -20 "$LOGS/exact.err"
  fi
fi

gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
if has distributed && [ "$gpus" -ge 2 ]; then  # sums across 1, 2, 4, ... GPUs (NCCL) against DTensor's
  start=$SECONDS
  worlds=""; w=1
  while [ "$w" -le "$gpus" ]; do worlds="$worlds $w"; w=$((w * 2)); done
  [ $((w / 2)) -eq "$gpus" ] || worlds="$worlds $gpus"
  failed=""
  for w in $worlds; do
    # shellcheck disable=SC2086
    NCCL_NVLS_ENABLE=0 timeout "${BENCH_TIMEOUT:-1200}" torchrun --nproc-per-node "$w" benchmarks/distributed.py \
      --out "$LOGS/bench" ${DISTRIBUTED_ARGS:-} >> "$LOGS/distributed.log" 2>>"$LOGS/distributed.err" || failed="$failed $w"
  done
  python3 benchmarks/distributed.py --scaling "$LOGS/bench" >> "$LOGS/distributed.log" 2>>"$LOGS/distributed.err" ||
    failed="$failed scaling"
  if [ -z "$failed" ]; then
    note "distributed: ok ($((SECONDS - start)) s, worlds$worlds); tables in bench/distributed_w*.md and bench/scaling.md"
  else
    note "distributed: FAILED at$failed"; tail -20 "$LOGS/distributed.err"
  fi
fi

echo
echo "==== summary ($LOGS)"
printf '%s\n' "${summary[@]}" | tee "$LOGS/summary.txt"
