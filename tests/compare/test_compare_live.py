"""While compared runs train, one event stream carries every run's new steps, naming the run."""

import asyncio
import json

import pytest
from asgiref.sync import async_to_sync
from django.test import AsyncClient
from django.urls import reverse

from runs.live import publish
from runs.models import Run
from tests.compare.compare_data import make_run

pytestmark = pytest.mark.django_db


def test_the_stream_passes_on_each_runs_pushes_with_its_id(owner, dataset_version, redis_service):
    a = make_run(owner, dataset_version, "a", status=Run.Status.RUNNING)
    b = make_run(owner, dataset_version, "b", status=Run.Status.RUNNING)
    client = AsyncClient()
    client.force_login(owner)

    async def read():
        response = await client.get(reverse("run_compare_events"), {"runs": f"{a.pk},{b.pk}"})
        assert response.status_code == 200
        assert response["Content-Type"] == "text/event-stream"
        chunks = aiter(response.streaming_content)
        first = await asyncio.wait_for(anext(chunks), 10)
        assert b"event: open" in first  # subscribed: what is published from now on arrives
        received = []
        for run in (b, a):
            await asyncio.to_thread(publish, run.pk, status="running", step=3, steps=[3], rollouts=8)
            chunk = b": keep-alive"
            while chunk.startswith(b":"):  # comments keep the connection open; data lines carry the pushes
                chunk = await asyncio.wait_for(anext(chunks), 10)
            received.append(json.loads(chunk.decode().removeprefix("data: ").strip()))
        await chunks.aclose()
        return received

    assert async_to_sync(read)() == [
        {"status": "running", "step": 3, "steps": [3], "rollouts": 8, "run": b.pk},
        {"status": "running", "step": 3, "steps": [3], "rollouts": 8, "run": a.pk},
    ]
