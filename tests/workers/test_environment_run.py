"""A real run with an environment (TRL's environment_factory): the library's CalculatorSession, run in the sandbox,
one instance per rollout, attached to a GRPO run of the cold-started tool model on the arithmetic-with-a-calculator
demo set, trained by a real Celery worker. The stored transcripts are TRL's own (its completions table): each call
of the environment's calculator method and its result; the environment's get_reward is stored as the run's reward
column named after the class, with TRL's values, and each value is what the session's rule gives for that
transcript."""

import io
import json
from pathlib import Path

import pandas as pd
import pytest
from grpo_web_protocol.demo_data import arithmetic_tool_rows

from rewards.library.calculator_session import CalculatorSession
from rewards.models import RewardFunction
from runs.datasets.services import dataset_import
from runs.lifecycle.services import RunRefused, run_create
from runs.lifecycle.spec import RunSpec
from runs.lifecycle.trl_yaml import parse_run_yaml, run_yaml
from runs.models import Rollout, Run, StepMetric
from tests.conftest import wait_for
from tests.workers.test_tool_run import CONFIG, _plain

pytestmark = [pytest.mark.django_db(transaction=True)]

ENVIRONMENT = {"name": "calculator_session", "builtin": "calculator_session"}


def _accuracy(owner):
    return [
        {
            "name": "accuracy",
            "weight": 1.0,
            "version_id": RewardFunction.objects.get(owner=owner, name="accuracy").latest_version.pk,
        }
    ]


def test_a_run_with_an_environment_stores_trls_tool_calls_and_the_environments_reward(
    celery_worker, tools_model, owner
):
    rows = arithmetic_tool_rows(32)
    data = "".join(json.dumps(r) + "\n" for r in rows).encode()
    version = dataset_import(
        owner=owner, name="arithmetic with a calculator", stream=io.BytesIO(data), source_name="arith_tools.jsonl"
    )
    answers = {r["prompt"][0]["content"]: r["answer"] for r in rows}
    run = run_create(
        owner=owner,
        spec=RunSpec(
            name="session",
            model="tiny-tools",
            dataset_version=version,
            rewards=_accuracy(owner),
            config=CONFIG,
            environment=ENVIRONMENT,
        ),
    )
    wait_for(lambda: Run.objects.get(pk=run.pk).is_finished, timeout=300, what="the run to finish")
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED, run.error + run.log_tail
    assert run.environment == {**ENVIRONMENT, "reward": "CalculatorSession"}
    assert run.reward_names == ["accuracy", "CalculatorSession"]

    calls = 0
    for step in (1, 2):
        stored = list(Rollout.objects.filter(run=run, step=step).order_by("index"))
        table = pd.read_parquet(Path(run.run_dir) / "output" / "completions" / f"completions_{step:05d}.parquet")
        assert [r.messages for r in stored] == [_plain(c) for c in table["completion"]]
        # get_reward's column, as TRL logged it under the class's name
        assert [r.rewards[1] for r in stored] == pytest.approx(list(table["CalculatorSession"]))
        step_calls = 0
        for r, prompt in zip(stored, table["prompt"]):
            session = CalculatorSession()  # the library's class, trusted: the rule the sandboxed copy applied
            session.reset(answer=answers[_plain(prompt)[-1]["content"]])
            for i, message in enumerate(r.messages):
                for call in message.get("tool_calls") or []:
                    step_calls += 1
                    result = r.messages[i + 1]
                    assert result["role"] == "tool" and result["name"] == "calculator"
                    try:
                        expected = session.calculator(**call["function"]["arguments"])
                    except Exception as exc:  # TRL shows the model the error
                        assert result["content"].startswith("{'error'") and str(exc) in result["content"]
                    else:
                        assert result["content"] == expected
            assert r.rewards[1] == session.get_reward()
        metrics = StepMetric.objects.get(run=run, step=step).metrics
        assert metrics["tools/call_frequency"] == pytest.approx(step_calls / len(stored))
        assert "rewards/CalculatorSession/mean" in metrics
        calls += step_calls
    assert calls > 0  # the cold-started model calls the environment's calculator

    # the YAML export names the environment, and reads back
    imported = parse_run_yaml(run_yaml(run), owner=owner)
    assert not imported.errors and imported.environment == ENVIRONMENT


def test_a_run_refuses_an_unknown_or_broken_environment(owner, dataset_version):
    with pytest.raises(RunRefused) as info:
        run_create(
            owner=owner,
            spec=RunSpec(
                name="x",
                model="tiny",
                dataset_version=dataset_version,
                rewards=_accuracy(owner),
                config=CONFIG,
                environment=ENVIRONMENT,
            ),
            check_rewards=False,
        )
    assert any("only in chat conversations" in e for e in info.value.errors)
    imported = parse_run_yaml(
        "model_name_or_path: tiny\ndataset_name: arithmetic\nreward_funcs: [accuracy]\nenvironment: nope\n", owner=owner
    )
    assert any("you have no environment 'nope'" in e for e in imported.errors)


def test_the_editor_makes_an_environment_from_the_library_or_blank_and_refuses_a_class_trl_could_not_use(
    owner, owner_client
):
    from django.urls import reverse

    from rewards.services import RewardCodeError, reward_save

    assert (
        owner_client.post(reverse("reward_new"), {"name": "session", "template": "calculator_session"}).status_code
        == 302
    )
    assert owner_client.post(reverse("reward_new"), {"name": "mine", "kind": "environment"}).status_code == 302
    session = RewardFunction.objects.get(owner=owner, name="session")
    mine = RewardFunction.objects.get(owner=owner, name="mine")
    assert (session.kind, session.latest_version.entrypoint) == ("environment", "CalculatorSession")
    assert (mine.kind, mine.latest_version.entrypoint) == ("environment", "MyEnvironment")
    assert "class CalculatorSession" in owner_client.get(reverse("reward_detail", args=[session.pk])).content.decode()
    broken = mine.latest_version.source.replace("def reset(self, **row):", "def _reset(self, **row):")
    with pytest.raises(RewardCodeError, match="has no reset method"):
        reward_save(function=mine, source_code=broken, entrypoint="MyEnvironment")
    # a run may attach the user's copy by name in YAML
    imported = parse_run_yaml(
        "model_name_or_path: tiny-tools\ndataset_name: x\nreward_funcs: [accuracy]\nenvironment: mine\n", owner=owner
    )
    assert imported.environment == {"name": "mine", "version_id": mine.latest_version.pk, "version": 1}


def test_the_run_form_attaches_one_environment_and_a_clone_keeps_it(owner, dataset_version):
    from runs.lifecycle.forms import RunForm
    from runs.lifecycle.trl_yaml import ImportedRun
    from tests.conftest import run_form_data

    accuracy = RewardFunction.objects.get(owner=owner, name="accuracy")
    data = {**run_form_data(owner), "name": "session", f"reward_{accuracy.pk}": True}
    form = RunForm(data={**data, "environment": "builtin:calculator_session"}, owner=owner)
    assert form.is_valid(), form.errors
    assert form.cleaned_data["environment"] == ENVIRONMENT
    form = RunForm(data=data, owner=owner)
    assert form.is_valid() and form.cleaned_data["environment"] == {}
    source = ImportedRun(
        name="x",
        dataset_version=dataset_version,
        rewards=_accuracy(owner),
        environment={**ENVIRONMENT, "reward": "CalculatorSession"},
    )
    assert RunForm(owner=owner, imported=source).initial["environment"] == "builtin:calculator_session"
    assert "environment" not in RunForm(owner=owner, kind="sft").fields
