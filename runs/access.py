"""What every capability's views share: who may see or change an object (grpo_web.sharing), and streaming a large
response under ASGI."""

from __future__ import annotations

from collections.abc import Iterator

from asgiref.sync import sync_to_async
from django.shortcuts import get_object_or_404

from runs.models import Dataset, DatasetVersion, Run


def visible_run(request, pk) -> Run:
    """The run ``pk`` when the signed-in user owns it or a team of theirs shares it; 404 otherwise (an outsider
    cannot tell it exists)."""
    return get_object_or_404(Run.objects.visible_to(request.user), pk=pk)


def writable_run(request, pk) -> Run:
    """The run ``pk`` when the user may change it (cancel, resume, evaluate...): its owner, or a team shares it for
    writing. A reader who may only see it gets the same 404 as an outsider."""
    return get_object_or_404(Run.objects.visible_to(request.user, write=True), pk=pk)


def visible_versions(user):
    """Dataset versions the user may train or evaluate on: of their datasets and of those shared with them."""
    return DatasetVersion.objects.filter(dataset__in=Dataset.objects.visible_to(user))


async def async_chunks(chunks: Iterator[bytes]):
    """Serve a synchronous generator under ASGI one chunk at a time (Django would otherwise read it whole into
    memory first); each step runs in the thread that holds the database connection."""
    step = sync_to_async(next, thread_sensitive=True)
    while (chunk := await step(chunks, None)) is not None:
        yield chunk
