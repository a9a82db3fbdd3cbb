"""A model path is a capability, not a string: a user trains, evaluates, samples and builds recipes only from models
they may read (a demo name, a hub id, the output or export of a run they own or that a team shares with them, a
folder under GRPO_MODEL_ROOTS). Every other folder is refused on every path with the same words, "model: not found
or not yours", whether or not it exists."""

import io
import json
from pathlib import Path

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse
from grpo_web_protocol.demo_data import python_task_rows

from rewards.models import RewardFunction
from runs.datasets.mapping import Mapping
from runs.datasets.selectors import dataset_preview
from runs.datasets.services import dataset_import
from runs.evaluations.services import EvaluationRefused, evaluation_create
from runs.models import Evaluation, Recipe, RejectionJob, Run, RunShare
from runs.paths import NOT_YOURS, model_problems
from runs.recipes.services import RecipeRefused, recipe_create
from runs.registry.selectors import model_entry
from runs.registry.services import model_export
from runs.sampling.services import JobRefused, RejectionSettings, rejection_job_create
from tests.api.conftest import api_client
from tests.conftest import logged_in, run_form_data
from workers.training.coldstart import cold_start_rows

pytestmark = pytest.mark.django_db


def _model_folder(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "config.json").write_text("{}")
    (path / "model.safetensors").write_text("weights")
    (path / "chat_template.jinja").write_text("SECRET {{ messages[0]['content'] }}")
    return path


def _worked(user):
    """A dataset with worked answers (an SFT run trains on it without a sandbox worker: no reward to check)."""
    data = "".join(json.dumps(r) + "\n" for r in cold_start_rows(8)).encode()
    return dataset_import(owner=user, name="worked", stream=io.BytesIO(data), source_name="w.jsonl")


def _run(user, version, name="theirs", model="tiny"):
    return Run.objects.create(
        owner=user,
        name=name,
        model=model,
        dataset_version=version,
        rewards=[{"name": "digit_ratio", "weight": 1.0, "builtin": "digit_ratio"}],
        config={"max_steps": 2},
        total_steps=2,
        status=Run.Status.COMPLETED,
    )


@pytest.fixture
def theirs(owner, dataset_version):
    """The owner's finished run and its final model on disk, shared with no one."""
    run = _run(owner, dataset_version)
    _model_folder(run.run_dir / "output" / "final")
    return run


@pytest.fixture
def their_export(owner, theirs):
    return str(model_export(entry=model_entry(owner, theirs.pk, "final"), user=owner))


def _share(run, *users):
    team = Group.objects.create(name=f"team {Group.objects.count()}")
    team.user_set.add(run.owner, *users)
    return RunShare.objects.create(run=run, team=team)


def _sft_body(model: str) -> dict:
    return {
        "yaml": f"trainer: sft\nname: from a model\nmodel_name_or_path: {model}\ndataset_name: worked\n"
        "max_steps: 2\nmax_length: 64\n"
    }


# --- the rule ------------------------------------------------------------------------------------------------------


def test_another_users_unshared_output_and_export_are_refused_and_a_shared_one_is_accepted(
    owner, outsider, member, theirs, their_export
):
    output = str(theirs.run_dir / "output" / "final")
    for model in (output, their_export, output + "/../final", output + "/"):
        assert model_problems(model, user=outsider) == [NOT_YOURS], model
        assert model_problems(model, user=member) == [NOT_YOURS], model
        assert model_problems(model, user=owner) == [], model
    share = _share(theirs, member)
    assert model_problems(output, user=member) == model_problems(their_export, user=member) == []
    assert model_problems(output, user=outsider) == [NOT_YOURS]
    share.delete()
    assert model_problems(output, user=member) == [NOT_YOURS]


