"""The import's notes where users look (issue 43, item 6): a refused POST /api/runs returns its notes with its errors
(and the CLI prints them); the run page keeps the notes for the life of the run, whichever route started it (and a
retry keeps them); a capacity refusal is said beside TRL's own refusal, not instead of it; no message names Python's
None; ``eval_strategy: 'no'`` with eval_steps leaves evaluation off, as TRL does."""

import io
import json

import pytest
import yaml
from django.urls import reverse
from django.utils.html import escape

from rewards.models import RewardFunction
from runs.accounts.services import token_create
from runs.datasets.services import dataset_import
from runs.lifecycle.forms import RunForm
from runs.lifecycle.services import RunRefused, run_create, run_retry
from runs.lifecycle.spec import RunSpec
from runs.lifecycle.trl_yaml import parse_run_yaml
from runs.models import Run
from tests.api.conftest import api_client
from tests.conftest import wait_for
from tests.lifecycle.test_a_config_over_the_size_limit_is_refused_whole import cli_submit

pytestmark = pytest.mark.django_db

SFT = "trainer: sft\nmodel_name_or_path: tiny\ndataset_name: pairs\nmax_steps: 2\nwandb_project: open-r1\n"
WANDB = "wandb_project: Weights & Biases settings; not applied"


@pytest.fixture
def pairs(owner):
    rows = [{"prompt": f"q{i}", "completion": f"a{i}"} for i in range(8)]
    data = "".join(json.dumps(r) + "\n" for r in rows).encode()
    return dataset_import(owner=owner, name="pairs", stream=io.BytesIO(data), source_name="pairs.jsonl")


def test_a_refused_api_run_returns_its_notes_with_its_errors(owner, pairs):
    response = api_client(owner).post(
        "/api/runs", {"yaml": SFT + "learning_rate: true\n"}, content_type="application/json"
    )
    assert response.status_code == 400
    body = response.json()
    assert body["errors"][0].startswith("learning_rate: true is not a number (float)")
    assert any(n.startswith(WANDB) for n in body["import_notes"])
    assert not Run.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_the_cli_prints_a_refused_runs_notes_before_its_errors(web_server, owner, pairs, tmp_path):
    _, token = token_create(owner=owner, name="cli", scope="write")
    path = tmp_path / "sft.yaml"
    path.write_text(SFT + "learning_rate: true\n")
    done = cli_submit(web_server, token, path)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.splitlines()
    assert lines[0].startswith(f"note: {WANDB}")
    assert lines[-1].startswith("grpo-web: learning_rate: true is not a number (float)")


def test_the_run_page_keeps_the_notes_of_a_run_started_by_the_api(owner, owner_client, pairs):
    response = api_client(owner).post("/api/runs", {"yaml": SFT}, content_type="application/json")
    assert response.status_code == 201, response.json()
    run = Run.objects.get()
    notes = response.json()["import_notes"]
    assert run.import_notes == notes and any(n.startswith(WANDB) for n in notes)
    assert api_client(owner).get(f"/api/runs/{run.pk}").json()["import_notes"] == notes
    page = owner_client.get(run.get_absolute_url()).content.decode()
    assert all(escape(n) in page for n in notes) and 'id="import-notes"' in page
    run.status = Run.Status.FAILED
    run.save(update_fields=["status"])
    assert run_retry(run=run).import_notes == notes  # the retry is the same run again


def test_the_run_page_keeps_the_notes_of_a_run_started_from_the_import_page(owner, owner_client, pairs):
    imported = owner_client.post(reverse("run_import"), {"yaml": SFT})
    notes = imported.context["import_notes"]
    assert any(n.startswith(WANDB) for n in notes)
    form = RunForm(owner=owner, imported=parse_run_yaml(SFT, owner=owner), kind="sft")
    data = {name: form.get_initial_for_field(field, name) for name, field in form.fields.items()}
    data = {
        k: json.dumps(v) if isinstance(v, dict | list) else v
        for k, v in data.items()
        if v is not None and v is not False and not callable(v)
    }
    data["dataset_version"] = pairs.pk
    response = owner_client.post(reverse("run_new") + "?kind=sft", {**data, "import_note": notes})
    assert response.status_code == 302, response.context["form"].errors
    run = Run.objects.get()
    assert run.import_notes == notes
    page = owner_client.get(run.get_absolute_url()).content.decode()
    assert all(escape(n) in page for n in notes)


