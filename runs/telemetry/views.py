"""The run page's resource charts, as JSON."""

from __future__ import annotations

from django.http import JsonResponse
from django.views.decorators.http import require_GET

from runs.access import visible_run
from runs.telemetry.selectors import telemetry_series


@require_GET
def run_telemetry_json(request, pk):
    return JsonResponse(telemetry_series(visible_run(request, pk)))
