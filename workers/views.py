"""The workers page: each Celery worker's host, GPUs and queues, whether it is online, and the run it trains."""

from __future__ import annotations

from django.shortcuts import render

from runs.models import Run, Worker


def workers_list(request):
    busy = dict(Run.objects.filter(status=Run.Status.RUNNING).values_list("worker_name", "name"))
    return render(request, "workers/workers.html", {
        "workers": [{"w": w, "online": w.online, "running": busy.get(w.name)} for w in Worker.objects.all()]})
