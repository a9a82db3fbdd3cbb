"""In chromium, every page a user sees: no console error, no failed request and no accessibility violation of
axe-core's "serious" or "critical" impact (tests/browser_checks.py). The run page is checked once per tab.

The pages are the URL configuration's: each URL name is either a page here or listed, with why, as not a page; a new
URL fails ``test_every_url_is_a_checked_page_or_says_why_not`` until it is one or the other."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from rewards.models import RewardFunction
from rewards.services import reward_save
from runs.models import (
    DatasetImport,
    EvalSample,
    Evaluation,
    RejectionJob,
    Replay,
    ResourceSample,
    Run,
    StepMetric,
    Worker,
)
from runs.recipes.services import recipe_from_template
from runs.review.services import review_create
from runs.rollouts.labels import labels_create
from tests.browser_checks import check, watch
from tests.conftest import log_in
from tests.grpo_web.test_fuzz_every_endpoint import url_patterns
from tests.rollouts.inspect_data import ingest, make_run, metrics_event, rollouts_event

pytestmark = [pytest.mark.django_db(transaction=True)]


def import_yaml(page, world):
    """The run form filled from a TRL config: the page run_import answers a POST with."""
    page.wait_for_load_state("networkidle")  # what the page fetches has arrived: leaving cancels nothing
    page.click("details.import > summary")
    page.fill(
        "#import-form textarea[name=yaml]",
        f"model_name_or_path: tiny\ndataset_name: {world['dataset_name']}\n"
        "reward_funcs: [digit_ratio]\nlearning_rate: 0.01\n",
    )
    page.click("#import-form button[type=submit]")
    page.wait_for_url("**/runs/import/")


def post_cancel_without_confirming(page, world):
    """The page that asks before cancelling, for a browser without JavaScript (form.submit() skips the page's own
    confirm dialog, as a browser without scripts would)."""
    page.wait_for_load_state("networkidle")  # what the page fetches has arrived: leaving cancels nothing
    page.evaluate("document.getElementById('cancel-form').submit()")
    page.wait_for_url("**/cancel/")


# URL name -> (address, with the world's objects; what to wait for before checking, when the page draws late[; what
# to do there first, for a page reached by a POST])
PAGES = {
    "login": ("/login/", "#id_username"),
    "dashboard": ("/", "text=Datasets"),
    "run_new": ("/runs/new/", "#id_name"),
    "run_import_files": ("/runs/import-files/", "#import-files-form"),
    "run_import": ("/runs/new/", "#run-form", import_yaml),
    "run_cancel": ("/runs/{running}/", "#cancel-confirmed", post_cancel_without_confirming),
    **{
        f"run_detail#{tab}": (f"/runs/{{run}}/#{tab}", ready)
        for tab, ready in [
            ("overview", "#health li[data-key]"),
            ("metrics", "#chart-reward .main-svg"),
            ("rollouts", ".group-card"),
            ("evaluations", "#evaluation-table tbody tr"),
            ("resources", "#chart-step-split .main-svg"),
            ("log", "#log-tail"),
        ]
    },
    # the other states the run page shows: training (the Cancel button, the running badge), and failed with an error
    # and a faulted reward function
    "run_detail#overview running": ("/runs/{running}/#overview", "#cancel-button"),
    "run_detail#overview failed": ("/runs/{failed}/#overview", "#reward-faults"),
    "run_clone": ("/runs/{run}/clone/", "#id_name"),
    "run_diff": ("/runs/{run}/diff/{other}/", "#config-diff"),
    "run_rollouts": ("/runs/{run}/rollouts/", "article.rollout"),
    "run_reflection": ("/runs/{run}/reflection/", "#chart-share .main-svg"),
    "run_labels": ("/runs/{run}/labels/", "#chart-labels .main-svg"),
    "run_review": ("/runs/{run}/reviews/{review}/", "#item article.rollout"),
    "run_prompts": ("/runs/{run}/prompts/", "#prompts"),
    "search": ("/search/?q=the", "#search-count"),
    "run_prompt": ("/runs/{run}/prompts/{key}/", "#chart-prompt .main-svg"),
    "evaluation_detail": ("/runs/{run}/evaluations/{evaluation}/", "#eval-prompts .transcript"),
    "run_compare": ("/runs/compare/?runs={run},{other}", "#compare-chart .main-svg"),
    "dataset_upload": ("/datasets/upload/", "#id_name"),
    "dataset_upload_version": ("/datasets/{dataset}/upload/", "#id_file"),
    "dataset_detail": ("/datasets/{dataset}/", "#preview"),
    "dataset_version": ("/datasets/{dataset}/versions/{number}/", "#preview"),
    "dataset_mapping": ("/datasets/{dataset}/versions/{number}/mapping/", "form"),
    "dataset_import_detail": ("/datasets/imports/{job}/", "main"),
    "reward_new": ("/rewards/new/", "#id_name"),
    "reward_detail": ("/rewards/{reward}/", "[data-testid=code-editor] .cm-content"),
    "reward_version": ("/rewards/{reward}/versions/1/", "main"),
    "reward_diff": ("/rewards/{reward}/diff/?a=1&b=2", "main"),
    "workers": ("/workers/", "text=gpu@host"),
    "tokens": ("/settings/tokens/", "main"),
    "teams": ("/settings/teams/", "main"),
    "openapi-view": ("/api/docs", ".swagger-ui .info"),  # django-ninja's Swagger UI, served from its own files
    "run_detectors": ("/runs/{run}/detectors/", "form"),
    "run_replay": ("/runs/{run}/replays/{replay}/", "main"),
    "rejection_jobs": ("/sampling/", "main"),
    "rejection_job_new": ("/sampling/new/", "form"),
    "rejection_job_detail": ("/sampling/{rejection_job}/", "main"),
    "recipes": ("/recipes/", "main"),
    "recipe_detail": ("/recipes/{recipe}/", "#recipe-status"),
    "recipe_clone": ("/recipes/{recipe}/clone/", "#id_yaml"),
    "models": ("/models/", "main"),
    # the delete confirmations: what goes (a finished run), and what is refused (a dataset runs train on, a reward
    # function a rejection-sampling job pins)
    "run_delete": ("/runs/{run}/delete/", "#delete-form"),
    "dataset_delete": ("/datasets/{dataset}/delete/", "#delete-refusals"),
    "reward_delete": ("/rewards/{reward}/delete/", "#delete-refusals"),
    "manual": ("/docs/", "#manual-page"),
    "manual_page": ("/docs/runs/", "#manual-page"),
    "code_tests_bench": ("/datasets/code-tests/?version={code_version}&row=1", "[data-testid=code-editor] .cm-content"),
}
NOT_PAGES = {
    # data for the pages' scripts (checked through the pages that read them: a failed one is a finding there)
    **dict.fromkeys(
        [
            "run_status_json",
            "run_metrics_json",
            "run_series_json",
            "run_step_json",
            "run_step_completion_json",
            "run_progress_json",
            "run_health_json",
            "run_evaluations_json",
            "run_telemetry_json",
            "run_rollouts_json",
            "run_reflection_json",
            "run_prompts_json",
            "run_prompt_json",
            "run_compare_metrics",
            "run_compare_prompts",
            "run_compare_transcripts",
            "dataset_import_json",
            "reward_lint",
            "reward_test_result",
            "run_zero_variance_json",
            "run_replay_json",
            "rejection_job_status",
            "run_step_tokens_json",
            "recipe_pipeline_json",
            "code_tests_bench_result",
        ],
        "JSON for a page's script",
    ),
    **dict.fromkeys(["run_events", "run_compare_events"], "a server-sent event stream"),
    **dict.fromkeys(
        [
            "run_yaml",
            "run_rollouts_jsonl",
            "run_rollouts_parquet",
            "evaluation_jsonl",
            "run_replay_jsonl",
            "recipe_yaml",
            "model_download",
            "model_adapter_download",
        ],
        "a download",
    ),
    "manual_file": "a picture the manual's pages show (docs/*.png)",
    **dict.fromkeys(["rollout_link", "group_link"], "a stable address: a redirect to the run page (checked there)"),
    **dict.fromkeys(
        [
            "token_revoke",
            "team_member_add",
            "team_leave",
            "dataset_share",
            "run_share",
            "reward_share",
            "run_resume",
            "run_retry",
            "run_evaluate",
            "run_rollouts_sft",
            "reward_test_start",
            "logout",
            "run_replay_new",
            "recipe_action",
            "model_export",
            "run_notes",
            "run_pin",
            "run_import_stop",
            "code_tests_bench_run",
            "run_review_new",
            "reward_label_suite_save",
            "reward_label_suite_test",
        ],
        "POST only: answers with a redirect or JSON",
    ),
    "model_delete": "the same page as run_delete, for a model on disk: tests/deletion/test_browser_delete_a_run.py",
    # the JSON API (grpo_web/api.py) and its schema; its reference, openapi-view, is a page above
    **dict.fromkeys(
        [
            "api-root",
            "openapi-json",
            "me",
            "datasets_list",
            "dataset_create",
            "dataset_get",
            "dataset_rows",
            "dataset_version_create",
            "runs_list",
            "search_rollouts",
            "run_start",
            "run_get",
            "run_cancel_api",
            "run_resume_api",
            "run_retry_api",
            "run_patch",
            "run_config_yaml",
            "run_metrics",
            "run_step",
            "run_rollouts_export",
            "run_evaluations",
            "rewards_list",
            "reward_get",
            "reward_version_get",
            "reward_version_new",
            "models_list",
            "recipe_act",
            "recipe_get",
            "recipe_make",
            "recipes_list",
            "rejection_job_get",
            "rejection_job_samples",
            "rejection_job_start",
            "run_delete_api",
            "dataset_delete_api",
            "reward_delete_api",
            "model_delete_api",
            "attach_create",
            "attach_events",
            "attach_heartbeat",
            "attach_finish",
            "attach_tokens",
            "run_import_path",
            "run_import_upload",
            "run_import_detail",
            "run_import_stop_api",
            "run_labels",
            "run_labels_create",
            "run_label_delete",
            "run_label_counts",
            "run_alert_verdict",
            "run_review_create",
            "run_review_item",
            "run_review_next",
        ],
        "the JSON API, for scripts",
    ),
    # the one unnamed URL
    None: "favicon.ico: a redirect to static/favicon.svg (each page's own icon request is checked with the page)",
}


def test_every_url_is_a_checked_page_or_says_why_not():
    names = {name for name, _ in url_patterns()}
    checked = {name.split("#")[0] for name in PAGES}
    assert names - checked - set(NOT_PAGES) == set(), "add these to PAGES (or NOT_PAGES, with why)"
    assert checked | set(NOT_PAGES) == names  # and nothing listed that is gone


def code_version(owner, folder):
    """A version with a ``tests`` column for the code_tests bench, its Parquet written here (an import through the
    reader child would cost seconds per page)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from runs.models import Dataset, DatasetVersion

    path = folder / "python-tasks.parquet"
    pq.write_table(pa.table({"prompt": ["Write add(a, b)."], "tests": ['["assert add(1, 2) == 3"]']}), path)
    dataset = Dataset.objects.create(owner=owner, name="python tasks")
    return DatasetVersion.objects.create(
        dataset=dataset,
        number=1,
        path=str(path),
        source_name="tasks.jsonl",
        source_format="jsonl",
        columns=["prompt", "tests"],
        column_types={"prompt": "text", "tests": "text"},
        row_count=1,
        reward_columns=["tests"],
        train_rows=1,
    )


