"""The workers page: each Celery worker's host, GPUs and queues, whether it is online, and the run it trains (its
name only to those who may see the run; to anyone else the worker is just busy)."""

from __future__ import annotations

from django.shortcuts import render

from runs.models import Run, Worker


def workers_list(request):
    running = Run.objects.filter(status=Run.Status.RUNNING)
    visible = set(Run.objects.visible_to(request.user).filter(status=Run.Status.RUNNING).values_list("pk", flat=True))
    busy = {worker: (pk in visible, pk, name) for worker, pk, name in running.values_list("worker_name", "pk", "name")}
    return render(
        request,
        "workers/workers.html",
        {"workers": [{"w": w, "online": w.online, "running": busy.get(w.name)} for w in Worker.objects.all()]},
    )
