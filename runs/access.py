"""What every capability's views share: who may see or change an object (grpo_web.sharing), and streaming a large
response under ASGI."""

from __future__ import annotations

from collections.abc import Iterator

from asgiref.sync import sync_to_async
from django.db.models import Q
from django.http import Http404
from django.shortcuts import get_object_or_404

from runs.models import Dataset, DatasetVersion, Evaluation, Run


def visible_run(request, pk) -> Run:
    """The run ``pk`` when the signed-in user owns it or a team of theirs shares it; 404 otherwise (an outsider
    cannot tell it exists)."""
    return get_object_or_404(Run.objects.visible_to(request.user), pk=pk)


def writable_run(request, pk) -> Run:
    """The run ``pk`` when the user may change it (cancel, resume, evaluate...): its owner, or a team shares it for
    writing. A reader who may only see it gets the same 404 as an outsider."""
    return get_object_or_404(Run.objects.visible_to(request.user, write=True), pk=pk)


def visible_versions(user):
    """Dataset versions the user may read, train or evaluate on: of their datasets and of those shared with them, and
    the data of every run they may see (sharing a run shares, read-only, what it trained and was evaluated on: a team
    member who opens a shared run's dataset must not get a 404)."""
    runs = Run.objects.visible_to(user)
    return DatasetVersion.objects.filter(
        Q(dataset__in=Dataset.objects.visible_to(user))
        | Q(pk__in=runs.values("dataset_version"))
        | Q(pk__in=Evaluation.objects.filter(run__in=runs).values("dataset_version"))
    )


def visible_version(request, dataset_id, number=None) -> DatasetVersion:
    """Version ``number`` (the latest the user may read, without one) of dataset ``dataset_id``, when the user may
    read it (visible_versions); 404 otherwise."""
    versions = visible_versions(request.user).filter(dataset_id=dataset_id).select_related("dataset", "dataset__owner")
    version = versions.filter(number=number).first() if number else versions.order_by("-number").first()
    if version is None:
        raise Http404("no such dataset version")
    return version


async def async_chunks(chunks: Iterator[bytes]):
    """Serve a synchronous generator under ASGI one chunk at a time (Django would otherwise read it whole into
    memory first); each step runs in the thread that holds the database connection."""
    step = sync_to_async(next, thread_sensitive=True)
    while (chunk := await step(chunks, None)) is not None:
        yield chunk
