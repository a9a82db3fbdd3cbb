"""A real run with a tool: the calculator (the library's, run in the sandbox) attached to a GRPO run of the
cold-started tool model on the arithmetic-with-a-calculator demo set, trained by a real Celery worker. The stored
transcripts are TRL's own (its completions table, log_completions=True): each turn, each tool call and the result
the sandboxed calculator returned; TRL's tools/ metrics agree with them; the run page charts them and chromium shows
each call, its arguments and its result."""

import io
import json
from pathlib import Path

import pandas as pd
import pytest
from django.urls import reverse
from grpo_web_protocol.demo_data import arithmetic_tool_rows

from rewards.library import function
from rewards.models import RewardFunction
from runs.datasets.services import dataset_import
from runs.lifecycle.services import RunRefused, run_create
from runs.lifecycle.spec import RunSpec
from runs.models import Rollout, Run, StepMetric
from tests.conftest import log_in, wait_for

pytestmark = [pytest.mark.django_db(transaction=True)]

CONFIG = {
    "num_generations": 4,
    "max_completion_length": 48,
    "learning_rate": 1e-6,
    "max_steps": 2,
    "per_device_train_batch_size": 8,
    "seed": 1,
    "log_completions": True,
}


def _tool_dataset(owner):
    data = "".join(json.dumps(r) + "\n" for r in arithmetic_tool_rows(32)).encode()
    return dataset_import(
        owner=owner, name="arithmetic with a calculator", stream=io.BytesIO(data), source_name="arith_tools.jsonl"
    )


def _plain(value):
    """A parquet cell as the messages TRL logged: numpy arrays as lists, and without the None that parquet's struct
    columns give a message for each key another message has (a tool turn's ``tool_calls``)."""

    def strip(v):
        if isinstance(v, dict):
            return {k: strip(x) for k, x in v.items() if x is not None}
        return [strip(x) for x in v] if isinstance(v, list) else v

    return strip(json.loads(json.dumps(value, default=lambda v: v.tolist())))


def _accuracy(owner):
    return [
        {
            "name": "accuracy",
            "weight": 1.0,
            "version_id": RewardFunction.objects.get(owner=owner, name="accuracy").latest_version.pk,
        }
    ]


def test_a_run_with_the_calculator_stores_trls_tool_calls_and_the_browser_shows_them(
    celery_worker, tools_model, web_server, owner, owner_client, page
):
    version = _tool_dataset(owner)
    assert version.prompt_format == "conversational"
    run = run_create(
        owner=owner,
        spec=RunSpec(
            name="calculator",
            model="tiny-tools",
            dataset_version=version,
            rewards=_accuracy(owner),
            config=CONFIG,
            tools=[{"name": "calculator", "builtin": "calculator"}],
        ),
    )
    wait_for(lambda: Run.objects.get(pk=run.pk).is_finished, timeout=300, what="the run to finish")
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED, run.error + run.log_tail
    assert run.tools == [{"name": "calculator", "builtin": "calculator"}]

    calculator = function("calculator")
    calls = 0
    for step in (1, 2):
        rows = list(Rollout.objects.filter(run=run, step=step).order_by("index"))
        table = pd.read_parquet(Path(run.run_dir) / "output" / "completions" / f"completions_{step:05d}.parquet")
        # the stored transcript is TRL's completion, turn for turn
        assert [r.messages for r in rows] == [_plain(c) for c in table["completion"]]
        step_calls = step_failures = 0
        for r in rows:
            for i, message in enumerate(r.messages):
                for k, call in enumerate(message.get("tool_calls") or []):
                    step_calls += 1
                    # TRL calls the tool, then drops the results that would pass max_completion_length: the call
                    # ends the transcript unanswered, still counted (iterations are unlimited by default)
                    result = r.messages[i + 1 + k] if i + 1 + k < len(r.messages) else None
                    assert result is None or (result["role"] == "tool" and result["name"] == "calculator")
                    try:
                        expected = calculator(**call["function"]["arguments"])
                    except Exception as exc:  # what TRL shows the model when a tool fails
                        step_failures += 1
                        assert result is None or (
                            result["content"].startswith("{'error'") and str(exc) in result["content"]
                        )
                    else:
                        assert result is None or result["content"] == expected  # the sandboxed calculator's answer
        metrics = StepMetric.objects.get(run=run, step=step).metrics
        assert metrics["tools/call_frequency"] == pytest.approx(step_calls / len(rows))
        assert metrics["tools/failure_frequency"] == pytest.approx(step_failures / step_calls if step_calls else 0)
        calls += step_calls
    assert calls > 0  # the cold-started model calls the calculator

    charts = owner_client.get(reverse("run_metrics_json", args=[run.pk])).json()["charts"]
    assert "tools/call_frequency" in charts and "tools/failure_frequency" in charts

    shown = next(
        r
        for r in Rollout.objects.filter(run=run, step=1).order_by("-advantage", "index")
        if any(m.get("tool_calls") for m in r.messages)
    )
    log_in(page, web_server)
    page.goto(f"{web_server}/runs/{run.pk}/")
    page.click("#tab-rollouts")
    page.wait_for_selector(".group-card")
    page.select_option("#step-select", "1")
    page.wait_for_selector("#shown-step:text('Step 1')")
    article = page.locator(f".group-card tr[data-index='{shown.index}']")
    article.locator(".tool-call").first.wait_for()
    call = next(m for m in shown.messages if m.get("tool_calls"))["tool_calls"][0]["function"]
    result = next(m for m in shown.messages if m["role"] == "tool")
    assert article.locator(".tool-call .tool-name").first.inner_text() == "calculator"
    assert json.loads(article.locator(".tool-call .tool-args").first.inner_text()) == call["arguments"]
    assert article.locator("pre.tool-result").first.inner_text() == result["content"]
    assert article.locator(".turn-role").all_inner_texts()[:2] == ["assistant", "tool result · calculator"]

    # the rollout browser shows the same turns
    page.goto(f"{web_server}/runs/{run.pk}/rollouts/?step_min=1&step_max=1")
    card = page.locator(f"article.rollout[data-id='{shown.pk}']")
    card.locator(".tool-call").first.wait_for()
    assert card.locator("pre.tool-result").first.inner_text() == result["content"]


def test_a_run_refuses_tools_on_text_prompts_and_unknown_tools(owner, dataset_version):
    with pytest.raises(RunRefused) as info:
        run_create(
            owner=owner,
            spec=RunSpec(
                name="x",
                model="tiny",
                dataset_version=dataset_version,
                rewards=_accuracy(owner),
                config=CONFIG,
                tools=[{"name": "calculator", "builtin": "calculator"}],
            ),
            check_rewards=False,
        )
    assert any("only in chat conversations" in e for e in info.value.errors)
