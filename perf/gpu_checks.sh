#!/usr/bin/env bash
# The measurements that need an NVIDIA GPU, in one run of under ten minutes on an H200 (docs/speed.md):
#   1. perf/speed.py --shapes real: CLIP from JPEG files beside the naive DataLoader and the device's own
#      decoding, letter multiple choice, short answers, DANCE ranking -> OUT/speed-<gpu>.md (speed-h200.md on
#      an H200), .json beside it;
#   2. perf/decode_tolerance.py --decode-on cuda: nvjpeg's pixels and top-1 answers against PIL's
#      -> OUT/decode-tolerance-cuda.md, .json beside it.
# Each step has its own time limit and log (OUT/<step>.log), so one that fails or runs out of time leaves the
# other's figures, and speed.py rewrites its table after each of its sections. perf/gpu_preflight.py checks
# first, in seconds, that the GPU is there and every module the steps import is installed.
#
#   perf/gpu_checks.sh perf/results     # OUT: where the tables and logs go
#   VLMGRID_SPEED_LIMIT_S=420 VLMGRID_TOLERANCE_LIMIT_S=120 perf/gpu_checks.sh OUT   # the limits (defaults)
#
# vlmgrid is imported from this checkout's src/, installed or not. Exit status: 0 where both steps ended well,
# 2 where the preflight refused, else the first failed step's (124 where its limit stopped it).
set -uo pipefail

out=${1:?usage: perf/gpu_checks.sh OUT_FOLDER}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
python=${PYTHON:-python3}
export PYTHONPATH="$repo/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
mkdir -p "$out" || exit 2

gpu=$("$python" "$repo/perf/gpu_preflight.py") || exit 2
echo "gpu_checks: on $gpu; tables and logs in $out" >&2

status=0
step() {  # step NAME LIMIT_S COMMAND...: run it under its time limit, its output in OUT/NAME.log and here
  local name=$1 limit=$2 rc
  shift 2
  echo "gpu_checks: $name (at most ${limit} s): $*" >&2
  timeout --signal=TERM --kill-after=30 "$limit" "$@" 2>&1 | tee "$out/$name.log"
  rc=${PIPESTATUS[0]}
  if ((rc != 0)); then
    echo "gpu_checks: $name ended with status $rc$( ((rc == 124)) && echo " (its ${limit} s limit)");" \
      "see $out/$name.log" >&2
    ((status == 0)) && status=$rc
  fi
}

step speed "${VLMGRID_SPEED_LIMIT_S:-420}" \
  "$python" "$repo/perf/speed.py" --shapes real --only clip,choice,generate,rank --out "$out/speed-$gpu.md"
step decode-tolerance "${VLMGRID_TOLERANCE_LIMIT_S:-120}" \
  "$python" "$repo/perf/decode_tolerance.py" --decode-on cuda --out "$out/decode-tolerance-cuda.md"
exit $status
