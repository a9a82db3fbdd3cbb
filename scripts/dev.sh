#!/usr/bin/env bash
# grpo-web on a laptop or a fresh machine.
#   bash scripts/dev.sh demo    install, then run the demo (SQLite, embedded Redis, tiny local model)
#   bash scripts/dev.sh test    install, then run the test suite (pytest args may follow)
#   bash scripts/dev.sh install only install
# Honours DATABASE_URL and REDIS_URL when set (PostgreSQL and an external Redis); see docs/configuration.md.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3.11}
command -v "$PYTHON" >/dev/null || PYTHON=python3
VENV=${VENV:-.venv}

install() {
  [ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
  local stamp="$VENV/.grpo-web-installed-$(cat pyproject.toml attach/pyproject.toml protocol/pyproject.toml | sha1sum | cut -c1-12)"
  if [ ! -f "$stamp" ]; then
    "$VENV/bin/pip" install -q --upgrade pip
    if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
      # vLLM brings the CUDA build of torch it is built for
      "$VENV/bin/pip" install -q -e ".[dev,gpu,verl]"
    else
      # CPU torch first, so the project's torch range is already met and no multi-GB CUDA build is fetched.
      "$VENV/bin/pip" install -q "${TORCH_SPEC:-torch==2.13.0}"
      "$VENV/bin/pip" install -q -e ".[dev,verl]"
    fi
    # verl (trainer: verl) without its pins (transformers<5.11): its light dependencies come with the verl extra
    "$VENV/bin/pip" install -q --no-deps "verl==0.9.1" "tensordict==0.10.0" "pyvers>=0.1,<0.2" "torchdata==0.11.0"
    "$VENV/bin/pip" install -q -e ./attach   # the attach client (grpo_web_attach): the training program captures with it
    # what the app and the training programs share (grpo_web_protocol): the run config, the event log, field lists
    "$VENV/bin/pip" install -q -e ./protocol
    touch "$stamp"
  fi
  # Trackio, for the test where TRL itself logs a run to it (report_to="trackio") for the Trackio importer, which
  # reads Trackio's SQLite file without it: trackio 0.43 pins pillow<13 and brings uvloop and httptools (which would
  # change uvicorn's server here), so it lives beside the environment, on PYTHONPATH for that test's script only
  local trackio="$VENV/trackio-lib"
  if [ ! -f "$trackio/.installed-0.43.0" ]; then
    rm -rf "$trackio"
    "$VENV/bin/pip" install -q --no-deps --target "$trackio" "trackio==0.43.0" "gradio_client==2.7.2" \
      "httpx==0.28.1" "httpcore==1.0.9" "websockets==17.4" "brotli==1.2.1" "python-multipart==0.0.34"
    touch "$trackio/.installed-0.43.0"
  fi
  # DeepSpeed, for the test where the attach client runs under accelerate launch --use_deepspeed (ZeRO-3 on its CPU
  # accelerator): beside the environment too, on PYTHONPATH (and its ninja on PATH) for that test's script only.
  # DeepSpeed needs the ninja build tool, whose PyPI package is a top-level module `ninja` that would overwrite
  # django-ninja's in the environment. A source distribution: it builds no op at install and brings no torch
  local deepspeed="$VENV/deepspeed-lib"
  if [ ! -f "$deepspeed/.installed-0.19.8" ]; then
    rm -rf "$deepspeed"
    "$VENV/bin/pip" install -q --no-deps --target "$deepspeed" "deepspeed==0.19.8" "hjson==3.1.0" "ninja==1.13.2" \
      "py-cpuinfo==9.0.0" "einops==0.8.2"
    touch "$deepspeed/.installed-0.19.8"
  fi
  # Oumi, for the tests that check the Oumi import against Oumi's own TrainingConfig and to_hf: oumi 0.9 pins
  # torch<2.13 and brings skypilot, mlflow and lm_eval, none of which reading a config needs, so it lives beside the
  # environment without them (tests append it to sys.path)
  local oumi="$VENV/oumi-lib"
  if [ ! -f "$oumi/.installed-0.9" ]; then
    rm -rf "$oumi"
    "$VENV/bin/pip" install -q --no-deps --target "$oumi" "oumi==0.9"
    touch "$oumi/.installed-0.9"
  fi
}

browser() {
  # Browser tests drive Debian's chromium through Playwright (Playwright's own browser download is not used).
  if [ ! -x /usr/bin/chromium ] && command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    (apt-get update -qq && apt-get install -y -qq chromium) >/dev/null || echo "could not install chromium" >&2
  fi
}

case "${1:-}" in
  install) install ;;
  demo) shift; install; exec "$VENV/bin/python" manage.py demo "$@" ;;
  test) shift; install; browser; exec "$VENV/bin/python" -m pytest "$@" ;;
  *) echo "usage: bash scripts/dev.sh demo|test|install" >&2; exit 2 ;;
esac
