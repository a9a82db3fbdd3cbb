"""The workers page: each Celery worker's host, GPUs and queues, whether it is online, and the run it trains."""

from __future__ import annotations

from datetime import timedelta

from django.shortcuts import render
from django.utils import timezone

from runs.models import Run
from workers.models import Worker


def workers_list(request):
    fresh = timezone.now() - timedelta(minutes=2)
    workers = list(Worker.objects.all())
    busy = dict(Run.objects.filter(status=Run.Status.RUNNING).values_list("worker_name", "name"))
    return render(request, "workers/workers.html", {
        "workers": [{"w": w, "online": w.last_seen >= fresh, "running": busy.get(w.name)} for w in workers]})
