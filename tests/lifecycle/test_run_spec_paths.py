"""One run YAML, four ways in, one run: the run form (the import page, then the form posted as it came back filled),
POST /api/runs with a token, `grpo-web submit` against a live server, and `manage.py submit_run` each make a run equal
on every field a run is made of (runs.lifecycle.spec.RunSpec) - the trainer, tools, environment, LoRA fields and
pass-through GRPOConfig fields included (submit_run used to drop the trainer, the tools and the environment)."""

import dataclasses
import io
import json

import pytest
from django.core.management import call_command
from django.urls import reverse
from grpo_web_protocol.demo_data import arithmetic_tool_rows

from runs.accounts.services import token_create
from runs.datasets.services import dataset_import
from runs.lifecycle.spec import RunSpec
from runs.models import Run
from tests.api.conftest import api_client
from tests.api.test_cli_client import cli

# the rewards' contract is checked on a real sandbox worker, by the live server's run_create as by this process's
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]

# a GPU run, queued anyway: no worker of the test session serves the GPU queue, so none of these is trained. Every
# field the session's small defaults set (tests/conftest.py) is written out: the live server takes TRL's defaults
COMMON = (
    "model_name_or_path: tiny\nreward_funcs: [digit_ratio]\nnum_generations: 4\nper_device_train_batch_size: 8\n"
    "max_steps: 2\nrequested_gpus: 1\nlearning_rate: 0.01\nmax_completion_length: 16\nsave_steps: 10\n"
)
YAMLS = {
    "verl": COMMON + "name: by verl\ndataset_name: arithmetic\ntrainer: verl\n",
    "tools": COMMON + "name: with tools\ndataset_name: arithmetic with a calculator\ntools: [calculator]\n",
    "environment": COMMON + "name: in an environment\ndataset_name: arithmetic with a calculator\n"
    "environment: calculator_session\n",
    "lora": COMMON + "name: lora\ndataset_name: arithmetic\nuse_peft: true\nlora_r: 8\nlora_alpha: 16\n"
    "lora_target_modules: [q_proj, v_proj]\nadam_beta1: 0.8\ntoken_sample_groups: 2\n",
}
# what each YAML is about, as its run must hold it whichever way it came in
EXPECTED = {
    "verl": lambda run: run.trainer == Run.Trainer.VERL,
    "tools": lambda run: run.tools == [{"name": "calculator", "builtin": "calculator"}],
    "environment": lambda run: (
        run.environment
        == {"name": "calculator_session", "builtin": "calculator_session", "reward": "CalculatorSession"}
    ),
    "lora": lambda run: (
        (
            run.config["use_peft"],
            run.config["lora_r"],
            run.config["lora_target_modules"],
            run.config_extra,
            run.token_sample_groups,
        )
        == (True, 8, "q_proj,v_proj", {"adam_beta1": 0.8}, 2)
    ),
}


@pytest.fixture
def tool_version(owner, dataset_version):
    """The arithmetic-with-a-calculator demo rows: conversational prompts, as tools and environments need."""
    data = "".join(json.dumps(r) + "\n" for r in arithmetic_tool_rows(16)).encode()
    return dataset_import(
        owner=owner, name="arithmetic with a calculator", stream=io.BytesIO(data), source_name="arith_tools.jsonl"
    )


def posted(form) -> dict:
    """What the browser posts for ``form`` as it was rendered, its user changing nothing: each field's value as the
    page shows it (a ticked box as "on", an unticked or blank one not at all)."""
    data = {}
    for name in form.fields:
        value = form[name].value()
        if value is None or value is False or value == "":
            continue
        data[name] = "on" if value is True else value
    return data


def by_form(client, text: str) -> Run:
    page = client.post(reverse("run_import"), {"yaml": text})
    assert page.status_code == 200, page.context["import_errors"]
    # what a browser posts: the form's fields and the import's notes, which the page carries in hidden inputs
    form = {**posted(page.context["form"]), "import_note": list(page.context["import_notes"]), "queue_anyway": "on"}
    response = client.post(reverse("run_new"), form)
    assert response.status_code == 302, response.context["form"].errors
    return Run.objects.latest("pk")


def by_api(owner, text: str) -> Run:
    response = api_client(owner).post(
        "/api/runs", {"yaml": text, "queue_anyway": True}, content_type="application/json"
    )
    assert response.status_code == 201, response.json()
    return Run.objects.get(pk=response.json()["id"])


def by_cli(web_server, owner, path) -> Run:
    _, token = token_create(owner=owner, name="cli", scope="write")
    submitted = cli(web_server, token, "submit", str(path), "--queue-anyway")
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr
    return Run.objects.latest("pk")


def by_command(owner, path) -> Run:
    call_command("submit_run", str(path), "--user", owner.username, "--queue-anyway", stdout=io.StringIO())
    return Run.objects.latest("pk")


def made_of(run: Run) -> dict:
    """Every field of the run its user chose, but the name and the parent."""
    spec = dataclasses.replace(RunSpec.of_run(run), name="", parent=None)
    return {f.name: getattr(spec, f.name) for f in dataclasses.fields(spec)}


@pytest.mark.parametrize("case", list(YAMLS))
def test_the_form_the_api_the_cli_and_submit_run_make_the_same_run(
    case, web_server, owner, owner_client, dataset_version, tool_version, tmp_path
):
    path = tmp_path / f"{case}.yaml"
    path.write_text(YAMLS[case])
    runs = {
        "form": by_form(owner_client, YAMLS[case]),
        "api": by_api(owner, YAMLS[case]),
        "grpo-web submit": by_cli(web_server, owner, path),
        "submit_run": by_command(owner, path),
    }
    assert len({run.pk for run in runs.values()}) == 4
    for way, run in runs.items():
        assert EXPECTED[case](run), f"{way}: {made_of(run)}"
    for way in ("form", "grpo-web submit", "submit_run"):
        assert made_of(runs[way]) == made_of(runs["api"]), way
