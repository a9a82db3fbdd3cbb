import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "grpo_web.settings")
application = get_asgi_application()

from grpo_web.embedded import ensure_configured_redis  # noqa: E402

ensure_configured_redis()
