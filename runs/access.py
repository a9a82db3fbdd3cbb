"""What every capability's views share: the owner check, and streaming a large response under ASGI."""

from __future__ import annotations

from collections.abc import Iterator

from asgiref.sync import sync_to_async
from django.shortcuts import get_object_or_404

from runs.models import Run


def owned_run(request, pk) -> Run:
    """The run ``pk`` when the signed-in user owns it; 404 otherwise (an outsider cannot tell it exists)."""
    return get_object_or_404(Run, pk=pk, owner=request.user)


async def async_chunks(chunks: Iterator[bytes]):
    """Serve a synchronous generator under ASGI one chunk at a time (Django would otherwise read it whole into
    memory first); each step runs in the thread that holds the database connection."""
    step = sync_to_async(next, thread_sensitive=True)
    while (chunk := await step(chunks, None)) is not None:
        yield chunk
