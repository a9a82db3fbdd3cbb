"""What a page costs a browser: Plotly's basic bundle (the trace types the pages draw), static files hashed, gzip
compressed and cached for a year once collectstatic has run (as the demo and the compose file run it), JSON answers
compressed, HTML not (BREACH). bench/page_weight.py measures the run page in chromium."""

import gzip
import json
import os
import subprocess
import sys

import pytest
from django.conf import settings

from tests.rollouts.inspect_data import ingest, make_run, metrics_event

pytestmark = pytest.mark.django_db


def test_the_chart_pages_load_plotlys_basic_bundle_deferred(owner_client, owner, dataset_version):
    run = make_run(owner, dataset_version)
    page = owner_client.get(f"/runs/{run.pk}/").content.decode()
    assert '<script defer src="/static/vendor/plotly-basic/plotly-basic.min.js">' in page
    assert "plotly.min.js" not in page
    bundle = settings.BASE_DIR / "static" / "vendor" / "plotly-basic" / "plotly-basic.min.js"
    assert bundle.stat().st_size < 1_300_000  # the full bundle is 4.8 MB


def test_json_is_gzipped_for_a_client_that_accepts_it_and_html_never(owner_client, owner, dataset_version):
    run = make_run(owner, dataset_version)
    ingest(run, *[metrics_event(step, reward=step / 100, loss=0.1) for step in range(1, 200)])
    series = f"/runs/{run.pk}/series.json?metric=reward&buckets=2000"
    answer = owner_client.get(series, HTTP_ACCEPT_ENCODING="gzip, br")
    assert answer["Content-Encoding"] == "gzip"
    assert json.loads(gzip.decompress(answer.content))["step"] == list(range(1, 200))
    assert "Content-Encoding" not in owner_client.get(f"/runs/{run.pk}/", HTTP_ACCEPT_ENCODING="gzip")
    plain = owner_client.get(series)
    assert "Content-Encoding" not in plain and json.loads(plain.content)["step"][-1] == 199


COLLECTED = """
import django, os
django.setup()
from django.core.management import call_command
from django.test import Client
from django.templatetags.static import static
call_command("collectstatic", interactive=False, verbosity=0)
url = static("vendor/plotly-basic/plotly-basic.min.js")
client = Client()  # a fresh handler: WhiteNoise indexes STATIC_ROOT as it starts
hashed = client.get(url, HTTP_ACCEPT_ENCODING="gzip")
plain = client.get("/static/vendor/plotly-basic/plotly-basic.min.js", HTTP_ACCEPT_ENCODING="gzip")
print(url, hashed.status_code, hashed.get("Content-Encoding"), hashed["Cache-Control"], plain["Cache-Control"], sep="|")
"""


def test_after_collectstatic_files_are_hashed_gzipped_and_cached_for_a_year(tmp_path):
    env = {**os.environ, "GRPO_DATA_DIR": str(tmp_path), "DJANGO_SETTINGS_MODULE": "grpo_web.settings"}
    env.pop("DATABASE_URL", None)
    out = subprocess.run(
        [sys.executable, "-c", COLLECTED], cwd=settings.BASE_DIR, env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-3000:]
    url, status, encoding, cache, plain_cache = out.stdout.strip().split("|")
    assert url.startswith("/static/vendor/plotly-basic/plotly-basic.min.") and url != (
        "/static/vendor/plotly-basic/plotly-basic.min.js"
    )
    assert (status, encoding) == ("200", "gzip")
    assert "max-age=315360000" in cache and "immutable" in cache
    assert "max-age=60" in plain_cache  # an unhashed name may change: a minute
