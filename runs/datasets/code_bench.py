"""The code_tests bench: a hand-written solution against one row's tests, run in the sandbox by a sandbox-queue
task (workers/code_bench.py) as the ``code_tests`` reward scores it. The page reads the row to show its tests; the
code runs only on the worker, never here."""

from __future__ import annotations

from django import forms
from django.http import Http404, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET, require_POST

from grpo_web import queues
from rewards.code_tests import parse_tests
from rewards.views import task_result_answer
from runs.access import visible_versions
from runs.datasets.mapping import Mapping, preview_rows
from runs.text import as_text

TESTS_COLUMN = "tests"  # the column code_tests reads
MAX_ROW = 10_000  # as workers/code_bench.py: rows read through to reach one
MAX_SOLUTION_CHARS = 1 << 20  # the sandbox's limit on code


class BenchRunForm(forms.Form):
    dataset_version = forms.IntegerField(min_value=1, max_value=(1 << 63) - 1)
    row = forms.IntegerField(min_value=1, max_value=MAX_ROW)
    solution = forms.CharField(strip=False, max_length=MAX_SOLUTION_CHARS)


def bench_row(version, row: int) -> dict | None:
    """Row ``row`` (1-based) of ``version`` as the trainer receives it ({"row", "prompt", "rewards"}); None when
    there is no such row (or it lies past MAX_ROW)."""
    if not 1 <= row <= min(version.row_count, MAX_ROW):
        return None
    rows = preview_rows(version.path, Mapping.of(version), row)
    return rows[row - 1] if len(rows) >= row else None


def test_label(case: dict) -> str:
    """A parsed test as the bench shows it."""
    return case["assert"] if "assert" in case else f"stdin: {case['stdin']!r} -> stdout: {case['stdout']!r}"


def _bench_versions(user):
    """The versions the user may see whose mapping passes a ``tests`` column to rewards, newest first."""
    versions = visible_versions(user).select_related("dataset").order_by("dataset__name", "-number")
    return [v for v in versions if TESTS_COLUMN in (v.reward_columns or [])]


def _int(value, default: int) -> int:
    """A query's whole number, ``default`` when it is none or out of a database id's range."""
    try:
        number = int(value)
    except (TypeError, ValueError):
        return default
    return number if 0 <= number < 1 << 63 else default


@require_GET
def code_tests_bench(request):
    """The bench page: ``?version=`` (a version the user may see, else 404) and ``?row=`` pick the row."""
    versions = _bench_versions(request.user)
    version, error, shown = None, None, None
    wanted = request.GET.get("version")
    if wanted:
        version = visible_versions(request.user).select_related("dataset").filter(pk=_int(wanted, 0)).first()
        if version is None:
            raise Http404("no such dataset version")
    elif versions:
        version = versions[0]
    last = min(version.row_count, MAX_ROW) if version else 0
    row = _int(request.GET.get("row"), 1)
    if version is not None and TESTS_COLUMN not in (version.reward_columns or []):
        error = f"{version.dataset.name} v{version.number} passes no `{TESTS_COLUMN}` column to rewards: code_tests has nothing to run."
    elif version is not None and not 1 <= row <= last:
        error = f"row {row}: this version has rows 1 to {last}."
    elif version is not None:
        data = bench_row(version, row)
        try:
            tests = parse_tests(data["rewards"][TESTS_COLUMN])
        except (ValueError, TypeError, AttributeError) as exc:
            tests, error = [], f"row {row}: its tests cannot be read: {exc}"
        shown = {
            "prompt": as_text(data["prompt"]),
            "tests": [test_label(t) for t in tests],
        }
    context = {"versions": versions, "version": version, "row": row, "last": last, "shown": shown, "error": error}
    return render(request, "datasets/code_tests_bench.html", context)


@require_POST
def code_tests_bench_run(request):
    """Queue the solution on the sandbox queue; the page polls for the result."""
    form = BenchRunForm(request.POST)
    if not form.is_valid():
        return JsonResponse({"errors": form.errors.get_json_data()}, status=400)
    data = form.cleaned_data
    if not visible_versions(request.user).filter(pk=data["dataset_version"]).exists():
        raise Http404("no such dataset version")
    result = queues.enqueue(
        queues.CODE_TESTS_BENCH,
        kwargs={
            "owner_id": request.user.pk,
            "dataset_version_id": data["dataset_version"],
            "row": data["row"],
            "solution": data["solution"],
        },
    )
    return JsonResponse({"task": result.id, "poll": f"/datasets/code-tests/run/{result.id}/"}, status=202)


@require_GET
def code_tests_bench_result(request, task_id):
    return task_result_answer(request, task_id, "the bench task failed")
