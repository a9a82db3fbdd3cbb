"""The evaluation pages of a run: starting a standalone evaluation from the run page (bad input named, nothing
saved), the run's evaluations as JSON with the change against the base model, one evaluation's completions by
prompt with the browser's filters, its JSON lines export, and the compare page's table. Owner only."""

import io
import json
import re

import pytest
from django.urls import reverse

from runs.datasets.services import dataset_import
from runs.evaluations.services import store_eval_event
from runs.models import Evaluation, StepMetric
from runs.rollouts.selectors import metric_series
from tests.rollouts.inspect_data import make_run
from workers.training.evaluate import extract_answer, metrics

pytestmark = pytest.mark.django_db

XSS = "<img src=x onerror=alert(1)> 11"
# per prompt: k=2 samples then the greedy completion, each (text, accuracy, digit_ratio); correct when accuracy >= 1
PROMPTS = [
    ("What is 2 + 2?", [("4", 1.0, 1.0), ("4", 1.0, 1.0), ("4", 1.0, 1.0)]),  # all right
    ("What is 3 + 4?", [("5", 0.0, 1.0), ("7", 1.0, 1.0), ("5", 0.0, 1.0)]),  # greedy wrong; the tie votes "5": wrong
    ("What is 9 - 2? needle", [("6", 0.0, 0.0), ("6", 0.0, 0.0), ("7", 1.0, 1.0)]),  # no sample solves it
    ("What is 1 + 1?", [("2", 1.0, 1.0), (XSS, 0.0, 2.0), ("3", 0.0, 0.5)]),  # greedy wrong; a wrong sample scores 2
]
BASE_METRICS = {
    "mean@k": 0.25,
    "pass@k": 0.5,
    "maj@k": 0.25,
    "greedy": 0.25,
    "reward_mean@k": 0.75,
    "reward_greedy": 0.5,
    "answer_rate": 1.0,
}


def eval_event(prompts) -> dict:
    """An "eval" event as workers.training.evaluate writes it, its figures from the program's own ``metrics``."""
    rows = []
    for p, (prompt, completions) in enumerate(prompts):
        k = len(completions) - 1
        for s, (text, accuracy, digits) in enumerate(completions):
            rows.append(
                {
                    "prompt_index": p,
                    "sample": s,
                    "greedy": s == k,
                    "prompt": prompt,
                    "completion": text,
                    "rewards": [accuracy, digits],
                    "reward": accuracy + digits,
                    "correct": accuracy >= 1.0,
                    "answer": extract_answer(text),
                    "length": 3,
                    "truncated": s == 1,
                    "columns": {"answer": "4"},
                }
            )
    k = len(prompts[0][1]) - 1
    return {
        "k": k,
        "solved_by": "accuracy",
        "threshold": 1.0,
        "prompts": len(prompts),
        "metrics": metrics(rows, k),
        "seconds": 1.5,
        "rows": rows,
    }


def add_evaluation(run, label, *, step=None, kind="standalone", split="all", **fields) -> Evaluation:
    return Evaluation.objects.create(
        run=run,
        kind=kind,
        step=step,
        label=label,
        model="tiny",
        split=split,
        dataset_version=run.dataset_version,
        **fields,
    )


@pytest.fixture
def run(owner, dataset_version):
    return make_run(owner, dataset_version)


@pytest.fixture
def base(run):
    return add_evaluation(
        run, "base model", step=0, status="completed", k=2, prompts=4, solved_by="accuracy", metrics=BASE_METRICS
    )


@pytest.fixture
def final(run, base):
    evaluation = add_evaluation(run, "final model", step=10)
    store_eval_event(evaluation, eval_event(PROMPTS))
    return evaluation


def urls(run, evaluation):
    return [
        reverse("run_evaluations_json", args=[run.pk]),
        reverse("evaluation_detail", args=[run.pk, evaluation.pk]),
        reverse("evaluation_jsonl", args=[run.pk, evaluation.pk]),
    ]


def form_data(run, **changes) -> dict:
    return {
        "model": "base",
        "model_path": "",
        "dataset_version": run.dataset_version_id,
        "split": "all",
        "eval_num_samples": 2,
        "eval_max_prompts": 4,
        "eval_temperature": 1.0,
        "eval_solved_by": "",
        "eval_threshold": 1.0,
        **changes,
    }


# --- access --------------------------------------------------------------------------------------------------------


def test_an_outsider_gets_404_on_every_evaluation_url_and_starts_nothing(outsider_client, run, final):
    for url in urls(run, final):
        assert outsider_client.get(url).status_code == 404, url
    assert outsider_client.post(reverse("run_evaluate", args=[run.pk]), form_data(run)).status_code == 404
    assert Evaluation.objects.count() == 2


