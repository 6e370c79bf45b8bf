#!/usr/bin/env bash
# Run Python for one speculators release: tools/release_python.sh RELEASE [cpu|vision] ARGS...
# The release's folder (rel/RELEASE/site-packages under $VENVS, default the checkout's .venvs)
# goes first on PYTHONPATH of a shared base venv (base-cpu: torch 2.13.0; base-vision: torch
# 2.14.1 + torchvision). Child processes inherit PYTHONPATH, so datasets.map workers, torchrun
# ranks and prepare_data subprocesses see the same release.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venvs="${VENVS:-$root/.venvs}"
release="$1"; shift
base=cpu
if [ "${1:-}" = cpu ] || [ "${1:-}" = vision ]; then base="$1"; shift; fi
export PYTHONPATH="$venvs/rel/$release/site-packages${PYTHONPATH:+:$PYTHONPATH}"
# Console scripts (speculators, torchrun) as a user's venv has them: the base's bin first.
export PATH="$venvs/base-$base/bin:$venvs/rel/$release/site-packages/bin:$PATH"
exec "$venvs/base-$base/bin/python" "$@"
