#!/usr/bin/env bash
# Run Python for one speculators release: tools/release_python.sh RELEASE [cpu|vision] ARGS...
# The release's folder (rel/RELEASE/site-packages under $VENVS, default the checkout's .venvs)
# goes first on PYTHONPATH of this checkout's venv build/venv-cpu or build/venv-vision
# (tools/checkout_venv.sh, made by `make install` / `make install-vision` and by `make test`: this
# package's wheel over a shared base venv, base-cpu: torch 2.13.0; base-vision: torch 2.14.1 +
# torchvision). Child processes inherit PYTHONPATH and PATH, so datasets.map workers, torchrun
# ranks and prepare_data subprocesses see the same release and the same checkout's code.
#
# The run holds the locks of what it reads shared until it ends (tools/env_lock.sh): the base,
# the release, and the environments named in $USES_ENVS (e.g. "vllm vllm-torchvision vocab" for
# runs that start vLLM or read the vocabulary), so no build replaces them under it; it waits for
# a build of them in progress.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venvs="${VENVS:-$root/.venvs}"
release="$1"; shift
base=cpu
if [ "${1:-}" = cpu ] || [ "${1:-}" = vision ]; then base="$1"; shift; fi
fail() { echo "speculators_qwen_compat: error: $*" >&2; exit 2; }
venv="$root/build/venv-$base"
if [ ! -x "$venv/bin/python" ]; then
  install=install; [ "$base" = cpu ] || install="install-$base"
  fail "no $venv (this checkout's venv): run make $install"
fi
[ -d "$venvs" ] || fail "no environments folder $venvs: run make install release-$release"
venvs="$(cd "$venvs" && pwd -P)"
# shellcheck source=tools/env_lock.sh
. "$root/tools/env_lock.sh"
for name in "base-$base" "rel-$release" ${USES_ENVS:-}; do env_lock shared "$name"; done
[ -f "$venvs/base-$base/.built" ] || fail "$venvs/base-$base is not built: run make install"
[ -f "$venvs/rel/$release/.built" ] \
  || fail "speculators $release is not built in $venvs/rel: run make release-$release"
export PYTHONPATH="$venvs/rel/$release/site-packages${PYTHONPATH:+:$PYTHONPATH}"
# Console scripts (speculators, torchrun) as a user's venv has them: this venv's bin first (the
# base's scripts with this venv's python), then the release's (`#!/usr/bin/env python`: this venv).
export PATH="$venv/bin:$venvs/rel/$release/site-packages/bin:$PATH"
exec "$venv/bin/python" "$@"