def test_the_owner_gets_each(owner_client, run, final):
    for url in urls(run, final):
        assert owner_client.get(url).status_code == 200, url


def test_an_evaluation_is_found_only_under_its_own_run(owner_client, owner, dataset_version, run, final):
    other = make_run(owner, dataset_version, "other")
    assert owner_client.get(reverse("evaluation_detail", args=[other.pk, final.pk])).status_code == 404
    assert owner_client.get(reverse("evaluation_jsonl", args=[other.pk, final.pk])).status_code == 404


# --- the form ------------------------------------------------------------------------------------------------------


def test_a_valid_form_queues_one_evaluation_with_its_settings(owner_client, run, settings):
    response = owner_client.post(reverse("run_evaluate", args=[run.pk]), form_data(run, eval_solved_by="accuracy"))
    assert response.status_code == 302 and response["Location"] == f"/runs/{run.pk}/#evaluations"
    evaluation = Evaluation.objects.get()
    assert (evaluation.kind, evaluation.label, evaluation.step, evaluation.status) == (
        "standalone",
        "base model",
        0,
        "queued",
    )
    assert evaluation.model == str(settings.GRPO_TINY_MODEL_DIR) and evaluation.split == "all"
    assert evaluation.settings["eval_num_samples"] == 2 and evaluation.settings["eval_max_prompts"] == 4
    assert evaluation.settings["eval_solved_by"] == "accuracy"


def test_the_generation_length_is_shown_as_the_runs_taken_from_the_form_and_stated(owner_client, run):
    page = owner_client.get(reverse("run_detail", args=[run.pk])).content.decode()
    assert re.search(r'name="eval_max_new_tokens" value="16"', page)  # the run's max_completion_length, visible
    owner_client.post(reverse("run_evaluate", args=[run.pk]), form_data(run, eval_max_new_tokens=48))
    owner_client.post(reverse("run_evaluate", args=[run.pk]), form_data(run))  # left out: the run's
    longer, default = Evaluation.objects.order_by("pk")
    assert longer.settings["eval_max_new_tokens"] == 48 and default.settings["eval_max_new_tokens"] == 0
    rows = owner_client.get(reverse("run_evaluations_json", args=[run.pk])).json()["evaluations"]
    assert [(r["max_new_tokens"], r["temperature"]) for r in rows] == [(48, 1.0), (16, 1.0)]


@pytest.mark.parametrize(
    "changes, error",
    [
        ({"split": "eval"}, "dataset: arithmetic v1 has no eval split"),
        (
            {"model": "checkpoint-99"},
            "model: Select a valid choice. checkpoint-99 is not one of the available choices.",
        ),
        ({"model": "path", "model_path": "  "}, "model path: give a model folder or a hub id"),
        ({"model": "path", "model_path": "/nonexistent/model"}, "model: not found or not yours"),
        ({"eval_solved_by": "length"}, "eval_solved_by: Select a valid choice. length is not one of the available"),
        ({"eval_num_samples": 0}, "eval_num_samples: Ensure this value is greater than or equal to 1."),
    ],
)
def test_bad_input_is_named_on_the_run_page_and_saves_nothing(owner_client, run, changes, error):
    response = owner_client.post(reverse("run_evaluate", args=[run.pk]), form_data(run, **changes))
    assert response.status_code == 400
    page = response.content.decode()
    assert error in page
    assert 'id="evaluate-errors"' in page and '<details id="evaluate-details" open>' in page
    assert not Evaluation.objects.exists()


def test_only_the_owners_dataset_versions_can_be_evaluated_on(owner_client, outsider, run):
    theirs = dataset_import(
        owner=outsider, name="theirs", stream=io.BytesIO(b'{"prompt": "hi"}\n'), source_name="t.jsonl"
    )
    response = owner_client.post(reverse("run_evaluate", args=[run.pk]), form_data(run, dataset_version=theirs.pk))
    assert response.status_code == 400 and "dataset_version: Select a valid choice." in response.content.decode()
    assert not Evaluation.objects.exists()


def test_the_form_offers_the_models_on_disk_and_starts_at_the_runs_settings(owner_client, run, settings, tmp_path):
    settings.DATA_DIR = tmp_path
    run.evaluation = {"eval_steps": 5, "eval_num_samples": 6, "eval_max_prompts": 12}
    run.save()
    (run.run_dir / "output" / "final").mkdir(parents=True)
    (run.run_dir / "output" / "final" / "config.json").write_text("{}")
    page = owner_client.get(reverse("run_detail", args=[run.pk])).content.decode()
    options = re.findall(r'<option value="([^"]*)"', page.split('id="id_model"')[1].split("</select>")[0])
    assert options == ["base", "final", "path"]
    assert re.search(r'name="eval_num_samples" value="6"', page)
    assert re.search(r'name="eval_max_prompts" value="12"', page)
    assert re.search(r'<option value="all" selected>', page)  # the run's version has no eval split


