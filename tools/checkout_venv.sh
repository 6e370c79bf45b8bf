#!/usr/bin/env bash
# This checkout's own venv over a shared base: tools/checkout_venv.sh cpu|vision WHEEL_DIR
#
# build/venv-cpu (or build/venv-vision) is a venv without pip whose site-packages holds
#   - 00_base_venv.pth: `import site; site.addsitedir(<base site-packages>)`, so torch and the
#     common libraries come from the shared base venv (.venvs/base-cpu or base-vision), after this
#     venv's own site-packages (the name sorts first: the base is on sys.path before any other .pth
#     of this venv runs, ours imports wrapt from it);
#   - this package from its wheel (not editable), so its speculators_qwen_compat.pth is processed as
#     a real venv-wide .pth, as in a user's venv;
# and bin/ holds the base's console scripts (torchrun, pytest, ...) with this venv's python in the
# shebang. Two checkouts therefore test their own code at the same time and never write into the
# shared base venvs. tools/release_python.sh runs this venv's python. Rebuilt on every install (a
# second or two): a new wheel, a rebuilt base and a moved environment folder all take effect.
set -euo pipefail
base="$1"
wheel_dir="$2"
root="$(cd "$(dirname "$0")/.." && pwd)"
python="${PYTHON:-python3.11}"
venvs="${VENVS:-$root/.venvs}"
venvs="$(cd "$venvs" && pwd -P)"
base_dir="$venvs/base-$base"
dir="$root/build/venv-$base"
fail() { echo "speculators_qwen_compat: error: $*" >&2; exit 1; }
# shellcheck source=tools/env_lock.sh
. "$root/tools/env_lock.sh"
env_lock shared "base-$base"  # no build replaces the base while its pip and python run here

[ -f "$base_dir/.built" ] || fail "$base_dir is not built: run make base-$base"
shopt -s nullglob
wheels=("$wheel_dir"/speculators_qwen_compat-*.whl)
[ "${#wheels[@]}" = 1 ] || fail "expected one wheel in $wheel_dir, found ${#wheels[@]}: run make wheel"

mkdir -p "$root/build"
# One install at a time per checkout (make install and make test started together).
exec 9>"$dir.lock"
flock 9

rm -rf "$dir"
"$python" -m venv --without-pip "$dir"
site="$("$dir/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')"
base_site="$("$base_dir/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')"
echo "import site; site.addsitedir('$base_site')" > "$site/00_base_venv.pth"

# The base's console scripts, run by this venv's python (pip writes `#!<python>`, or for long paths
# a `#!/bin/sh` line followed by `'''exec' <python> ...`: the interpreter is within 3 lines).
for script in "$base_dir"/bin/*; do
  name="$(basename "$script")"
  [ -f "$script" ] && [ ! -L "$script" ] && [ ! -e "$dir/bin/$name" ] || continue
  case "$name" in activate*|Activate*) continue ;; esac
  head -n 3 "$script" | grep -q "$base_dir/bin/python" || continue
  sed "1,3s|$base_dir/bin/python[0-9.]*|$dir/bin/python|" "$script" > "$dir/bin/$name"
  chmod +x "$dir/bin/$name"
done

# The base's pip installs into this venv (--python), writing this venv's python into the package's
# own console script (speculators-qwen-compat).
"$base_dir/bin/python" -m pip -q --disable-pip-version-check --python "$dir/bin/python" install \
  --no-deps "${wheels[0]}"
"$dir/bin/python" -c "import speculators_qwen_compat, wrapt" \
  || fail "$dir cannot import this package and the base's wrapt: see the lines above"
echo "installed ${wheels[0]##*/} into $dir (over $base_dir)"
