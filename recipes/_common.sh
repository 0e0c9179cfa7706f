# Shared by the recipes: `run` executes a command, or in validation mode only checks its flags with --dry_run.
# LAUNCHER="torchrun --nproc_per_node 8" runs the train.py and sft.py steps on several GPUs (FSDP2 shards the
# weights, gradients and optimizer state over them) and the eval.py steps too (one vLLM engine per GPU, the problems
# sharded over them); data.py stays single-process.
# Every recipe first validates ALL of its commands (a typo fails in seconds, not after an hour), then runs them.
# The validation also checks each step's context length against its model's config when that config can be read
# offline (a local directory or the Hugging Face cache), and says when it cannot (preflight.py).
PYTHON=${PYTHON:-python}
cd "$(dirname "${BASH_SOURCE[0]}")/.."
VALIDATE=1
run() {
  if [ "$VALIDATE" = 1 ]; then
    out=$("$PYTHON" "$@" --dry_run) || { echo "recipe: invalid command: $PYTHON $*" >&2; exit 1; }
    grep -E "^([a-z]+\.py: context |data: )" <<< "$out" || true    # context checks; hub data not checked offline
  else
    if { [ "$1" = train.py ] || [ "$1" = sft.py ] || [ "$1" = eval.py ]; } && [ -n "${LAUNCHER:-}" ]; then
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
