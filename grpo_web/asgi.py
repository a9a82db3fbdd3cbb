import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "grpo_web.settings")
django_application = get_asgi_application()

from grpo_web.bodylimit import BodyLimit  # noqa: E402
from grpo_web.embedded import ensure_configured_redis  # noqa: E402

application = BodyLimit(django_application)  # a body over the upload limit is refused before it is read

ensure_configured_redis()
