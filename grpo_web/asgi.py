import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "grpo_web.settings")
# No connection kept for reuse here: each request's sync code runs in a thread of its own, and a kept connection would
# stay open with it (one per concurrent request, until PostgreSQL refuses more). grpo_web.settings reads it.
os.environ.setdefault("GRPO_DB_CONN_MAX_AGE", "0")
django_application = get_asgi_application()

from grpo_web.bodylimit import BodyLimit  # noqa: E402
from grpo_web.embedded import ensure_configured_redis  # noqa: E402

application = BodyLimit(django_application)  # a body over the upload limit is refused before it is read

ensure_configured_redis()