@pytest.mark.django_db(transaction=True)
def test_a_capacity_refusal_is_said_beside_trls_own_refusal(celery_worker, owner, dataset_version):
    """No online worker has a GPU, and TRL's GRPOConfig refuses the config: the capacity refusal (at once, where the
    form offers to queue anyway) says TRL's checks are still to come, and queued anyway, TRL's refusal comes before
    anything is queued, so queueing anyway is not the user's next mistake."""
    digits = RewardFunction.objects.get(owner=owner, name="digit_ratio")
    spec = RunSpec(
        name="r",
        model="tiny",
        dataset_version=dataset_version,
        rewards=[{"name": "digit_ratio", "weight": 1.0, "version_id": digits.latest_version.pk}],
        config={"num_generations": 4, "per_device_train_batch_size": 8, "max_steps": 2, "steps_per_generation": 2},
        config_extra={"generation_batch_size": 16},
        requested_gpus=1,
    )
    with pytest.raises(RunRefused) as refused:
        run_create(owner=owner, spec=spec)
    text = "\n".join(refused.value.errors)
    assert "requested_gpus: no online worker has 1 GPU" in text
    assert "TRL's own checks of the config are made, once the run is started" in text
    assert not Run.objects.exists()
    run = run_create(owner=owner, spec=spec, queue_anyway=True)  # answered at once; then the check refuses it
    wait_for(lambda: run.refresh_from_db() or run.status != Run.Status.CHECKING, timeout=120, what="the check")
    assert run.status == Run.Status.FAILED and run.queued_at is None
    assert "GRPOConfig refuses this configuration" in "\n".join(run.refusal)


@pytest.mark.parametrize(
    "text",
    [
        "reward_funcs: [digit_ratio]\n",  # no dataset_name
        "dataset_name: null\nreward_funcs: [digit_ratio]\nnum_workers: null\n",
        "training:\n  trainer_type: null\n",  # Oumi's
        "algorithm:\n  adv_estimator: null\nactor_rollout_ref: {}\n",  # verl's
        "model_name_or_path: tiny\ndataset_name: arithmetic\nreward_funcs: [digit_ratio]\nvllm_device: null\n",
    ],
)
def test_no_message_names_none(owner, dataset_version, text):
    result = parse_run_yaml(text, owner=owner)
    said = result.errors + result.notes
    assert said and not [m for m in said if "None" in m]


def test_a_missing_dataset_name_says_which_datasets_there_are(owner, dataset_version):
    errors = parse_run_yaml("reward_funcs: [digit_ratio]\n", owner=owner).errors
    assert "dataset_name: not given; name the dataset to train on (yours: arithmetic)" in errors


def evaluation_of(owner, strategy: str) -> tuple[dict, list[str]]:
    text = yaml.safe_dump(
        {
            "model_name_or_path": "tiny",
            "dataset_name": "arithmetic",
            "reward_funcs": ["digit_ratio"],
            "eval_strategy": strategy,
            "eval_steps": 10,
        }
    )
    result = parse_run_yaml(text, owner=owner)
    assert result.errors == []
    return result.evaluation, result.notes


def test_eval_strategy_no_with_eval_steps_leaves_evaluation_off_as_trl_does(owner, eval_version):
    evaluation, notes = evaluation_of(owner, "no")
    assert evaluation["eval_steps"] == 0
    assert any(n.startswith("eval_strategy: 'no' turns evaluation off in TRL") and "eval_steps: 10" in n for n in notes)


def test_eval_strategy_steps_keeps_evaluating_every_eval_steps(owner, eval_version):
    evaluation, _ = evaluation_of(owner, "steps")
    assert evaluation["eval_steps"] == 10
