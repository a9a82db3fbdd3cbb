"""A request that finds the database away is answered 503 "database unavailable, retrying", with Retry-After, not a
bare 500: a page's poll, a page, an API call alike.

Django turns an exception raised in a view or in a middleware into a 500 before any outer middleware sees it, and
sends ``got_request_exception`` while the exception is being handled: the receiver here notes on the request that
it was the database's (OperationalError, InterfaceError: a refused or dropped connection), and the middleware,
outermost, answers such a 500 with the 503 instead. Every other 500 stays as it was.
"""

from __future__ import annotations

import sys

from django.core.signals import got_request_exception
from django.db import InterfaceError, OperationalError
from django.http import HttpResponse, JsonResponse
from django.utils.deprecation import MiddlewareMixin
from django.utils.html import escape

DB_ERRORS = (OperationalError, InterfaceError)
RETRY_AFTER_SECONDS = 5
MESSAGE = "Database unavailable, retrying: the server cannot reach its database just now. Try again in a few seconds."
_NOTE = "grpo_database_unavailable"


def _note(sender, request=None, **kwargs) -> None:
    if request is not None and isinstance(sys.exc_info()[1], DB_ERRORS):
        setattr(request, _NOTE, True)


got_request_exception.connect(_note, dispatch_uid="grpo_web.dbdown")


def database_unavailable(request) -> HttpResponse:
    """The 503: JSON for the API and for a page's fetch (Accept: application/json), a short page otherwise."""
    if request.path.startswith("/api/"):
        response = JsonResponse({"detail": MESSAGE}, status=503)
    elif "application/json" in request.headers.get("Accept", ""):
        response = JsonResponse({"error": MESSAGE}, status=503)
    else:
        response = HttpResponse(
            f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Database unavailable</title>'
            f'<meta http-equiv="refresh" content="{RETRY_AFTER_SECONDS}"></head>'
            f"<body><h1>Database unavailable, retrying</h1><p>{escape(MESSAGE)}</p></body></html>",
            status=503,
            content_type="text/html; charset=utf-8",
        )
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    response["Cache-Control"] = "no-store"
    return response


class DatabaseUnavailable(MiddlewareMixin):
    def process_response(self, request, response):
        if response.status_code == 500 and getattr(request, _NOTE, False):
            return database_unavailable(request)
        return response