def test_a_folder_outside_the_roots_is_refused_alike_whether_or_not_it_exists(owner, tmp_path, settings):
    real = _model_folder(tmp_path / "models" / "real")
    missing = tmp_path / "models" / "missing"
    relative = ["./models/real", "../models/real", "~/models/real"]
    answers = {
        m: model_problems(m, user=owner) for m in [str(real), str(missing), str(real / "config.json"), *relative]
    }
    assert set(map(tuple, answers.values())) == {(NOT_YOURS,)}, answers
    settings.GRPO_MODEL_ROOTS = [tmp_path / "models"]
    assert model_problems(str(real), user=owner) == []
    # inside a root, a folder is the user's to load, so it may say what is wrong with it
    assert model_problems(str(missing), user=owner) == [f"model: no loadable model at {missing} (no config.json)"]


def test_a_link_inside_a_root_does_not_lead_out_of_it(owner, outsider, theirs, tmp_path, settings):
    root = tmp_path / "models"
    root.mkdir()
    (root / "borrowed").symlink_to(theirs.run_dir / "output" / "final")
    settings.GRPO_MODEL_ROOTS = [root]
    assert model_problems(str(root / "borrowed"), user=outsider) == [NOT_YOURS]
    assert model_problems(str(root / "borrowed"), user=owner) == []


def test_a_root_that_holds_the_run_folders_still_keeps_each_run_to_its_owner(outsider, theirs, settings):
    settings.GRPO_MODEL_ROOTS = [settings.DATA_DIR]
    assert model_problems(str(theirs.run_dir / "output" / "final"), user=outsider) == [NOT_YOURS]


def test_a_hub_id_is_never_a_folder_beside_the_server(owner, tmp_path, settings):
    assert model_problems("Qwen/Qwen2.5-0.5B-Instruct", user=owner) == []
    settings.BASE_DIR = tmp_path  # where the workers start the training programs
    _model_folder(tmp_path / "var" / "leak")
    assert model_problems("var/leak", user=owner) == [NOT_YOURS]
    for model in ("gpt2", "a/b/c", "", "a/../b"):
        assert "is neither a demo model" in model_problems(model, user=owner)[0], model


def test_hostile_names_are_refused_without_an_error(owner):
    for model in ("/tmp/\x00x", "/" + "a" * 5000, "/" + "a/" * 2000):
        assert model_problems(model, user=owner) == [NOT_YOURS]


def test_the_demo_models_and_a_users_own_outputs_still_load(owner, tiny_model, theirs):
    for model in ("tiny", str(tiny_model), str(theirs.run_dir / "output" / "final")):
        assert model_problems(model, user=owner) == [], model


# --- every path that takes a model ---------------------------------------------------------------------------------


def test_the_run_form_refuses_an_unshared_model_and_starts_from_a_shared_one(outsider, member, theirs, tiny_model):
    output = str(theirs.run_dir / "output" / "final")

    def post(user):
        rows = "".join(json.dumps(r) + "\n" for r in python_task_rows(8, seed=0)).encode()
        tasks = dataset_import(owner=user, name="tasks", stream=io.BytesIO(rows), source_name="tasks.jsonl")
        data = {k: v for k, v in run_form_data(user).items() if not k.startswith("reward_")}
        # the built-in code_tests reward needs no sandbox worker to check it
        data.update(name="borrowed", model=output, dataset_version=tasks.pk, builtin_code_tests="on")
        return logged_in(user).post(reverse("run_new"), data)

    for user in (outsider, member):
        response = post(user)
        assert response.status_code == 400
        assert response.context["form"].non_field_errors() == [NOT_YOURS]
    assert not Run.objects.exclude(pk=theirs.pk).exists()
    _share(theirs, member)
    response = post(member)
    assert response.status_code == 302, response.context["form"].errors
    assert Run.objects.get(owner=member).model == output


def test_the_run_api_refuses_an_unshared_model_and_takes_a_shared_one(outsider, member, theirs, their_export):
    _worked(outsider), _worked(member)
    for model in (str(theirs.run_dir / "output" / "final"), their_export):
        for user in (outsider, member):
            response = api_client(user).post("/api/runs", _sft_body(model), content_type="application/json")
            assert response.status_code == 400 and NOT_YOURS in response.json()["errors"], response.content
    assert not Run.objects.exclude(pk=theirs.pk).exists()
    _share(theirs, member)
    response = api_client(member).post("/api/runs", _sft_body(their_export), content_type="application/json")
    assert response.status_code == 201, response.content
    assert Run.objects.get(pk=response.json()["id"]).model == their_export


