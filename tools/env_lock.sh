# Locks on the shared test environments; sourced (needs $venvs, the environments' real folder) by
# tools/build_venv.sh, tools/checkout_venv.sh and tools/release_python.sh.
#
# One lock file per environment, $venvs/.locks/NAME.lock (NAME: tools, base-cpu, base-vision,
# rel-RELEASE, vllm, vllm-torchvision, vocab), taken with flock(1) from util-linux. A builder
# holds it exclusive while it replaces the environment (tools/build_venv.sh: only when the stamp
# says it must, so a current environment never waits); a run that reads the environment holds it
# shared for as long as it runs. The lock belongs to an open file descriptor, inherited by the
# programs exec'd and started from here (pip, python, pytest, its workers) and released when the
# last of them exits, however it exits (a killed run leaves no stale lock).

env_lock() {  # env_lock shared|exclusive NAME: take the lock; its descriptor number in $env_lock_fd
  local mode="$1" name="$2" fd flag
  [ "$mode" = shared ] && flag=-s || flag=-x
  mkdir -p "$venvs/.locks"
  exec {fd}>>"$venvs/.locks/$name.lock"
  if ! flock -n "$flag" "$fd"; then
    if [ "$mode" = shared ]; then
      echo "waiting for another run's build of $name ($venvs/.locks/$name.lock)" >&2
    else
      echo "waiting for $name: another run builds or uses it ($venvs/.locks/$name.lock)" >&2
    fi
    flock "$flag" "$fd"
  fi
  env_lock_fd="$fd"
}

env_unlock() {  # env_unlock FD: give a lock back before the process ends
  local fd="$1"
  exec {fd}>&-
}