@pytest.fixture
def world(owner, eval_version, tmp_path):
    run = make_run(owner, eval_version, name="checked run", step=3)
    other = make_run(owner, eval_version, name="other run", config={"learning_rate": 0.02}, step=3)
    for r in (run, other):
        for step in (1, 2, 3):
            ingest(
                r,
                rollouts_event(
                    step,
                    [
                        ("What is 2 + 2?", [("Wait, <think>4</think> $\\boxed{4}$", [1.0, 1.0]), ("5", [0.0, 0.5])]),
                        ("What is 3 + 3?", [("6", [1.0, 0.5]), ("6", [1.0, 0.5])]),
                    ],
                ),
                metrics_event(step, reward=0.25 * step, loss=0.01, entropy=1.0, frac_reward_zero_std=0.5),
            )
    StepMetric.objects.filter(run=run).update(
        metrics={
            "reward": 0.5,
            "timing/step_s": 2.0,
            "timing/generation_s": 1.0,
            "timing/update_s": 0.9,
            "timing/tokens_per_s": 40.0,
        }
    )
    start = timezone.now() - timedelta(minutes=5)
    ResourceSample.objects.bulk_create(
        ResourceSample(
            run=run, at=start + timedelta(seconds=2 * i), step=i, cpu_percent=120.0, rss_bytes=700 * 10**6, gpus=[]
        )
        for i in range(4)
    )
    evaluation = Evaluation.objects.create(
        run=run,
        kind=Evaluation.Kind.STANDALONE,
        step=0,
        label="base model",
        model="tiny",
        dataset_version=eval_version,
        k=1,
        status=Evaluation.Status.COMPLETED,
        prompts=1,
        metrics={"mean@k": 0.5, "pass@k": 1.0, "maj@k": 1.0, "greedy": 1.0},
    )
    for sample, greedy in ((0, False), (1, True)):
        EvalSample.objects.create(
            evaluation=evaluation,
            prompt_index=0,
            sample=sample,
            greedy=greedy,
            prompt="What is 2 + 2?",
            prompt_key="0" * 16,
            completion="$\\boxed{4}$",
            rewards=[1.0, 0.5],
            reward=1.5,
            correct=True,
            answer="4",
            length=5,
        )
    reward = RewardFunction.objects.filter(owner=owner).first()
    reward_save(
        function=reward,
        source_code=reward.latest_version.source + "\n# edited\n",
        entrypoint=reward.latest_version.entrypoint,
    )
    running = make_run(owner, eval_version, name="training run", status=Run.Status.RUNNING, step=1)
    failed = make_run(
        owner,
        eval_version,
        name="failed run",
        status=Run.Status.FAILED,
        step=1,
        error="Traceback (most recent call last):\nValueError: boom",
        reward_faults={"accuracy": {"faults": 3, "disabled": True, "step": 1, "error": "ZeroDivisionError"}},
    )
    now = timezone.now()
    Worker.objects.create(
        name="gpu@host",
        hostname="host",
        queues=["training"],
        started_at=now,
        last_seen=now,
        gpus=[{"index": 0, "name": "NVIDIA H200", "memory_mb": 143771}],
    )
    job = DatasetImport.objects.create(owner=owner, name="from the hub", source={"hub_id": "a/b"})
    replay = Replay.objects.create(
        run=run,
        owner=owner,
        rewards=run.rewards,
        steps=[1, 2, 3],
        total=12,
        done=12,
        status=Replay.Status.COMPLETED,
        finished_at=now,
        summary={
            str(s): {"zero_std_before": 0.5, "zero_std_after": 0.5, "best_changed": 0, "groups": 2} for s in (1, 2, 3)
        },
    )
    rejection_job = RejectionJob.objects.create(
        owner=owner,
        name="keep the right ones",
        model="tiny",
        dataset_version=eval_version,
        rewards=[{"name": reward.name, "weight": 1.0, "version_id": reward.latest_version.pk, "version": 2}],
        settings={"k": 2, "threshold": 1.0},
        status=RejectionJob.Status.COMPLETED,
        stats={"prompts": 1, "samples": 2, "kept": 1, "kept_share": 0.5},
    )
    recipe = recipe_from_template(owner=owner, name="r1-zero", template="R1-Zero", prompts=eval_version)
    review = review_create(run=run, user=owner, data={}, mode="all")
    first = run.rollouts.order_by("step", "index").first()
    labels_create(
        run=run,
        user=owner,
        items=[
            {"name": "reward hack", "rollout": first.pk, "note": "<b>boxed</b> only", "span": [0, 5]},
            {"name": "garbled", "step": 2, "group": 1},
        ],
    )
    return {
        "run": run.pk,
        "other": other.pk,
        "running": running.pk,
        "failed": failed.pk,
        "key": run.rollouts.values_list("prompt_key", flat=True).first(),
        "evaluation": evaluation.pk,
        "dataset": eval_version.dataset_id,
        "number": eval_version.number,
        "reward": reward.pk,
        "job": job.pk,
        "dataset_name": eval_version.dataset.name,
        "replay": replay.pk,
        "rejection_job": rejection_job.pk,
        "recipe": recipe.pk,
        "review": review.pk,
        "code_version": code_version(owner, tmp_path).pk,
    }


