"""Reads of the recipes capability: a recipe's pipeline as its page draws it."""

from __future__ import annotations

from django.urls import reverse

from runs.models import Recipe


def pipeline(recipe: Recipe) -> list[dict]:
    """Per stage: its number, kind, name, inputs, status, the link to its run, job or evaluation, and key figures."""
    out = []
    for n, (stage, output) in enumerate(zip(recipe.stages, recipe.outputs + [{}] * len(recipe.stages)), start=1):
        link = None
        if output.get("run"):
            link = reverse("run_detail", args=[output["run"]])
        elif output.get("job"):
            link = reverse("rejection_job_detail", args=[output["job"]])
        elif output.get("evaluation"):
            link = None
        status = output.get("status") or "waiting"
        out.append({"n": n, "kind": stage.get("kind"), "name": stage.get("name") or stage.get("kind"),
                    "model": stage.get("model"), "dataset": stage.get("dataset"), "status": status, "link": link,
                    "figures": output.get("figures") or {}, "error": output.get("error", "")})
    return out
