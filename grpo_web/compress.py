"""JSON answers gzip-compressed for clients that accept it (a run page's metric series, 1,000 buckets, is some 80 KB raw).

Only JSON: an HTML page holds the CSRF token next to text a user can choose, which compression would leak (BREACH);
a server-sent events stream must reach the browser as it is written; static files are compressed ahead of time
(grpo_web.staticstorage)."""

from django.middleware.gzip import GZipMiddleware


class GzipJson(GZipMiddleware):
    def process_response(self, request, response):
        if not response.get("Content-Type", "").startswith("application/json"):
            return response
        return super().process_response(request, response)
