"""What a run page costs a browser: bytes transferred and time until it is interactive, in chromium, for a run with
2,000 stored steps, served by uvicorn as in production.

    python -m bench.page_weight [--steps 2000] [--repeats 3]   (from the repo root; needs /usr/bin/chromium)

Side by side in one run, on the same data: the static files as a checkout has them (before ``collectstatic``: served
by their own names, uncompressed, cached for 60 s) and as the demo and the compose file serve them (after it: hashed
names, gzip, cached for a year; ``grpo_web.staticstorage``). Each load is a cold one (a fresh browser context, so
nothing is cached). Transferred bytes are what chromium counts on the wire for every response (headers and encoded
bodies); the time is the navigation's ``loadEventEnd`` (every script run, the deferred Plotly and the page's modules
included), median over ``--repeats`` loads. The last line is ``run_page_kb=<x> run_page_ms=<y>`` for the served
configuration (goals: at most 1,200 KB and 1,000 ms on a quiet machine).
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make the project importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.registry import parse_args  # noqa: E402 (after the path is set)
from bench.webapp import django_on_a_data_folder, signed_in, web_server  # noqa: E402

VERBOSE = False
METRIC_NAMES = [
    "loss",
    "grad_norm",
    "learning_rate",
    "reward",
    "reward_std",
    "frac_reward_zero_std",
    "kl",
    "entropy",
    "completions/mean_length",
    "completions/min_length",
    "completions/max_length",
    "completions/clipped_ratio",
    "clip_ratio/region_mean",
    "rewards/accuracy/mean",
    "rewards/accuracy/std",
    "rewards/format/mean",
    "rewards/format/std",
    "num_tokens",
    "epoch",
    "step_time",
]


def make_run(steps: int) -> tuple[int, str]:
    """A finished run with ``steps`` steps of TRL's usual metrics; its id and a signed-in Cookie header."""
    from django.utils import timezone

    from runs.datasets.services import dataset_import
    from runs.models import Run, StepMetric

    user, cookie = signed_in("bench")
    rows = b"".join(b'{"prompt": "What is %d + %d?", "answer": "%d"}\n' % (i, i, 2 * i) for i in range(64))
    version = dataset_import(owner=user, name="sums", stream=io.BytesIO(rows), source_name="sums.jsonl")
    run = Run.objects.create(
        owner=user,
        name="heavy",
        model="tiny",
        dataset_version=version,
        rewards=[{"name": "accuracy", "weight": 1.0, "builtin": "accuracy", "version_id": None}],
        config={"num_generations": 8, "learning_rate": 1e-6, "beta": 0.0, "max_steps": steps},
        total_steps=steps,
        step=steps,
        status=Run.Status.COMPLETED,
    )
    now = timezone.now()
    StepMetric.objects.bulk_create(
        [
            StepMetric(
                run=run,
                step=s,
                metrics={name: (s * 0.001 + k) % 3.0 for k, name in enumerate(METRIC_NAMES)},
                logged_at=now,
            )
            for s in range(1, steps + 1)
        ],
        batch_size=500,
    )
    return run.pk, cookie


def load(browser, port: int, run_id: int, cookie: str) -> tuple[float, float]:
    """One cold load of the run page: (KB transferred, ms until the load event ended)."""
    name, _, value = cookie.partition(";")[0].partition("=")
    context = browser.new_context()
    context.add_cookies([{"name": name, "value": value, "domain": "127.0.0.1", "path": "/"}])
    page = context.new_page()
    finished = []
    page.on("requestfinished", lambda request: finished.append(request))
    response = page.goto(f"http://127.0.0.1:{port}/runs/{run_id}/", wait_until="load")
    assert response is not None and response.status == 200, response and response.status
    page.wait_for_load_state("networkidle")
    ms = page.evaluate("performance.getEntriesByType('navigation')[0].loadEventEnd")
    sizes = [request.sizes() for request in finished]
    if VERBOSE:
        for request, size in sorted(zip(finished, sizes), key=lambda p: -p[1]["responseBodySize"])[:8]:
            print(f"  {size['responseBodySize'] / 1024:8.1f} KB  {request.url[-70:]}")
    context.close()
    return sum(s["responseHeadersSize"] + max(0, s["responseBodySize"]) for s in sizes) / 1024, ms


def measure(env: dict, run_id: int, cookie: str, repeats: int) -> tuple[float, float]:
    """Median KB and ms over ``repeats`` cold loads, from a fresh server (it reads the static manifest at start)."""
    from playwright.sync_api import sync_playwright  # its event loop must not be running while Django queries

    with web_server(env) as (_, port), sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        try:
            load(browser, port, run_id, cookie)  # the server's first answer warms its caches, not the browser's
            kb, ms = zip(*(load(browser, port, run_id, cookie) for _ in range(repeats)))
        finally:
            browser.close()
    return statistics.median(kb), statistics.median(ms)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--verbose", action="store_true", help="the largest responses of each load")
    args = parse_args(parser, argv, steps=50, repeats=1)
    global VERBOSE
    VERBOSE = args.verbose

    with django_on_a_data_folder("grpo-page-weight-") as env:
        from django.core.management import call_command

        run_id, cookie = make_run(args.steps)
        raw_kb, raw_ms = measure(env, run_id, cookie, args.repeats)
        print(f"as checked out (no collectstatic): {raw_kb:.0f} KB, {raw_ms:.0f} ms")
        call_command("collectstatic", interactive=False, verbosity=0)
        kb, ms = measure(env, run_id, cookie, args.repeats)
        print(f"served (collectstatic: hashed, gzip): {kb:.0f} KB, {ms:.0f} ms; {args.steps} steps stored")
    print(f"run_page_kb={kb:.0f} run_page_ms={ms:.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
