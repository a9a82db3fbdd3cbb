"""The attach API (mounted by grpo_web/api.py at /api/attach/): a client in the user's own training script
(the grpo-web-attach package, attach/) creates its run, sends its spool in gzip'd batches at their byte offsets (and,
when it samples tokens, each optimizer step's token shard), beats while it trains, and says how the run ended. A token of scope attach reaches only these endpoints; each run
is its owner's alone (another user's run answers 404) and the client proves it is the run's with its resume key."""

from __future__ import annotations

import zlib
from typing import Annotated

from django.conf import settings
from django.http import Http404
from ninja import Router, Schema, Status
from ninja.errors import HttpError
from pydantic import BaseModel, Field, StringConstraints

from runs.attach.checks import EventRefused
from runs.attach.services import (
    AttachRefused,
    OffsetGap,
    attached_batch_append,
    attached_run_create,
    attached_shard_store,
    external_run_finish,
    external_run_heartbeat,
    resume_key_hash,
)
from runs.attach.shards import ShardRefused
from runs.models import Run

router = Router(tags=["attach"])


# the record's parts are plain pydantic models: ninja's Schema reads attributes off any object, so a string given
# for a record would pass as an empty one
class GitIn(BaseModel):
    commit: str = Field(max_length=100)
    branch: str = Field("", max_length=300)
    dirty: bool = False
    changed: list[Annotated[str, StringConstraints(max_length=1000)]] = Field(default_factory=list, max_length=50)


class ScriptIn(BaseModel):
    path: str = Field(max_length=4000)
    sha256: str = Field(max_length=64)
    source: str = Field("", max_length=256 * 1024)
    truncated: bool = False
    git: GitIn | None = None


class AcceleratorIn(BaseModel):
    cuda: str = Field("", max_length=100)
    driver: str = Field("", max_length=100)
    devices: list[Annotated[str, StringConstraints(max_length=300)]] = Field(default_factory=list, max_length=64)


class ProvenanceIn(BaseModel):
    """The script's reproducibility record (grpo_web_attach.provenance.record)."""

    libraries: dict[
        Annotated[str, StringConstraints(max_length=100)], Annotated[str, StringConstraints(max_length=100)]
    ] = Field(default_factory=dict, max_length=64)
    python: str = Field("", max_length=100)
    platform: str = Field("", max_length=300)
    host: str = Field("", max_length=1000)
    command: str = Field("", max_length=10000)
    seed: int | None = None
    accelerator: AcceleratorIn = Field(default_factory=AcceleratorIn)
    script: ScriptIn | None = None


class AttachIn(Schema):
    name: str = Field("", max_length=200, description="The run's name on grpo-web.")
    model: str = Field("", max_length=500, description="The model id or path the script trains.")
    config: dict = Field(default_factory=dict, description="The GRPOConfig, as GRPOConfig.to_dict() gives it.")
    reward_names: list[str] = Field(default_factory=list, max_length=100, description="TRL's reward_func_names.")
    reward_sources: dict[str, str] = Field(default_factory=dict, description="Each reward function's source.")
    dataset_label: str = Field("", max_length=500, description="The dataset's name, as the script knows it.")
    host: str = Field("", max_length=1000)
    command: str = Field("", max_length=10000)
    provenance: ProvenanceIn | None = Field(None, description="Library versions, git state, seed, the script.")


class AttachOut(Schema):
    id: int
    resume_key: str = Field(description="Kept beside the client's spool; sent with every later call.")
    url: str


class KeyIn(Schema):
    resume_key: str = Field(max_length=200)


class FinishIn(KeyIn):
    failed: bool = False
    error: str = Field("", max_length=10000)


class Taken(Schema):
    taken: int = Field(description="Bytes of the spool the server has taken; send from there.")
    steps: list[int] = []
    rollouts: int = 0


class ShardTaken(Schema):
    step: int = Field(description="The optimizer step whose shard the run now holds.")
    rows: int = Field(description="Completions in it.")
    bytes: int


class Gap(Schema):
    detail: str
    expected: int


class Detail(Schema):
    detail: str


def attached_run(request, run_id: int, key: str) -> Run:
    run = Run.objects.filter(pk=run_id, owner=request.user, origin=Run.Origin.ATTACHED).first()
    if run is None:
        raise Http404("no such attached run of yours")
    if not key or resume_key_hash(key) != run.resume_key_hash:
        raise HttpError(403, "resume_key: not this run's key (it is in the spool folder's run.json)")
    return run


