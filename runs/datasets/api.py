"""The JSON API over datasets and their versions: list, read, page through rows, upload (grpo_web/api.py mounts
this router at /api/)."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from ninja import File, Form, Query, Router, Schema, Status
from ninja.files import UploadedFile
from pydantic import Field

from grpo_web.removal import delete_answer
from runs.access import visible_version, visible_versions
from runs.apischemas import Errors
from runs.datasets import selectors as dataset_selectors
from runs.datasets.importing import DatasetError
from runs.datasets.services import dataset_import
from runs.deletion.services import dataset_delete
from runs.models import Dataset, DatasetVersion

router = Router()


class VersionOut(Schema):
    id: int
    number: int
    row_count: int
    columns: list[str]
    train_rows: int
    eval_rows: int
    prompt_format: str
    source_name: str
    created_at: str
    url: str


class DatasetOut(Schema):
    id: int
    name: str
    owner: str
    shared: bool = Field(description="True when a team shares it with you (you are not its owner).")
    created_at: str
    latest_version: VersionOut | None
    url: str
    versions: list[VersionOut] | None = Field(None, description="Every version, newest first (with versions=true).")


class DatasetDetail(DatasetOut):
    versions: list[VersionOut]


class RowsOut(Schema):
    rows: list[dict]
    columns: list[str]
    page: int
    pages: int
    total: int


def _version(v: DatasetVersion) -> dict:
    return {
        "id": v.pk,
        "number": v.number,
        "row_count": v.row_count,
        "columns": list(v.columns or []),
        "train_rows": v.train_rows,
        "eval_rows": v.eval_rows,
        "prompt_format": v.prompt_format,
        "source_name": v.source_name,
        "created_at": v.created_at.isoformat(),
        "url": v.get_absolute_url(),
    }


def _dataset(d: Dataset, user, versions: list[DatasetVersion] | None = None) -> dict:
    versions = versions if versions is not None else sorted(d.versions.all(), key=lambda v: -v.number)
    return {
        "id": d.pk,
        "name": d.name,
        "owner": d.owner.username,
        "shared": d.owner_id != user.pk,
        "created_at": d.created_at.isoformat(),
        "latest_version": _version(versions[0]) if versions else None,
        "url": d.get_absolute_url(),
    }


@router.get(
    "/datasets", response=list[DatasetOut], tags=["datasets"], summary="Datasets you own or that are shared with you"
)
def datasets_list(
    request,
    scope: str = Query("", description="'mine', 'shared', or empty for both"),
    versions: bool = Query(False, description="also list every version of each dataset"),
):
    qs = Dataset.objects.visible_to(request.user).select_related("owner").prefetch_related("versions")
    if scope == "mine":
        qs = qs.filter(owner=request.user)
    elif scope == "shared":
        qs = qs.exclude(owner=request.user)
    out = []
    for d in qs[:1000]:
        listed = sorted(d.versions.all(), key=lambda v: -v.number)
        out.append(
            {**_dataset(d, request.user, listed), "versions": [_version(v) for v in listed] if versions else None}
        )
    return out


@router.get("/datasets/{int:dataset_id}", response=DatasetDetail, tags=["datasets"])
def dataset_get(request, dataset_id: int):
    d = visible_version(request, dataset_id).dataset  # a team that may read a run may read its data
    readable = set(visible_versions(request.user).filter(dataset=d).values_list("pk", flat=True))
    versions = [v for v in dataset_selectors.dataset_versions(d) if v.pk in readable]
    return {**_dataset(d, request.user, versions), "versions": [_version(v) for v in versions]}


@router.get(
    "/datasets/{int:dataset_id}/versions/{int:number}/rows",
    response=RowsOut,
    tags=["datasets"],
    summary="One page of a version's rows, optionally searched",
)
def dataset_rows(request, dataset_id: int, number: int, q: str = Query("", max_length=200), page: int = Query(1, ge=1)):
    version = visible_version(request, dataset_id, number)
    rows = dataset_selectors.dataset_rows(version, q=q.replace("\x00", ""), page=page)
    columns = list(version.columns or [])
    return {
        "rows": [{"row": number, **dict(zip(columns, cells))} for number, cells in rows.rows],
        "columns": columns,
        "page": rows.number,
        "pages": rows.pages,
        "total": rows.total,
    }


def _upload(request, *, file: UploadedFile, name: str, dataset: Dataset | None, prompt_column: str, gsm8k_column: str):
    try:
        version = dataset_import(
            owner=request.user,
            name=name,
            dataset=dataset,
            stream=file,
            source_name=file.name or "upload",
            prompt_column=prompt_column,
            gsm8k_column=gsm8k_column.strip(),
        )
    except DatasetError as exc:
        return Status(400, {"errors": exc.errors})
    return Status(201, _version(version))


@router.post(
    "/datasets",
    response={201: VersionOut, 400: Errors},
    tags=["datasets"],
    summary="Upload a new dataset (JSONL, CSV, Parquet or JSON, as on the upload page)",
)
def dataset_create(
    request,
    file: File[UploadedFile],
    name: Form[str] = "",
    prompt_column: Form[str] = "prompt",
    gsm8k_column: Form[str] = "",
):
    return _upload(request, file=file, name=name, dataset=None, prompt_column=prompt_column, gsm8k_column=gsm8k_column)


@router.post(
    "/datasets/{int:dataset_id}/versions",
    response={201: VersionOut, 400: Errors},
    tags=["datasets"],
    summary="Upload a new version of a dataset you may change",
)
def dataset_version_create(
    request,
    dataset_id: int,
    file: File[UploadedFile],
    prompt_column: Form[str] = "prompt",
    gsm8k_column: Form[str] = "",
):
    dataset = get_object_or_404(Dataset.objects.visible_to(request.user, write=True), pk=dataset_id)
    return _upload(
        request, file=file, name=dataset.name, dataset=dataset, prompt_column=prompt_column, gsm8k_column=gsm8k_column
    )


@router.delete(
    "/datasets/{int:dataset_id}",
    response={204: None, 409: Errors},
    tags=["datasets"],
    summary="Delete a dataset of yours with its versions and files (409: the runs and jobs that still use it)",
)
def dataset_delete_api(request, dataset_id: int):
    dataset = get_object_or_404(Dataset, pk=dataset_id, owner=request.user)
    return delete_answer(lambda: dataset_delete(dataset=dataset, user=request.user))
