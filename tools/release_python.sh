#!/usr/bin/env bash
# Run Python for one speculators release: tools/release_python.sh RELEASE [cpu|vision] ARGS...
# The release's folder (rel/RELEASE/site-packages under $VENVS, default the checkout's .venvs)
# goes first on PYTHONPATH of this checkout's venv build/venv-cpu or build/venv-vision (this
# package's wheel over a shared base venv, tools/environments.py install). Child processes inherit
# PYTHONPATH and PATH, so datasets.map workers, torchrun ranks and prepare_data subprocesses see
# the same release and the same checkout's code. The folder is named by its resolved path (a
# store folder that never changes: a rebuild while this runs swaps only the link, tools/environments.py).
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
[ -d "$venvs/rel/$release" ] \
  || fail "speculators $release is not built in $venvs/rel: run make release-$release"
site="$(cd "$venvs/rel/$release" && pwd -P)/site-packages"
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
# Console scripts (speculators, torchrun) as a user's venv has them: this venv's bin first (the
# base's scripts, run by the python beside them), then the release's (`#!/usr/bin/env python`).
export PATH="$venv/bin:$site/bin:$PATH"
exec "$venv/bin/python" "$@"
