#!/usr/bin/env bash
# Build (once) the test venv for one speculators release: .venvs/<release>.
# speculators itself goes in with --no-deps: its full dependency set pulls CUDA torch,
# torchvision and torchaudio; envs/<release>.txt lists what its preprocessing imports.
set -euo pipefail
release="$1"
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="$root/.venvs/$release"
reqs="${2:-$root/envs/$release.txt}"  # a release not in envs/ passes its own file
stamp="$venv/.built"
[ -f "$reqs" ] || { echo "no requirements file $reqs" >&2; exit 2; }
if [ -f "$stamp" ] && [ "$stamp" -nt "$reqs" ] && [ "$stamp" -nt "$root/envs/common.txt" ]; then
  exit 0
fi
rm -rf "$venv"
python3.11 -m venv "$venv"
pip="$venv/bin/python -m pip --disable-pip-version-check -q"
(cd "$(dirname "$reqs")" && $pip install -r "$reqs")
$pip install --no-deps "speculators==$release"
touch "$stamp"
echo "built $venv"