def test_the_run_api_answers_alike_for_a_folder_that_is_not_there(owner, tmp_path, settings):
    _worked(owner)
    real = _model_folder(tmp_path / "models" / "real")
    answers = [
        api_client(owner).post("/api/runs", _sft_body(str(m)), content_type="application/json").json()["errors"]
        for m in (real, tmp_path / "models" / "missing")
    ]
    assert answers[0] == answers[1] and NOT_YOURS in answers[0]
    settings.GRPO_MODEL_ROOTS = [tmp_path / "models"]
    response = api_client(owner).post("/api/runs", _sft_body(str(real)), content_type="application/json")
    assert response.status_code == 201, response.content


def test_an_evaluation_of_another_users_model_is_refused_and_of_a_shared_one_queued(outsider, member, theirs):
    output = str(theirs.run_dir / "output" / "final")
    mine = {user: _run(user, _worked(user), name="mine") for user in (outsider, member)}
    data = {
        "model": "path",
        "model_path": output,
        "split": "all",
        "eval_num_samples": 1,
        "eval_max_prompts": 2,
        "eval_temperature": 1.0,
        "eval_solved_by": "",
        "eval_threshold": 1.0,
    }
    for user in (outsider, member):
        data["dataset_version"] = mine[user].dataset_version_id
        response = logged_in(user).post(reverse("run_evaluate", args=[mine[user].pk]), data)
        assert response.status_code == 400 and NOT_YOURS in response.content.decode()
        api = api_client(user).post(f"/api/runs/{mine[user].pk}/evaluations", data, content_type="application/json")
        assert api.status_code == 400 and NOT_YOURS in json.dumps(api.json()), api.content
    assert not Evaluation.objects.exists()
    _share(theirs, member)
    evaluation = evaluation_create(
        run=mine[member],
        user=member,
        model="path",
        model_path=output,
        dataset_version=mine[member].dataset_version,
        split="all",
    )
    assert evaluation.model == output
    with pytest.raises(EvaluationRefused, match=NOT_YOURS):
        evaluation_create(
            run=mine[outsider],
            user=outsider,
            model="path",
            model_path=output,
            dataset_version=mine[outsider].dataset_version,
            split="all",
        )


def test_rejection_sampling_from_another_users_model_is_refused_and_from_a_shared_one_queued(
    outsider, member, theirs, their_export
):
    def create(user, model):
        accuracy = RewardFunction.objects.get(owner=user, name="accuracy").latest_version
        return rejection_job_create(
            owner=user,
            name="kept",
            model=model,
            dataset_version=_worked(user),
            rewards=[{"name": "accuracy", "weight": 1.0, "version_id": accuracy.pk, "version": accuracy.number}],
            settings=RejectionSettings(k=2),
        )

    for user in (outsider, member):
        with pytest.raises(JobRefused, match=NOT_YOURS):
            create(user, their_export)
        body = {"name": "kept", "model": their_export, "dataset_version": _worked(user).pk, "rewards": ["accuracy"]}
        response = api_client(user).post("/api/rejection-jobs", body, content_type="application/json")
        assert response.status_code == 400 and NOT_YOURS in response.json()["errors"], response.content
    assert not RejectionJob.objects.exists()
    _share(theirs, member)
    assert create(member, their_export).model == their_export


