#!/usr/bin/env bash
# Run Python for one speculators release: tools/release_python.sh RELEASE [cpu|vision] ARGS...
# The release's folder ($VENVS/rel/RELEASE, resolved: a store folder a rebuild never changes)
# goes first on PYTHONPATH of this checkout's venv build/venv-cpu or -vision (tools/environments.py
# install); children inherit PYTHONPATH and PATH (map workers, torchrun ranks, subprocesses).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venvs="${VENVS:-$root/.venvs}"
release="$1"; shift
base=cpu
if [ "${1:-}" = cpu ] || [ "${1:-}" = vision ]; then base="$1"; shift; fi
fail() { echo "speculators_qwen_compat: error: $*" >&2; exit 2; }
venv="$root/build/venv-$base"
install=install; [ "$base" = cpu ] || install="install-$base"
[ -x "$venv/bin/python" ] || fail "no $venv (this checkout's venv): run make $install"
[ -d "$venvs/rel/$release" ] \
  || fail "speculators $release is not built in $venvs/rel: run make release-$release"
site="$(cd "$venvs/rel/$release" && pwd -P)/site-packages"
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
# Console scripts (speculators, torchrun) as a user's venv has them: this venv's bin first (the
# base's scripts, run by the python beside them), then the release's (`#!/usr/bin/env python`).
export PATH="$venv/bin:$site/bin:$PATH"
# uv installs no bytecode: Python writes it on first import (docs/maintainers.md says why)
unset PYTHONDONTWRITEBYTECODE
exec "$venv/bin/python" "$@"