# Known, not yet fixed: django-ninja's bundled Swagger UI (the API reference) nests its buttons (nested-interactive) and
# draws white on light blue and green, grey on grey (color-contrast). Its markup is Swagger UI's, not a template of
# ours; the fix is a restyled or other renderer for the reference. Strict: the day it passes, this marker must go.
KNOWN = {"openapi-view": "django-ninja's Swagger UI: nested-interactive and color-contrast violations"}


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=KNOWN[n])) if n in KNOWN else n for n in PAGES]
)
def test_the_page_has_no_console_error_failed_request_or_serious_accessibility_violation(
    name, web_server, world, browser
):
    path, ready, *action = PAGES[name]
    context = browser.new_context(viewport={"width": 1300, "height": 900})
    try:
        if name != "login":
            login_page = context.new_page()
            log_in(login_page, web_server)
            login_page.close()  # its requests are over: none is counted against the page under check
        page = context.new_page()
        page.set_default_timeout(30_000)
        findings = watch(page)
        page.goto(web_server + path.format(**world))
        if action:
            action[0](page, world)
        page.wait_for_selector(ready)
        page.wait_for_load_state("networkidle")
        problems = check(page, findings)
        assert not problems, f"{name} ({path.format(**world)}):\n" + "\n".join(problems)
    finally:
        context.close()


def test_the_check_finds_each_kind_of_problem(web_server, page):
    """The check itself, on the login page spoiled on purpose: each kind of problem is reported."""
    findings = watch(page)
    page.goto(f"{web_server}/login/")
    with page.expect_event("pageerror"):
        page.evaluate("""async () => {
            console.error('spoiled on purpose');
            await fetch('/no-such-page/').catch(() => null);
            await fetch('http://127.0.0.1:9/refused').catch(() => null);
            const main = document.querySelector('main');
            main.insertAdjacentHTML('beforeend', '<img src="/static/favicon.svg"><input type="text" id="unlabelled">');
            setTimeout(() => { throw new Error('uncaught on purpose'); });
        }""")
    problems = check(page, findings)
    text = "\n".join(problems)
    assert "console error: spoiled on purpose" in text
    assert f"HTTP 404: GET {web_server}/no-such-page/" in text
    assert "request failed: GET http://127.0.0.1:9/refused" in text
    assert "uncaught exception: Error: uncaught on purpose" in text
    assert "axe image-alt (critical)" in text and "axe label (critical)" in text and "#unlabelled" in text