# --- evaluations.json ----------------------------------------------------------------------------------------------


def test_evaluations_json_holds_each_evaluation_and_the_change_against_the_base_model(owner_client, run, base, final):
    periodic = add_evaluation(
        run,
        "step 5",
        step=5,
        kind="periodic",
        split="eval",
        status="completed",
        k=2,
        prompts=4,
        solved_by="accuracy",
        metrics={"mean@k": 0.5},
    )
    failed = add_evaluation(run, "checkpoint-5", step=5, status="failed", error="OSError: no such model")
    data = owner_client.get(reverse("run_evaluations_json", args=[run.pk])).json()
    by_id = {e["id"]: e for e in data["evaluations"]}
    assert [e["id"] for e in data["evaluations"]] == [base.pk, final.pk, periodic.pk, failed.pk]
    assert data["active"] is False and data["reward_names"] == ["accuracy", "digit_ratio"]

    f = by_id[final.pk]
    assert f["metrics"] == {
        "mean@k": 0.5,
        "pass@k": 0.75,
        "maj@k": 0.5,
        "greedy": 0.5,
        "reward_mean@k": 1.375,
        "reward_greedy": 1.375,
        "answer_rate": 1.0,
    }
    assert (f["label"], f["kind"], f["step"], f["status"], f["k"], f["prompts"], f["split"]) == (
        "final model",
        "standalone",
        10,
        "completed",
        2,
        4,
        "all",
    )
    assert f["solved_by"] == "accuracy" and f["threshold"] == 1.0 and f["seconds"] == 1.5
    assert f["dataset_version"] == "arithmetic v1" and f["dataset_url"] == run.dataset_version.get_absolute_url()
    assert f["url"] == f"/runs/{run.pk}/evaluations/{final.pk}/"
    assert f["jsonl_url"] == f"/runs/{run.pk}/evaluations/{final.pk}.jsonl"
    assert f["delta"]["base"] == base.pk and f["delta"]["base_label"] == "base model"
    assert f["delta"]["metrics"] == pytest.approx(
        {"mean@k": 0.25, "pass@k": 0.25, "maj@k": 0.25, "greedy": 0.25, "reward_mean@k": 0.625}
    )
    assert by_id[base.pk]["delta"] is None  # the base itself
    assert by_id[periodic.pk]["delta"] is None  # other prompts (the eval split): not comparable
    assert by_id[failed.pk]["error"] == "OSError: no such model" and by_id[failed.pk]["delta"] is None


def test_evaluations_json_is_active_while_one_is_queued(owner_client, run, final):
    add_evaluation(run, "checkpoint-5", step=5)
    assert owner_client.get(reverse("run_evaluations_json", args=[run.pk])).json()["active"] is True


# --- browsing the completions --------------------------------------------------------------------------------------


def shown(client, run, evaluation, query="") -> list[int]:
    response = client.get(reverse("evaluation_detail", args=[run.pk, evaluation.pk]) + query)
    assert response.status_code == 200
    return [int(i) for i in re.findall(r'data-prompt="(\d+)"', response.content.decode())]


def test_the_filters_pick_the_prompts_the_figures_count_as_wrong(owner_client, run, final):
    assert shown(owner_client, run, final) == [0, 1, 2, 3]
    assert shown(owner_client, run, final, "?show=greedy_wrong") == [1, 3]  # greedy 0.5 of 4
    assert shown(owner_client, run, final, "?show=unsolved") == [2]  # pass@k 0.75 of 4
    assert shown(owner_client, run, final, "?show=maj_wrong") == [1, 2]  # maj@k 0.5 of 4
    assert shown(owner_client, run, final, "?q=NEEDLE") == [2]  # in the prompt
    assert shown(owner_client, run, final, "?q=onerror") == [3]  # in a completion
    assert shown(owner_client, run, final, "?show=greedy_wrong&q=needle") == []


def test_wrong_completions_with_a_high_reward_are_shown_alone(owner_client, run, final):
    url = reverse("evaluation_detail", args=[run.pk, final.pk]) + "?correct=no&reward_min=1.5"
    page = owner_client.get(url).content.decode()
    assert re.findall(r'data-prompt="(\d+)"', page) == ["3"]
    assert re.findall(r'<tr data-sample="(\d+)"', page) == ["1"]