@router.post(
    "/attach/runs",
    response={200: AttachOut, 400: Detail, 429: Detail},
    summary="Create an attached run (a client in a training script)",
)
def attach_create(request, body: AttachIn):
    try:
        run, key = attached_run_create(
            owner=request.user,
            name=body.name,
            model=body.model,
            config=body.config,
            reward_names=body.reward_names,
            reward_sources=body.reward_sources,
            dataset_label=body.dataset_label,
            host=body.host,
            command=body.command,
            provenance=body.provenance.model_dump(exclude_none=True) if body.provenance else {},
        )
    except AttachRefused as exc:
        return Status(exc.status, {"detail": str(exc)})
    return {"id": run.pk, "resume_key": key, "url": run.get_absolute_url()}


def expanded(
    request, body_limit: int | None = None, limit: int | None = None, hint: str = "send smaller batches"
) -> bytes:
    """The request body, gunzipped when it says it is gzip; refused past ``body_limit`` bytes as sent and ``limit``
    expanded (the batch limits by default)."""
    body_limit = settings.GRPO_ATTACH_MAX_BATCH_BYTES if body_limit is None else body_limit
    limit = settings.GRPO_ATTACH_MAX_EXPANDED_BYTES if limit is None else limit
    data = request.read(body_limit + 1)
    if len(data) > body_limit:
        raise HttpError(413, f"body: larger than {body_limit} bytes; {hint}")
    encoding = request.headers.get("Content-Encoding", "").strip().lower()
    if encoding in ("", "identity"):
        raw = data
    elif encoding == "gzip":
        inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            raw = inflate.decompress(data, limit + 1)
        except zlib.error as exc:
            raise HttpError(400, f"body: not valid gzip ({exc})") from None
        if len(raw) > limit:
            raise HttpError(413, f"body: expands past {limit} bytes; {hint}")
        if not inflate.eof:
            raise HttpError(400, "body: the gzip stream is cut short")
    else:
        raise HttpError(415, f"Content-Encoding: gzip or none, not {encoding[:40]!r}")
    if len(raw) > limit:
        raise HttpError(413, f"body: larger than {limit} bytes; {hint}")
    return raw


@router.post(
    "/attach/runs/{int:run_id}/events",
    response={200: Taken, 400: Detail, 409: Gap},
    summary="Append a batch of the client's spool (event-log lines) that starts at byte `offset` of it",
    openapi_extra={
        "requestBody": {"content": {"application/x-ndjson": {"schema": {"type": "string", "format": "binary"}}}}
    },
)
def attach_events(request, run_id: int, offset: int = 0):
    run = attached_run(request, run_id, request.headers.get("X-Resume-Key", ""))
    if offset < 0:
        raise HttpError(400, "offset: must be 0 or more")
    data = expanded(request)
    try:
        answer = attached_batch_append(run=run, data=data, offset=offset)
    except OffsetGap as gap:
        return 409, {"detail": str(gap), "expected": gap.expected}
    except EventRefused as exc:
        return 400, {"detail": f"nothing was stored: {exc}"}
    return answer


@router.put(
    "/attach/runs/{int:run_id}/tokens/{int:step}",
    response={200: ShardTaken, 400: Detail, 413: Detail},
    summary="Store the token shard of optimizer step `step` (a Parquet file, grpo_web_attach.tokens.shard_schema)",
    description="The per-token values a client with `token_sample_groups` kept at one optimizer step, as its Parquet "
    "file (gzip'd or not); it takes the place of one sent before for the step. Refused whole, naming the column and "
    "row, unless it has exactly a token shard's columns and types and every row was computed at this step.",
    openapi_extra={
        "requestBody": {
            "content": {"application/vnd.apache.parquet": {"schema": {"type": "string", "format": "binary"}}}
        }
    },
)
def attach_tokens(request, run_id: int, step: int):
    run = attached_run(request, run_id, request.headers.get("X-Resume-Key", ""))
    limit = settings.GRPO_ATTACH_MAX_SHARD_BYTES
    data = expanded(
        request, limit, limit, "nothing was stored (the server takes shards up to GRPO_ATTACH_MAX_SHARD_BYTES)"
    )
    try:
        return attached_shard_store(run=run, step=step, data=data)
    except ShardRefused as exc:
        return exc.status, {"detail": f"nothing was stored: {exc}"}


@router.post("/attach/runs/{int:run_id}/heartbeat", response={200: Taken}, summary="The client is alive")
def attach_heartbeat(request, run_id: int, body: KeyIn):
    run = attached_run(request, run_id, body.resume_key)
    external_run_heartbeat(run=run)
    return {"taken": run.received_bytes}


@router.post("/attach/runs/{int:run_id}/finish", response={200: Taken}, summary="The run ended (or failed)")
def attach_finish(request, run_id: int, body: FinishIn):
    run = attached_run(request, run_id, body.resume_key)
    external_run_finish(run=run, failed=body.failed, error=body.error)
    return {"taken": run.received_bytes}
