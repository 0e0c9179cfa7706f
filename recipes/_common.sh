# Shared by the recipes: `run` executes a command, or in validation mode only checks its flags with --dry_run.
# LAUNCHER="torchrun --nproc_per_node 8" runs the train.py steps on several GPUs (FSDP2); eval stays single-process.
# Every recipe first validates ALL of its commands (a typo fails in seconds, not after an hour), then runs them.
PYTHON=${PYTHON:-python}
cd "$(dirname "${BASH_SOURCE[0]}")/.."
VALIDATE=1
run() {
  if [ "$VALIDATE" = 1 ]; then
    "$PYTHON" "$@" --dry_run > /dev/null || { echo "recipe: invalid command: $PYTHON $*" >&2; exit 1; }
  else
    if [ "$1" = train.py ] && [ -n "${LAUNCHER:-}" ]; then
      echo "+ $LAUNCHER $*"
      $LAUNCHER "$@"
    else
      echo "+ $PYTHON $*"
      "$PYTHON" "$@"
    fi
  fi
}
# usage at the end of a recipe: validate_then_run stages "$@"  (stages: the name of the function holding the run calls)
validate_then_run() {
  local stages=$1; shift
  VALIDATE=1; "$stages"
  echo "recipe: every command validated"
  if [ "${1:-}" = "--dry_run" ]; then exit 0; fi
  VALIDATE=0; "$stages"
}