def test_a_recipe_naming_another_users_model_is_refused_and_a_shared_one_made(outsider, member, theirs):
    output = str(theirs.run_dir / "output" / "final")

    def stages(user):
        return [{"kind": "sft", "name": "tune", "model": output, "dataset": _worked(user).pk}]

    for user in (outsider, member):
        with pytest.raises(RecipeRefused) as refused:
            recipe_create(owner=user, name="borrowed", stages=stages(user))
        assert refused.value.errors == [f"stage 1: {NOT_YOURS}"]
        response = api_client(user).post(
            "/api/recipes", {"name": "borrowed", "stages": stages(user)}, content_type="application/json"
        )
        assert response.status_code == 400 and response.json()["errors"] == [f"stage 1: {NOT_YOURS}"]
    assert not Recipe.objects.exists()
    _share(theirs, member)
    assert recipe_create(owner=member, name="borrowed", stages=stages(member)).stages[0]["model"] == output


def test_a_recipe_whose_model_stops_being_shared_fails_its_stage_when_it_starts(member, theirs):
    from runs.recipes.services import recipe_start

    share = _share(theirs, member)
    output = str(theirs.run_dir / "output" / "final")
    recipe = recipe_create(
        owner=member,
        name="borrowed",
        stages=[{"kind": "sft", "name": "t", "model": output, "dataset": _worked(member).pk}],
    )
    share.delete()
    recipe = recipe_start(recipe=recipe)
    assert recipe.status == Recipe.Status.FAILED and NOT_YOURS in recipe.error
    assert not Run.objects.filter(owner=member).exists()


def test_the_mapping_preview_reads_no_chat_template_from_another_users_model(outsider, theirs):
    rows = [{"prompt": [{"role": "user", "content": "2 + 2?"}], "answer": "4"}]
    data = "".join(json.dumps(r) + "\n" for r in rows).encode()
    chat = dataset_import(owner=outsider, name="chat", stream=io.BytesIO(data), source_name="chat.jsonl")
    output = str(theirs.run_dir / "output" / "final")
    preview = dataset_preview(chat, Mapping.of(chat), model=output, user=outsider)
    assert preview.rows[0]["rendered"] is None
    page = logged_in(outsider).post(
        reverse("dataset_mapping", args=[chat.dataset.pk, 1]),
        {
            "action": "preview",
            "prompt_column": "prompt",
            "prompt_format": "conversational",
            "split": "none",
            "model": output,
        },
    )
    assert page.status_code == 200 and "no chat template found" in page.content.decode()
    assert "SECRET" not in page.content.decode()
    assert (
        dataset_preview(chat, Mapping.of(chat), model=output, user=theirs.owner).rows[0]["rendered"] == "SECRET 2 + 2?"
    )


def test_model_roots_from_the_environment_must_be_absolute(monkeypatch, tmp_path):
    from django.core.exceptions import ImproperlyConfigured

    from grpo_web.env import envpaths

    monkeypatch.setenv("GRPO_MODEL_ROOTS", f"{tmp_path}, ,{tmp_path}/b")
    assert envpaths("GRPO_MODEL_ROOTS") == [tmp_path.resolve(), (tmp_path / "b").resolve()]
    monkeypatch.delenv("GRPO_MODEL_ROOTS")
    assert envpaths("GRPO_MODEL_ROOTS") == []
    monkeypatch.setenv("GRPO_MODEL_ROOTS", "models")
    with pytest.raises(ImproperlyConfigured, match="GRPO_MODEL_ROOTS: 'models' is not an absolute path"):
        envpaths("GRPO_MODEL_ROOTS")


def test_an_offline_server_refuses_a_hub_model_it_has_not_cached_now_not_at_start(owner, tmp_path, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    assert model_problems("org/model", user=owner) == []  # online, the hub answers when the run starts
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert model_problems("org/model", user=owner) == [
        "model: 'org/model' is not in this server's Hugging Face cache and the server runs offline "
        "(HF_HUB_OFFLINE=1): download it where the hub is reachable, or give a model folder"
    ]
    # the hub cache's own layout, as huggingface_hub's snapshot_download leaves it
    repo = tmp_path / "models--org--model"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("0123456789abcdef0123456789abcdef01234567")
    _model_folder(repo / "snapshots" / "0123456789abcdef0123456789abcdef01234567")
    assert model_problems("org/model", user=owner) == []
