#!/usr/bin/env bash
# GPU smoke on a machine with an NVIDIA GPU (one is enough): TRL with HF generate vs vLLM colocate on the same
# locally built model (step time ratio), vLLM server mode, a 5-step verl GRPO run, and GPU telemetry; nothing is
# downloaded at run time (the model is random-initialised and saved locally). bench/gpu_smoke.py has the parts.
# Usage: bash bench/gpu_smoke.sh [--quick]   (under 8 minutes once the venv is installed; VENV= reuses one;
# SMOKE_DIR= work dir; --quick: the same parts on 3 steps a run)
# Last line: vllm_step_speedup=<x>, or hf_generate_step_s=<x> offline.
#
# Two modes. Full (a machine that reaches a package index): scripts/dev.sh installs the project with its gpu and
# verl extras in $VENV, and every part runs. Offline (a lent machine that reaches no index, whose python3 already
# holds a CUDA torch): the wheels bench/gpu_wheels.sh downloaded beforehand and carried in var/gpu-wheels are
# installed into a folder put on that python's path, and only TRL with HF generate and the telemetry run; vLLM,
# server mode and verl are reported skipped (their GPU wheels are past what can be carried). The rule: offline when
# var/gpu-wheels holds wheels, full otherwise; GPU_SMOKE_OFFLINE=1 or =0 chooses either way.
set -euo pipefail
cd "$(dirname "$0")/.."
nvidia-smi -L
export GRPO_DATA_DIR=${GRPO_DATA_DIR:-$PWD/var/gpu-smoke-data}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 WANDB_MODE=disabled
WHEELS=${GPU_WHEELS:-var/gpu-wheels}
if [ -z "${GPU_SMOKE_OFFLINE:-}" ]; then
  GPU_SMOKE_OFFLINE=0
  compgen -G "$WHEELS/*.whl" >/dev/null && GPU_SMOKE_OFFLINE=1
fi

if [ "$GPU_SMOKE_OFFLINE" = 1 ]; then
  PY=${GPU_SMOKE_PYTHON:-python3}
  SITE=$(realpath -m "${GPU_SMOKE_SITE:-var/gpu-smoke-site}")
  echo "gpu_smoke: offline, $PY with the wheels in $WHEELS (installed in $SITE); no vLLM, verl or Ray" >&2
  # --target, not a venv: the image's python3 is itself a venv, and a venv made from it with
  # --system-site-packages would see its base python's packages, not its CUDA torch. --no-deps: the rest is the
  # image's, checked below against what the wheels ask for
  rm -rf "$SITE"
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$SITE" "$WHEELS"/*.whl
  # the checkout and the attach client (grpo_web_attach, which the training program captures with) from source
  export PYTHONPATH="$PWD:$PWD/attach:$PWD/protocol:$SITE${PYTHONPATH:+:$PYTHONPATH}"
  "$PY" - "$WHEELS" <<'PY'
import sys
from pathlib import Path

import torch

from bench.gpu_smoke import unmet_requirements

problems = unmet_requirements(Path(sys.argv[1]))
if not torch.cuda.is_available():
    problems.append(f"torch {torch.__version__} here sees no CUDA GPU")
sys.exit("gpu_smoke: " + "; ".join(problems) if problems else 0)
PY
  echo "gpu_smoke: the vLLM sampling test (tests/sampling, needs vLLM and Django) is not run offline" >&2
  exec timeout "${SMOKE_TIMEOUT:-480}" "$PY" -m bench.gpu_smoke "$@"
fi

export VENV=${VENV:-.venv-gpu}
# scripts/dev.sh install: on a GPU machine the gpu extra (vLLM and the CUDA torch it pins) and the verl extra
# (verl 0.9 with --no-deps); skipped when this pyproject is already installed in $VENV
bash scripts/dev.sh install
"$VENV/bin/python" - <<'PY'
import importlib.util, sys
missing = [m for m in ("vllm", "verl", "ray", "hydra") if importlib.util.find_spec(m) is None]
sys.exit(f"gpu_smoke: missing {', '.join(missing)} in the venv" if missing else 0)
PY
# the smoke's own output goes to stderr and its log files; stdout carries the name=value lines, the last one last
# rejection sampling with vLLM (issue 17), before the smoke; its report goes to stderr
"$VENV/bin/python" -m pytest -q -m requires_gpu -ra tests/sampling/test_vllm_sampling.py >&2 || echo "gpu_smoke: the vLLM sampling test failed (above)" >&2
timeout "${SMOKE_TIMEOUT:-480}" "$VENV/bin/python" -m bench.gpu_smoke "$@"
