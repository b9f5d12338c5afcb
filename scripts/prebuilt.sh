#!/usr/bin/env bash
# The library built here, on a machine without a GPU, for a GPU machine to run as it is: against
# the torch release that machine has (in the venv scripts/check_torch.sh makes for it), for its
# GPU architecture, from the working tree (tracked files, uncommitted changes too; `git add` new
# ones), stripped of debug sections and xz-compressed beside its build record; without the CUDA
# line tables unless TREDUCE_LINEINFO=1 (setup.py), which compress poorly: with them the library
# for sm_90 reached 67 MB compressed (an instantiation unit 3.3 MB, without them 0.5). A GPU
# machine then spends no time building (about 6 minutes of 16 cores there); here the build is
# incremental, in a tree of its own under build/prebuilt kept between runs: a change to
# kernels/dims.cuh recompiles the 18 CUDA units that include it, about 20 minutes on 2 cores.
#
#   bash scripts/prebuilt.sh 2.11 9.0 DIR        # DIR/_C.abi3.so.xz, DIR/_C.build.json
#   PREBUILT=DIR bash scripts/gpu_check.sh        # on the GPU machine, in a checkout of the same tree
set -euo pipefail
if [ $# -ne 3 ]; then
  echo "usage: $0 TORCH_RELEASE CUDA_ARCHS OUT_DIR   (e.g. 2.11 9.0 prebuilt)" >&2
  exit 2
fi
release=$1 archs=$2 out=$3
cd "$(dirname "$0")/.."
ROOT=$PWD
venv=${VENVS:-$HOME/.cache/torch_reduce/venvs}/torch-$release
if [ ! -x "$venv/bin/python" ]; then
  echo "no venv for torch $release: run scripts/check_torch.sh $release once first" >&2
  exit 2
fi
tree=${PREBUILT_TREE:-$ROOT/build/prebuilt/torch-$release-sm${archs//./}}
mkdir -p "$tree" "$out"
# Only the files whose contents changed are copied, stamped with the time of the copy: the tree's
# own build folder then rebuilds what changed only. (Copied with the working tree's mtimes, a
# header edited during a build was older than the objects that build made from its previous
# contents, and the next build kept them: a library of C++ objects with the old Layout3 and CUDA
# objects with the new, which crashed on import.) Its CUDA objects are removed first: ninja keeps
# no header dependencies for them (a change to a header alone left stale kernels in the library),
# and the object cache (scripts/nvcc_cache.py) gives back at once every one whose sources and
# headers are unchanged.
git ls-files -z | while IFS= read -r -d '' f; do
  if [ -f "$f" ] && ! cmp -s "$f" "$tree/$f"; then
    mkdir -p "$tree/$(dirname "$f")" && cp "$f" "$tree/$f"
  fi
done
find "$tree/build" \( -path "*csrc/core/cuda/*.o" -o -path "*build/units/*.o" \) -delete 2>/dev/null || true
(cd "$tree" && TORCH_CUDA_ARCH_LIST=$archs MAX_JOBS=${MAX_JOBS:-$(nproc)} TREDUCE_LINEINFO=${TREDUCE_LINEINFO:-0} \
  TREDUCE_NVCC_CACHE=${TREDUCE_NVCC_CACHE:-$ROOT/build/nvcc-cache} \
  "$venv/bin/python" setup.py build_ext --inplace > build.log 2>&1) || { tail -30 "$tree/build.log"; exit 1; }
strip --strip-debug -o "$tree/stripped.so" "$tree/torch_reduce/_C.abi3.so"
xz -6 -T0 -c "$tree/stripped.so" > "$out/_C.abi3.so.xz"
cp "$tree/torch_reduce/_C.build.json" "$out/"
ls -l "$out"
