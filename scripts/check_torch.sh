#!/usr/bin/env bash
# torch_reduce as a user of one torch release gets it: a venv with that torch, then
# requirements.txt (which must leave that torch in place), a wheel built against it (pip wheel
# --no-build-isolation), the wheel installed, and the whole test suite run against the installed
# package (not the source tree).
#
#   bash scripts/check_torch.sh 2.15            # torch 2.15.x (the newest patch release on PyPI)
#   bash scripts/check_torch.sh 2.11 2.13       # several, one after another
#   NO_TOOLKIT=1 bash scripts/check_torch.sh 2.15
#       also runs the tests of loading and packaging, the override and every op's CPU kernels
#       ($NO_TOOLKIT_TESTS) a second time with the CUDA toolkit hidden (nvcc, headers and
#       libraries), as on a machine that has only the wheel; needs root and `unshare`. (The whole
#       suite a third time took CI past its hour: 3938 s.)
#
# The CUDA objects are kept in $TREDUCE_NVCC_CACHE (default build/nvcc-cache) and reused by the
# builds against other releases (scripts/nvcc_cache.py).
# Venvs are kept in $VENVS (default ~/.cache/torch_reduce/venvs) and pip caches what it downloads,
# so a second run installs nothing new. Logs go to $LOGS (default ./torch_check_out); the last lines
# printed are a summary, one line a run. Exits non-zero if any build or test run failed.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
VENVS=${VENVS:-$HOME/.cache/torch_reduce/venvs}
LOGS=${LOGS:-$ROOT/torch_check_out}
PYTHON=${PYTHON:-python3}
NO_TOOLKIT_TESTS=${NO_TOOLKIT_TESTS:-"tests/test_packaging.py tests/test_library.py tests/test_errors.py tests/test_override.py tests/test_logic.py tests/test_cpp.py"}
mkdir -p "$VENVS" "$LOGS"
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0}
export MAX_JOBS=${MAX_JOBS:-$(nproc)}
export TREDUCE_NVCC_CACHE=${TREDUCE_NVCC_CACHE:-$ROOT/build/nvcc-cache}

summary=()
failed=0
note() { summary+=("$1"); echo "== $1"; }
# The closing line of a pytest log: "N passed, N skipped in S s".
outcome() { grep -E '(passed|failed|error|no tests ran).* in [0-9.]+s' "$1" | tail -1 | tr -d '='; }

if [ $# -eq 0 ]; then
  echo "usage: $0 TORCH_RELEASE [TORCH_RELEASE ...]   (e.g. 2.15)" >&2
  exit 2
fi

for release in "$@"; do
  venv=$VENVS/torch-$release
  log=$LOGS/torch-$release
  start=$SECONDS
  if [ ! -x "$venv/bin/python" ]; then
    "$PYTHON" -m venv "$venv" || { note "torch $release: venv FAILED"; failed=1; continue; }
  fi
  # torch first, as a user has it; then requirements.txt, which must leave that torch in place.
  torch_version() { "$venv/bin/python" -c 'import torch; print(torch.__version__)'; }
  if ! "$venv/bin/python" -m pip install -q --disable-pip-version-check "torch==$release.*" > "$log.install.log" 2>&1 ||
     ! version=$(torch_version) ||
     ! "$venv/bin/python" -m pip install -q --disable-pip-version-check -r requirements.txt >> "$log.install.log" 2>&1; then
    note "torch $release: install FAILED (see $log.install.log)"; tail -5 "$log.install.log"; failed=1; continue
  fi
  if [ "$(torch_version)" != "$version" ]; then
    note "torch $version: pip install -r requirements.txt replaced it with $(torch_version)"; failed=1; continue
  fi

  # The wheel, built against the venv's torch in a per-torch build folder (setup.py).
  rm -rf "$log.dist"
  if ! "$venv/bin/python" -m pip wheel -q --no-build-isolation --no-deps . -w "$log.dist" > "$log.build.log" 2>&1; then
    note "torch $version: wheel build FAILED (see $log.build.log)"; tail -20 "$log.build.log"; failed=1; continue
  fi
  "$venv/bin/python" -m pip install -q --force-reinstall --no-deps "$log.dist"/torch_reduce-*.whl > "$log.install.log" 2>&1
  built=$((SECONDS - start))

  # PYTHONSAFEPATH: the source tree (which may hold a library built for another torch) stays off
  # sys.path, so the tests import the installed wheel; the first test run checks that it does.
  run_tests() {  # run_tests LOG [sh -c prefix]
    (cd "$ROOT" && PYTHONSAFEPATH=1 TREDUCE_EXPECT_INSTALLED=1 "$@" "$venv/bin/python" -m pytest tests -n auto --dist loadgroup -q -rfEs -p no:cacheprovider)
  }
  start=$SECONDS
  run_tests > "$log.pytest.log" 2>&1
  rc=$?
  note "torch $version: wheel built in ${built} s; tests $(outcome "$log.pytest.log") (rc $rc, $((SECONDS - start)) s)"
  [ $rc -eq 0 ] || { grep -E '^(FAILED|ERROR)' "$log.pytest.log" | head -20; failed=1; }

  if [ "${NO_TOOLKIT:-0}" = 1 ]; then
    # In a private mount namespace: the toolkit's folder behind an empty one, and every nvcc on
    # PATH (the toolkit's, or a wrapper script that calls it) behind /dev/null.
    toolkit=$(readlink -f "${CUDA_HOME:-/usr/local/cuda}")
    start=$SECONDS
    (cd "$ROOT" && unshare -m sh -c '
        mount -t tmpfs none "$1" || exit 1
        for f in $(which -a nvcc); do mount --bind /dev/null "$f" || exit 1; done
        if command -v nvcc; then echo "nvcc is still there"; exit 1; fi
        shift
        PYTHONSAFEPATH=1 TREDUCE_EXPECT_INSTALLED=1 "$@"' sh "$toolkit" \
        "$venv/bin/python" -m pytest $NO_TOOLKIT_TESTS -n auto --dist loadgroup -q -rfEs -p no:cacheprovider) > "$log.pytest_no_toolkit.log" 2>&1
    rc=$?
    note "torch $version, no CUDA toolkit: tests $(outcome "$log.pytest_no_toolkit.log") (rc $rc, $((SECONDS - start)) s)"
    [ $rc -eq 0 ] || { grep -E '^(FAILED|ERROR)' "$log.pytest_no_toolkit.log" | head -20; tail -5 "$log.pytest_no_toolkit.log"; failed=1; }
  fi
done

echo
printf '%s\n' "${summary[@]}" | tee "$LOGS/summary.txt"
exit $failed
