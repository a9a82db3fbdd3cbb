# CPU image for grpo-web: serves the web app (uvicorn) and runs the
# sandbox/default Celery worker. GPU training uses docker/Dockerfile.gpu.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    DJANGO_SETTINGS_MODULE=grpo_web.settings \
    GRPO_DATA_DIR=/data

# Same UID as in docker/Dockerfile.gpu so both images can write the shared /data volume.
ARG APP_UID=1000
RUN useradd --create-home --uid ${APP_UID} app

WORKDIR /app

# CPU-only torch first (the default PyPI wheel drags in CUDA libraries);
# `pip install .` then finds torch==2.13.0 already satisfied.
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
RUN pip install --index-url ${TORCH_INDEX_URL} torch==2.13.0

COPY . .
RUN pip install . ./attach ./protocol

# Static files are baked into the image and served by whitenoise.
# The key below only lets settings import at build time; it is never used at run time.
RUN SECRET_KEY=collectstatic-only python manage.py collectstatic --noinput \
 && mkdir -p /data && chown -R app:app /data

# Not root: reward sandboxes then make their private root in a user namespace, which the compose file's
# security_opt allows for the worker containers (docs/sandbox.md, "Isolation by deployment"). The interpreter and
# site-packages under /usr/local are readable by every user, as a sandbox needs.
USER app
VOLUME ["/data"]
EXPOSE 8000
CMD ["uvicorn", "grpo_web.asgi:application", "--host", "0.0.0.0", "--port", "8000"]
