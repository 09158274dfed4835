# Caldera's image: the web server by default; docker-compose.yml runs the Celery worker and
# beat from the same image with another command.

# The translations, compiled where GNU gettext is installed; the image keeps the
# compiled catalogues, not gettext.
FROM python:3.11-slim AS messages
RUN apt-get update && apt-get install -y --no-install-recommends gettext \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /build
COPY locale ./locale
RUN for po in locale/*/LC_MESSAGES/*.po; do msgfmt --check --output-file "${po%.po}.mo" "$po" || exit 1; done

FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app

# The dependencies first, from the runtime lock alone (every file checked against its
# hash; no demo servers, no test tools), so a code change reuses this layer. The code
# runs from /app.
COPY requirements/runtime.txt ./requirements.txt
RUN pip install --require-hashes -r requirements.txt

# The application only (no .venv, .git or .caldera of a developer's tree).
COPY manage.py ./
COPY portal ./portal
COPY kube ./kube
COPY k8s/crds ./k8s/crds
COPY sql ./sql
COPY audit ./audit
COPY queues ./queues
COPY access ./access
COPY jobs ./jobs
COPY hooks ./hooks
COPY templates ./templates
COPY static ./static
COPY --from=messages /build/locale ./locale

# The `caldera` command, for a shell in a pod; its requests and PyYAML are in the lock above.
COPY client ./client
RUN pip install --no-deps ./client

# Settings require these; none of them is used by collectstatic nor kept in the image.
RUN SECRET_KEY=collectstatic-build-only \
    DATABASE_URL=postgres://build@localhost/build \
    REDIS_URL=redis://localhost:6379/0 \
    python manage.py collectstatic --noinput

# The archive of finished jobs past retention: a volume mounted here takes its owner.
RUN useradd --system --uid 10001 --no-create-home --home-dir /app caldera \
    && install -d -o caldera -g caldera /var/lib/caldera/archive
USER caldera

# Each process's Prometheus figures go here, for a scrape to add up (portal/process_metrics.py).
# gunicorn's arbiter answers GET /livez on PROBE_PORT, outside the request workers' queue
# (portal/web_server.py); /livez on PORT stays for callers that want the workers' answer.
ENV PORT=8000 \
    PROBE_PORT=8001 \
    PROMETHEUS_MULTIPROC_DIR=/tmp/caldera-metrics
EXPOSE 8000 8001

CMD ["sh", "-c", "exec gunicorn portal.wsgi:application -c python:portal.gunicorn --bind 0.0.0.0:${PORT} --workers 2 --threads 4 --access-logfile -"]
