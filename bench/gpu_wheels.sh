#!/usr/bin/env bash
# The wheels the Django-free training program (workers.training.train, GRPO with HF generate) needs on a lent GPU
# machine that its image lacks, downloaded here for that image's python (CPython 3.12, manylinux x86_64) into
# var/gpu-wheels (git-ignored, about 3 MB), to be carried there: the machine reaches no package index, and
# bench/gpu_smoke.sh installs them with --no-index (docs/bench.md).
#   bash bench/gpu_wheels.sh    (again after a version below changes; the folder is made afresh)
# The image already holds torch (CUDA), transformers, accelerate, peft, huggingface-hub, tokenizers, safetensors,
# numpy, pandas, pyarrow, pyyaml, jinja2, psutil, msgpack, xxhash, sympy, fsspec and the rest of what these need
# (/work/.library/device/KINDS.md); what is left is TRL, datasets and their pure-Python needs, the event log's JSON
# (orjson) and the built-in math rewards (math-verify). Versions are the ones this project's environment resolves.
# vLLM's GPU wheel (hundreds of MB) and Ray's are past what can be carried: the smoke skips those parts there.
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=${GPU_WHEELS:-var/gpu-wheels}
PYTHON=${PYTHON:-python3}
PYTHON_VERSION=${GPU_WHEELS_PYTHON_VERSION:-3.12}  # the image's; another only to try the offline path elsewhere
WHEELS=(
  "trl==1.16.0"
  "datasets==5.2.0"
  "dill==0.4.1"                     # datasets: <0.4.2
  "multiprocess==0.70.19"           # datasets: <0.70.20
  "fsspec==2026.9.0"                # datasets caps it (<=2026.9.0); the image's own version is not known here
  "orjson==3.13.0"                  # the event log (grpo_web_protocol.events)
  "math-verify==0.9.0"              # rewards.library's accuracy, length and cosine rewards
  "latex2sympy2_extended==1.11.0"   # math-verify pins it
  "antlr4-python3-runtime==4.13.2"  # latex2sympy2_extended takes 4.9.3 to 4.13.2; 4.9.3 has no wheel
)
rm -rf "$DEST"
mkdir -p "$DEST"
"$PYTHON" -m pip download -q --no-deps --only-binary=:all: --python-version "$PYTHON_VERSION" --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  --platform manylinux1_x86_64 -d "$DEST" "${WHEELS[@]}"
ls "$DEST"
du -sh "$DEST"
