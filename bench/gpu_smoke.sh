#!/usr/bin/env bash
# GPU smoke on a machine with an NVIDIA GPU (one is enough): TRL with HF generate vs vLLM colocate on the same
# locally built model (step time ratio), vLLM server mode, a 5-step verl GRPO run, and GPU telemetry; nothing is
# downloaded at run time (the model is random-initialised and saved locally). bench/gpu_smoke.py has the parts.
# Usage: bash bench/gpu_smoke.sh   (under 8 minutes once the venv is installed; VENV= reuses one; SMOKE_DIR= work dir)
# Last line: vllm_step_speedup=<x>
set -euo pipefail
cd "$(dirname "$0")/.."
nvidia-smi -L
export VENV=${VENV:-.venv-gpu}
# scripts/dev.sh install: on a GPU machine the gpu extra (vLLM and the CUDA torch it pins) and the verl extra
# (verl 0.9 with --no-deps); skipped when this pyproject is already installed in $VENV
bash scripts/dev.sh install
"$VENV/bin/python" - <<'PY'
import importlib.util, sys
missing = [m for m in ("vllm", "verl", "ray", "hydra") if importlib.util.find_spec(m) is None]
sys.exit(f"gpu_smoke: missing {', '.join(missing)} in the venv" if missing else 0)
PY
export GRPO_DATA_DIR=${GRPO_DATA_DIR:-$PWD/var/gpu-smoke-data}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 WANDB_MODE=disabled
# the smoke's own output goes to stderr and its log files; stdout carries the name=value lines, the last one last
# rejection sampling with vLLM (issue 17), before the smoke; its report goes to stderr
"$VENV/bin/python" -m pytest -q -m requires_gpu -ra tests/sampling/test_vllm_sampling.py >&2 || echo "gpu_smoke: the vLLM sampling test failed (above)" >&2
timeout "${SMOKE_TIMEOUT:-480}" "$VENV/bin/python" -m bench.gpu_smoke
