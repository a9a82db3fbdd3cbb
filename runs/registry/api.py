"""The JSON API over the model registry: the models runs made and the base models, with lineage (grpo_web/api.py
mounts this router at /api/)."""

from __future__ import annotations

from django.urls import reverse
from ninja import Router

from runs.registry.selectors import registry

router = Router()


@router.get(
    "/models",
    response=list[dict],
    tags=["models"],
    summary="Models your runs made and the base models they started from, with lineage",
)
def models_list(request):
    def parent(entry):
        if entry.parent is None:
            return None
        return entry.parent.key if entry.parent.is_base else {"run_id": entry.parent.run.pk, "key": entry.parent.key}

    return [
        {
            "key": e.key,
            "path": e.path,
            "base": e.is_base,
            "run_id": e.run.pk if e.run else None,
            "kind": e.run.kind if e.run else None,
            "from": parent(e),
            "used_by": [r.pk for r in e.used_by],
            "download": reverse("model_download", args=[e.run.pk, e.key]) if e.run else None,
            # a LoRA run's final model: its adapter alone, too
            "adapter_download": reverse("model_adapter_download", args=[e.run.pk]) if e.adapter else None,
        }
        for e in registry(request.user)
    ]
