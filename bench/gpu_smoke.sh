#!/usr/bin/env bash
# GPU smoke test for a machine with NVIDIA GPUs: installs the gpu extra (vLLM and the CUDA torch it pins) into its
# own venv and runs the GPU-marked tests (vLLM colocate, vLLM server mode, a 2-GPU accelerate run) on the tiny model.
# Usage: bash bench/gpu_smoke.sh        (about 10 minutes on a fresh machine, most of it the install)
set -euo pipefail
cd "$(dirname "$0")/.."
nvidia-smi -L
VENV=${VENV:-.venv-gpu}
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
"$VENV/bin/pip" install -q --upgrade pip
"$VENV/bin/pip" install -q -e ".[dev,gpu]"
export GRPO_DATA_DIR=${GRPO_DATA_DIR:-$PWD/var/gpu-smoke}
"$VENV/bin/python" -m pytest -m requires_gpu -ra tests/workers/test_gpu_paths.py tests/sampling/test_vllm_sampling.py
echo "gpu_smoke=ok"
