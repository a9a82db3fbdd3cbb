"""The web process stays light (docs/architecture.md, rule 7): loading the app, every URL and API module included,
imports none of the ML stack. It reads the training program's protocol and the attach client's capture and token
schema, which load torch, transformers and TRL only where a training process calls them."""

import subprocess
import sys

from tests.conftest import BASE_DIR

HEAVY = ("torch", "transformers", "trl", "accelerate", "peft", "vllm", "ray", "verl")


def test_loading_the_app_imports_no_ml_library():
    code = (
        "import os, sys, django\n"
        "os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'grpo_web.settings')\n"
        "django.setup()\n"
        "from django.urls import get_resolver\n"
        "get_resolver().url_patterns\n"  # every urls module, and the API's routers with it
        "import grpo_web.asgi, grpo_web.celery\n"
        f"print(' '.join(sorted(m for m in {HEAVY!r} if m in sys.modules)))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=BASE_DIR, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "", f"the web process imported: {done.stdout.strip()}"
