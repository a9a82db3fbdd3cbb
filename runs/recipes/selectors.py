"""Reads of the recipes capability: a recipe's pipeline as its page draws it (and its JSON gives it)."""

from __future__ import annotations

from django.urls import reverse

from runs.models import DatasetVersion, Recipe
from runs.registry.selectors import made_model

# the key figures a stage's box shows, per kind: (label, the name in the stage's recorded figures)
FIGURES = {
    "grpo": [("final reward", "reward")],
    "sft": [("final loss", "loss"), ("token accuracy", "mean_token_accuracy")],
    "rejection_sample": [("kept share", "kept_share"), ("kept", "kept"), ("mixed in", "mixed_in")],
    "eval": [("mean@k", "mean@k"), ("pass@k", "pass@k"), ("maj@k", "maj@k")],
}


def _input_label(value) -> str:
    if isinstance(value, str) and value.startswith("stage:"):
        return f"output of stage {value[6:]}"
    if isinstance(value, int):
        version = DatasetVersion.objects.select_related("dataset").filter(pk=value).first()
        return str(version) if version else f"dataset version {value}"
    return "" if value is None else str(value)


def _links(output: dict) -> list[dict]:
    """What a stage made or runs, each a {label, url}: its run, job or evaluation; the model it made (on the Models
    page, and its download); the dataset version it saved."""
    links = []
    if output.get("run"):
        links.append({"label": "run", "url": reverse("run_detail", args=[output["run"]])})
    if output.get("job"):
        links.append({"label": "sampling job", "url": reverse("rejection_job_detail", args=[output["job"]])})
    if output.get("evaluation") and output.get("evaluated_run"):
        links.append(
            {
                "label": "evaluation",
                "url": reverse("evaluation_detail", args=[output["evaluated_run"], output["evaluation"]]),
            }
        )
    made = made_model(output["model"]) if output.get("model") and output.get("status") == "completed" else None
    if made and output.get("run"):
        links.append({"label": "model", "url": reverse("models") + f"#model-{output['run']}-{made[1]}"})
        links.append({"label": "download", "url": reverse("model_download", args=[output["run"], made[1]])})
    if output.get("dataset_version"):
        version = DatasetVersion.objects.filter(pk=output["dataset_version"]).first()
        if version is not None:
            links.append(
                {"label": "dataset", "url": reverse("dataset_version", args=[version.dataset_id, version.number])}
            )
    return links


def pipeline(recipe: Recipe) -> list[dict]:
    """Per stage: its number, kind, name, inputs, status, links (run, job, evaluation, model, dataset) and its key
    figures as the page shows them ([{label, value}], value a float or an int)."""
    out = []
    for n, (stage, output) in enumerate(zip(recipe.stages, recipe.outputs + [{}] * len(recipe.stages)), start=1):
        figures = output.get("figures") or {}
        shown = [
            {"label": label, "key": key, "value": figures[key]}
            for label, key in FIGURES.get(stage.get("kind"), [])
            if isinstance(figures.get(key), (int, float)) and not isinstance(figures.get(key), bool)
        ]
        out.append(
            {
                "n": n,
                "kind": stage.get("kind"),
                "name": stage.get("name") or stage.get("kind"),
                "model": _input_label(stage.get("model")),
                "dataset": _input_label(stage.get("dataset")),
                "status": output.get("status") or "waiting",
                "links": _links(output),
                "figures": shown,
                "error": output.get("error", ""),
            }
        )
    return out


def pipeline_json(recipe: Recipe) -> dict:
    return {
        "id": recipe.pk,
        "status": recipe.status,
        "current": recipe.current + 1,
        "error": recipe.error,
        "stages": pipeline(recipe),
    }