def test_a_prompt_shows_its_samples_the_greedy_one_and_the_majority_vote(owner_client, run, final):
    page = owner_client.get(reverse("evaluation_detail", args=[run.pk, final.pk]) + "?q=3+%2B+4").content.decode()
    rows = re.findall(r'<tr data-sample="(\d+)"( data-greedy="1")?', page)
    assert rows == [("0", ""), ("1", ""), ("2", ' data-greedy="1"')]
    assert re.search(r'data-field="greedy">greedy ✗', page) and re.search(r'data-field="pass">pass@2 ✓', page)
    assert re.search(r"maj@2 ✗:\s+voted “5”", page)
    assert page.count('title="maj@k voted for this sample\'s answer"') == 1


def test_bad_filters_are_named(owner_client, run, final):
    response = owner_client.get(reverse("evaluation_detail", args=[run.pk, final.pk]) + "?reward_min=lots")
    assert response.status_code == 400 and "reward_min: Enter a number." in response.content.decode()
    assert owner_client.get(reverse("evaluation_jsonl", args=[run.pk, final.pk]) + "?show=x").status_code == 400


def test_prompts_come_twenty_a_page(owner_client, run):
    evaluation = add_evaluation(run, "checkpoint-5", step=5)
    store_eval_event(
        evaluation, eval_event([(f"What is {i} + 1?", [("1", 1.0, 1.0), ("1", 1.0, 1.0)]) for i in range(23)])
    )
    assert shown(owner_client, run, evaluation) == list(range(20))
    assert shown(owner_client, run, evaluation, "?page=2") == [20, 21, 22]
    assert shown(owner_client, run, evaluation, "?page=9") == [20, 21, 22]


def test_model_text_is_escaped(owner_client, run, final):
    page = owner_client.get(reverse("evaluation_detail", args=[run.pk, final.pk])).content.decode()
    assert "&lt;img src=x onerror=alert(1)&gt; 11" in page
    assert "<img src=x" not in page


# --- the export ----------------------------------------------------------------------------------------------------


def exported(client, url) -> list[dict]:
    response = client.get(url)
    assert response.status_code == 200 and response.streaming
    with pytest.warns(Warning, match="consume asynchronous iterators"):
        return [json.loads(line) for line in b"".join(response).decode().splitlines()]


def test_the_jsonl_export_holds_every_completion_or_the_filtered_ones(owner_client, run, final):
    url = reverse("evaluation_jsonl", args=[run.pk, final.pk])
    rows = exported(owner_client, url)
    assert [(r["prompt_index"], r["sample"], r["greedy"]) for r in rows] == [
        (p, s, s == 2) for p in range(4) for s in range(3)
    ]
    assert rows[0] == {
        "evaluation": final.pk,
        "label": "final model",
        "prompt_index": 0,
        "sample": 0,
        "greedy": False,
        "prompt": "What is 2 + 2?",
        "completion": "4",
        "rewards": {"accuracy": 1.0, "digit_ratio": 1.0},
        "reward": 2.0,
        "correct": True,
        "answer": "4",
        "length": 3,
        "truncated": False,
        "columns": {"answer": "4"},
    }
    hacked = exported(owner_client, url + "?correct=no&reward_min=1.5")
    assert [(r["prompt_index"], r["sample"], r["completion"]) for r in hacked] == [(3, 1, XSS)]
    assert [r["prompt_index"] for r in exported(owner_client, url + "?show=unsolved")] == [2, 2, 2]


# --- the run's charts and the comparison ---------------------------------------------------------------------------


def test_periodic_eval_curves_are_charted_after_the_training_metrics(run):
    StepMetric.objects.create(run=run, step=1, metrics={"reward": 0.5, "loss": 0.1})
    StepMetric.objects.create(run=run, step=2, metrics={"reward": 0.6, "val-core/arithmetic/acc/mean@4": 0.25})
    assert metric_series(run)["charts"] == ["reward", "loss", "val-core/arithmetic/acc/mean@4"]


def test_the_compare_page_lists_each_runs_completed_evaluations(owner_client, owner, dataset_version, run, base, final):
    other = make_run(owner, dataset_version, "other")
    add_evaluation(other, "final model", step=10, status="completed", k=2, metrics={"mean@k": 0.875, "greedy": 1.0})
    add_evaluation(other, "checkpoint-5", step=5)  # queued: not compared
    page = owner_client.get(reverse("run_compare"), {"runs": f"{other.pk},{run.pk}"}).content.decode()
    table = page.split('id="compare-evaluations"')[1].split("</table>")[0]
    rows = [re.findall(r'<td class="num">([^<]*)</td>', row) for row in table.split("<tr data-run=")[1:]]
    assert rows == [
        ["2", "0.875", "–", "–", "1.000"],
        ["2", "0.250", "0.500", "0.250", "0.250"],
        ["2", "0.500", "0.750", "0.500", "0.500"],
    ]
