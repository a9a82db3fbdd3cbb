"""The run page's resource charts, as JSON."""

from __future__ import annotations

from django.http import JsonResponse
from django.views.decorators.http import require_GET

from runs.access import owned_run
from runs.telemetry.selectors import telemetry_series


@require_GET
def run_telemetry_json(request, pk):
    return JsonResponse(telemetry_series(owned_run(request, pk)))
