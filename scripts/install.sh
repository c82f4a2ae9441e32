#!/usr/bin/env bash
# Install vlmgrid (editable) into the active Python environment, with the PyTorch build the machine can use.
#
#   scripts/install.sh          # the project
#   scripts/install.sh test     # with extras of pyproject.toml (comma-separated: test,slurm)
#
# On a machine with a working NVIDIA GPU (`nvidia-smi -L` lists one), pip installs PyPI's default PyTorch, the
# CUDA build on Linux. Elsewhere it first installs torch and torchvision from PyTorch's CPU-only index, then
# the project, whose torch and torchvision requirements are then met, so no CUDA library is downloaded.
# VLMGRID_TORCH=cpu or VLMGRID_TORCH=default overrides the detection; VLMGRID_TORCH_CPU_INDEX the CPU index.
# Where the build was not chosen by VLMGRID_TORCH and the CPU index cannot be reached (asked once, by `pip
# index`) or its install fails, the default index serves.
set -euo pipefail

case ${BASH_SOURCE[0]} in
  */*) cd "${BASH_SOURCE[0]%/*}/.." ;;
  *) cd .. ;;  # run as `bash install.sh` from scripts/
esac
cpu_index=${VLMGRID_TORCH_CPU_INDEX:-https://download.pytorch.org/whl/cpu}
target=.${1:+[$1]}

build=${VLMGRID_TORCH:-}
if [[ -z $build ]]; then
  if nvidia-smi -L >/dev/null 2>&1; then build=default; else build=cpu; fi
fi

case $build in
  default)
    echo "install.sh: NVIDIA GPU found (or VLMGRID_TORCH=default): PyTorch from the default index" >&2
    ;;
  cpu)
    # torch's and torchvision's requirements as pyproject.toml states them, e.g. "torch>=2.1"
    requirements=()
    while IFS= read -r line; do
      if [[ $line =~ ^[[:space:]]*\"((torch|torchvision)[^a-z_\"][^\"]*)\" ]]; then
        requirements+=("${BASH_REMATCH[1]}")
      fi
    done < pyproject.toml
    if (( ${#requirements[@]} != 2 )); then
      echo "install.sh: pyproject.toml's dependencies must name torch and torchvision, one a line" >&2
      exit 2
    fi
    echo "install.sh: no NVIDIA GPU (or VLMGRID_TORCH=cpu): PyTorch's CPU build from $cpu_index" >&2
    # Where the build was detected, not asked for, the index is asked once first: one that cannot be reached
    # would cost five retries for every package pip looks up there, torch's dependencies included (minutes).
    # Only the CPU index is asked: no pip configuration file, and no other index or links from the environment.
    if [[ -z ${VLMGRID_TORCH:-} ]] && ! (
      unset PIP_EXTRA_INDEX_URL PIP_FIND_LINKS PIP_NO_INDEX
      PIP_CONFIG_FILE=/dev/null pip index versions torch --index-url "$cpu_index" --retries 1 --timeout 20
    ) >/dev/null 2>&1; then
      echo "install.sh: PyTorch's CPU index $cpu_index cannot be reached (pip index versions torch failed);" \
        "installing PyTorch from the default index instead, on Linux the CUDA build of several GB" \
        "(VLMGRID_TORCH=cpu installs from the CPU index without asking first)" >&2
    # An extra index, not a replacement: torch's own dependencies still come from the usual index, and a CPU
    # build (2.x.y+cpu) sorts above the same release's default build, so it is the one chosen where it is found.
    elif ! pip install --extra-index-url "$cpu_index" "${requirements[@]}"; then
      # A machine that reaches only PyPI (a mirror, a proxy) still gets a working install, the larger one;
      # asked for by name, the CPU build is not replaced.
      if [[ -n ${VLMGRID_TORCH:-} ]]; then exit 1; fi
      echo "install.sh: PyTorch's CPU build could not be installed from $cpu_index (see pip's message above);" \
        "installing PyTorch from the default index instead, on Linux the CUDA build of several GB" >&2
    fi
    ;;
  *)
    echo "install.sh: VLMGRID_TORCH is \"$build\"; set it to cpu or default, or unset it to detect a GPU" >&2
    exit 2
    ;;
esac
pip install -e "$target"
