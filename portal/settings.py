"""Caldera settings: everything comes from the environment.

Typed helpers fail loudly on malformed values. When DATABASE_URL or REDIS_URL are unset,
the values written by the embedded services (``python -m portal.embedded``) to
``.caldera/services.env`` are used, so ``manage.py`` works beside a running demo.
"""

from __future__ import annotations

import ipaddress
import json
import os
import tempfile
from datetime import timedelta
from pathlib import Path

import dj_database_url
from csp.constants import NONE, SELF
from django.core.exceptions import ImproperlyConfigured
from kombu import Queue

from access.task_names import TOKENS_EXPIRE_TASK
from hooks.task_names import DELIVER_TASK, PRUNE_TASK
from jobs.engine.task_names import (
    ACCOUNTING_TASK,
    ADMIT_TASK,
    ARCHIVE_TASK,
    ESTIMATES_TASK,
    FAIR_SHARE_TASK,
    PUBLISH_QUOTA_TASK,
    SUBMISSION_KEYS_PRUNE_TASK,
    SYNC_TASK,
    USAGE_AUDIT_TASK,
    USAGE_HISTORY_TASK,
)
from portal.logs import logging_config
from portal.rates import parse_rate

BASE_DIR = Path(__file__).resolve().parent.parent
STATE_DIR = Path(os.environ.get("CALDERA_STATE_DIR", BASE_DIR / ".caldera"))


def _services_env() -> dict[str, str]:
    path = STATE_DIR / "services.env"
    if not path.exists():
        return {}
    pairs = (line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)
    return {key.strip(): value.strip() for key, value in pairs}


_FALLBACK = _services_env()


def env_str(name: str, default: str | None = None) -> str:
    value = os.environ.get(name) or _FALLBACK.get(name) or default
    if value is None:
        raise ImproperlyConfigured(f"environment variable {name} is required")
    return value


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    if raw.lower() in {"1", "true", "yes", "on"}:
        return True
    if raw.lower() in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (1/0, true/false), got {raw!r}")


def env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer, got {raw!r}") from None


def env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a number, got {raw!r}") from None


def env_json_object(name: str) -> dict:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return {}
    try:
        value = json.loads(raw)
    except ValueError as error:
        raise ImproperlyConfigured(f"{name} must be a JSON object: {error}") from None
    if not isinstance(value, dict):
        raise ImproperlyConfigured(f"{name} must be a JSON object, got {raw!r}")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_rate(name: str, default: str) -> str:
    """A rate limit (portal/rates.py): ``3000/min``, or ``off``."""
    raw = env_str(name, default)
    try:
        parse_rate(raw)
    except ValueError as error:
        raise ImproperlyConfigured(f"{name} {error}") from None
    return raw.strip()


DEBUG = env_bool("DEBUG", False)

if DEBUG:
    SECRET_KEY = env_str("SECRET_KEY", "caldera-debug-only-key-never-used-in-production")
else:
    SECRET_KEY = env_str("SECRET_KEY")

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])
# A form refused by the CSRF check keeps what was typed (portal/errors.py).
CSRF_FAILURE_VIEW = "portal.errors.csrf_failure"

# GET /metrics (portal/metrics.py) answers a request bearing this token; unset, only
# requests from the machine itself.
METRICS_TOKEN = env_str("METRICS_TOKEN", "")
# A Celery worker's own figures (admission cycles, cluster calls) at
# http://WORKER_METRICS_HOST:WORKER_METRICS_PORT/metrics, same token; 0: not served.
WORKER_METRICS_PORT = env_int("WORKER_METRICS_PORT", 0)
WORKER_METRICS_HOST = env_str("WORKER_METRICS_HOST", "0.0.0.0")

# HTTPS=true: Caldera is reached only through TLS, terminated in front of it (an Ingress, a
# load balancer) that says so in X-Forwarded-Proto. Then plain HTTP is redirected (but for
# the probes and the scrape, which come to the pod directly), cookies are sent only over
# TLS, and browsers are told to keep to HTTPS (HSTS). `manage.py check --deploy` is clean.
HTTPS = env_bool("HTTPS", False)
if HTTPS:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = True
    SECURE_REDIRECT_EXEMPT = [r"^livez$", r"^readyz$", r"^healthz$", r"^metrics(/deployment)?$"]
    SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31_536_000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", True)
    # Asking browsers to preload the domain as HTTPS-only binds every host under it for
    # months: a choice for the company that owns the domain, not a default, so the check
    # that suggests it is silenced until SECURE_HSTS_PRELOAD=true makes that choice.
    SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
    if not SECURE_HSTS_PRELOAD:
        SILENCED_SYSTEM_CHECKS = ["security.W021"]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "template_partials",
    "axes",
    "csp",
    "sql",
    "portal",
    "queues",
    "jobs",
    "access",
    "audit",
    "hooks",
]

MIDDLEWARE = [
    "portal.metrics.RequestMetrics",  # first: it times the whole answer
    # A 304 with its validator alone, the headers every later one adds taken off again: an
    # open page's polls are mostly 304s (portal/fragments.py).
    "portal.fragments.BareNotModified",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # Compresses what every later one answers, HTML only (portal/middleware.py: BREACH).
    "portal.middleware.CompressHtml",
    # Before anything reads the session, the user or the form (portal/middleware.py).
    "portal.middleware.RefuseUnstorableText",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # The request id, the person and the job of each log line (portal/logs.py).
    "portal.logs.RequestContext",
    # The person's language, time zone and theme (portal/preferences.py).
    "portal.preferences.PersonPreferences",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # A polled fragment's ETag, and 304 when it has not changed (portal/fragments.py).
    "portal.fragments.FragmentValidation",
    # Leaves the device cookie on a successful sign-in's answer (portal/device_cookie.py).
    "portal.device_cookie.DeviceCookieMiddleware",
    # Last: its lockout answer replaces the login page's (django-axes' own advice).
    "axes.middleware.AxesMiddleware",
    "portal.middleware.ServiceUnavailable",
]

# Content-Security-Policy (django-csp): scripts, styles, images and requests from Caldera
# itself only; no inline script or style, no eval, no framing. The pages, the admin and the
# API docs (split Swagger UI) keep to it; the browser tests fail on any violation.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        "img-src": [SELF, "data:"],
        "connect-src": [SELF],
        "font-src": [SELF],
        "object-src": [NONE],
        "base-uri": [NONE],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    }
}

ROOT_URLCONF = "portal.urls"
WSGI_APPLICATION = "portal.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "jobs.web.context_processors.cluster_health",
                "portal.preferences.appearance",
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.parse(
        env_str("DATABASE_URL"), conn_max_age=60, conn_health_checks=True
    )
}
# A new connection to a PostgreSQL that does not answer (stopped, not refusing) gives up
# after this many seconds instead of holding its request for ever; the request then
# answers 503. DATABASE_URL's own ?connect_timeout= wins.
DATABASES["default"].setdefault("OPTIONS", {}).setdefault("connect_timeout", 5)
# Parameters go to PostgreSQL apart from the statement, so that psycopg prepares a
# statement a connection has run five times and PostgreSQL plans it once per connection
# instead of at every request: the submit path's statements cost more to plan than to run
# (docs/benchmarks.md). A PgBouncer in transaction pooling mode older than 1.21, or without
# max_prepared_statements, cannot keep prepared statements: set it to 0 there.
DATABASES["default"]["OPTIONS"]["server_side_binding"] = env_bool(
    "DATABASE_SERVER_SIDE_BINDING", True
)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

# The pages speak English and Simplified Chinese (locale/, compiled by `make messages`):
# the person's choice on their page, else their browser's Accept-Language
# (portal/preferences.py). Times are shown in the person's zone, else their browser's.
LANGUAGE_CODE = "en"
LANGUAGES = [("en", "English"), ("zh-hans", "简体中文")]
LOCALE_PATHS = [BASE_DIR / "locale"]
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
# Where collectstatic writes (the image's staticfiles/; `make bench` collects into a folder
# of its own, to serve the pages as the image does).
STATIC_ROOT = Path(env_str("STATIC_ROOT", str(BASE_DIR / "staticfiles")))


def static_finders(root: Path, *, debug: bool) -> bool:
    """Whether WhiteNoise finds static files in the apps and static/ (the demo, DEBUG) or
    serves collectstatic's copies in ``root`` (the image), which have their gzip copies
    beside them: a file found is served in place of the collected one, uncompressed."""
    return debug or not any(root.glob("*.gz"))


# gunicorn serves static files through WhiteNoise: collectstatic's, compressed, once they
# are there (the image; with DEBUG off, run collectstatic again after changing static/);
# else found in the apps and static/ directly (the demo).
WHITENOISE_USE_FINDERS = static_finders(STATIC_ROOT, debug=DEBUG)
# collectstatic (the image) writes a gzip copy of each text file beside it (and a Brotli
# one where the brotli package is installed), which WhiteNoise serves to the browsers that
# take it. No manifest: the files keep their names.
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "dashboard"
LOGOUT_REDIRECT_URL = "login"

# Login throttling (django-axes, portal/login_throttle.py), on the login page and the
# admin's. Failed password logins refuse later ones, right password or not, so that the
# guesser is held back and not the person guessed at:
# - LOGIN_FAILURE_LIMIT failures for one username from one address refuse that pair only:
#   the person still logs in from elsewhere, and others behind the same address (a proxy)
#   are not held back;
# - LOGIN_USERNAME_FAILURE_LIMIT failures for one username from all addresses together
#   (many addresses guessing one password) refuse it from everywhere, except in a browser
#   the person has logged in with before: a successful login leaves a signed device cookie
#   naming them (portal/device_cookie.py), so guessers cannot lock them out;
# - a failure counts for LOGIN_COOLOFF_MINUTES; refused logins are not failures, so a lock
#   lifts one cool-off after the failure that reached the limit, however often it is
#   knocked on; a success clears its pair's failures.
# Staff see the failures under "Access attempts" in the admin, and delete them to lift a
# lock early. Sign-in through the identity provider is not counted (its own protections
# apply), nor are API tokens. Behind a proxy, set AXES_IPWARE_* (django-axes' settings) so
# that the address counted is the client's.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",  # first: it refuses a locked-out login
    "portal.sign_in.LocalAccounts",  # username and password, while LOCAL_LOGIN is on
    "portal.sign_in.ProviderBackend",  # the company's OpenID provider, with OIDC_ISSUER
]

# Sign-in through the company's OpenID Connect provider (portal/sign_in.py), on when
# OIDC_ISSUER is set (Keycloak: https://sso.example.com/realms/<realm>). The endpoints
# come from the provider's discovery document.
OIDC_ISSUER = env_str("OIDC_ISSUER", "").rstrip("/")
OIDC_RP_CLIENT_ID = env_str("OIDC_CLIENT_ID", "")
OIDC_RP_CLIENT_SECRET = env_str("OIDC_CLIENT_SECRET", "")
OIDC_RP_SIGN_ALGO = env_str("OIDC_SIGN_ALGO", "RS256")
OIDC_RP_SCOPES = env_str("OIDC_SCOPES", "openid email profile")
OIDC_PROVIDER_NAME = env_str("OIDC_PROVIDER_NAME", "single sign-on")
OIDC_USERNAME_CLAIM = env_str("OIDC_USERNAME_CLAIM", "preferred_username")
OIDC_GROUPS_CLAIM = env_str("OIDC_GROUPS_CLAIM", "groups")
OIDC_GROUP_MAP = env_json_object("OIDC_GROUP_MAP")  # {"group": "department:role" | "admin"}
OIDC_USE_PKCE = True
OIDC_TIMEOUT = env_float("OIDC_TIMEOUT_SECONDS", 10.0)
OIDC_LEEWAY_SECONDS = 60  # clock skew allowed between the provider and Caldera
# Username and password sign-in (local accounts: the demo, break-glass admins). Off, only
# the provider signs people in, and API tokens keep working.
LOCAL_LOGIN = env_bool("LOCAL_LOGIN", True)

AXES_HANDLER = "portal.login_throttle.LoginThrottle"  # adds the limit per username
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]  # the pair, together
AXES_FAILURE_LIMIT = env_int("LOGIN_FAILURE_LIMIT", 10)
LOGIN_USERNAME_FAILURE_LIMIT = env_int("LOGIN_USERNAME_FAILURE_LIMIT", 50)
AXES_COOLOFF_TIME = timedelta(minutes=env_float("LOGIN_COOLOFF_MINUTES", 15.0))
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
AXES_RESET_ON_SUCCESS = True
AXES_WHITELIST_CALLABLE = "portal.login_throttle.is_not_a_password_login"
AXES_LOCKOUT_CALLABLE = "portal.login_throttle.lockout_response"
AXES_ENABLE_ADMIN = True

# Access tokens (access/, docs/api.md): a new token's expiry unless its maker picks
# another, the longest one may pick, whether "never" is offered, how long the tokens from
# before scoped tokens keep working, and how many live tokens a person may hold.
ACCESS_TOKEN_DEFAULT_DAYS = env_int("ACCESS_TOKEN_DEFAULT_DAYS", 90)
ACCESS_TOKEN_MAX_DAYS = env_int("ACCESS_TOKEN_MAX_DAYS", 366)
ACCESS_TOKEN_ALLOW_NEVER = env_bool("ACCESS_TOKEN_ALLOW_NEVER", False)
ACCESS_TOKEN_LEGACY_DAYS = env_int("ACCESS_TOKEN_LEGACY_DAYS", 90)
ACCESS_TOKENS_PER_PERSON = env_int("ACCESS_TOKENS_PER_PERSON", 50)

# Workload identity (access/oidc.py): a CI platform's ID token (GitHub Actions, GitLab CI)
# exchanged for a Caldera token. Each request to an issuer (its discovery document, its
# keys) is given WORKLOAD_IDENTITY_TIMEOUT_SECONDS in all, as a pipeline waits for it. An
# issuer's keys are kept WORKLOAD_IDENTITY_KEYS_SECONDS, and read again early when a token
# names a key the cache lacks (a rotation), at most once per
# WORKLOAD_IDENTITY_KEYS_REFRESH_SECONDS: anyone can send a made-up key id.
WORKLOAD_IDENTITY_TIMEOUT_SECONDS = env_float("WORKLOAD_IDENTITY_TIMEOUT_SECONDS", 5.0)
WORKLOAD_IDENTITY_KEYS_SECONDS = env_float("WORKLOAD_IDENTITY_KEYS_SECONDS", 600.0)
WORKLOAD_IDENTITY_KEYS_REFRESH_SECONDS = env_float("WORKLOAD_IDENTITY_KEYS_REFRESH_SECONDS", 60.0)
if (
    WORKLOAD_IDENTITY_TIMEOUT_SECONDS <= 0
    or min(WORKLOAD_IDENTITY_KEYS_SECONDS, WORKLOAD_IDENTITY_KEYS_REFRESH_SECONDS) < 0
):
    raise ImproperlyConfigured(
        "WORKLOAD_IDENTITY_TIMEOUT_SECONDS must be above 0, WORKLOAD_IDENTITY_KEYS_SECONDS "
        "and WORKLOAD_IDENTITY_KEYS_REFRESH_SECONDS at least 0"
    )

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "access.authentication.AccessTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    # A token's rights: reading needs read, any change submit, unless the view asks more.
    "DEFAULT_PERMISSION_CLASSES": [
        "rest_framework.permissions.IsAuthenticated",
        "queues.api_base.WithinScope",
    ],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.LimitOffsetPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "portal.schema.CalderaAutoSchema",  # adds the shared errors
    "EXCEPTION_HANDLER": "portal.api.exception_handler",
    "DEFAULT_THROTTLE_CLASSES": ["portal.throttling.ApiThrottle"],  # the limits below
    # Bodies with text the database cannot store (NUL, control characters) are refused
    # with the field's path (portal/input.py).
    "DEFAULT_PARSER_CLASSES": [
        "portal.input.CheckedJSONParser",
        "portal.input.CheckedFormParser",
        "portal.input.CheckedMultiPartParser",
    ],
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Caldera API",
    "DESCRIPTION": "Submit and follow Ray and PyTorch jobs in quota-governed queues.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # Swagger UI is served from our own static files, not a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    # Choice sets that share a field's name: a job's and a token's kind and state.
    "ENUM_NAME_OVERRIDES": {
        "KindEnum": "jobs.models.Job.Kind",
        "DocumentKindEnum": "jobs.models.DOCUMENT_KINDS",
        "StateEnum": "jobs.models.State",
        "AccessTokenKindEnum": "access.models.AccessToken.Kind",
        "AccessTokenStateEnum": "access.models.TOKEN_STATES",
    },
}

# Celery: Redis is the broker. Results are not stored; the database is the truth.
REDIS_URL = env_str("REDIS_URL")
CELERY_BROKER_URL = REDIS_URL
# kombu's Redis transport with the fix a worker needs to outlive a broker outage: without
# it, Redis going away while a message is unacknowledged ends the worker with
# AttributeError("'NoneType' object has no attribute 'hostname'") (see portal/broker.py).
CELERY_BROKER_TRANSPORT = "portal.broker:Transport"
CELERY_TASK_IGNORE_RESULT = True
# Beat's schedule kept in its file as Celery's own scheduler keeps it, beat's liveness marked
# in Redis for its health check (``manage.py probe beat``).
CELERY_BEAT_SCHEDULER = "portal.beat:Scheduler"
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
# Broker loss: a worker (and beat) waits for Redis for ever, at start-up and after a loss,
# instead of exiting after 100 tries; the database keeps everything meanwhile and beat
# re-drives admission and sync once Redis is back.
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_CONNECTION_RETRY = True
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
# broker_heartbeat is AMQP's and does nothing for Redis, and no Redis result backend runs
# (results are ignored), so redis_backend_health_check_interval does not apply either. The
# Redis connections are watched by the transport options below instead.
CELERY_BROKER_TRANSPORT_OPTIONS = {
    # A dead Redis is noticed within seconds: connects and commands (a publish from a web
    # request) time out rather than hang.
    "socket_connect_timeout": 2,
    "socket_timeout": 5,
    # A half-open connection (Redis restarted behind NAT, a failover) is found by TCP
    # keepalive and by a PING on connections idle this long; the consumer's BRPOP is dropped
    # and reconnected after brpop_timeout + 2 x this (about 21 s).
    "socket_keepalive": True,
    "health_check_interval": 10,
    # A command that timed out is not sent again by the Redis client: on a stopped (not
    # refusing) broker, redis-py's retries of a timeout (three, with backoff) would hold
    # one publish for four socket timeouts. Celery's own retry policy still retries the
    # publishes that ask for it; the web tier's requests go through a sender thread that
    # drops them instead (jobs/engine/triggers.py).
    "retry_on_timeout": False,
    # An unacknowledged message (its worker was killed or lost its connection) is delivered
    # again after this long. It must outlast the longest task, else a second copy starts
    # beside it: an admit task that keeps cycling under a stream of submits, a reconcile of
    # a large batch against a slow API server (KUBERNETES_TIMEOUT_SECONDS x ATTEMPTS a
    # call), and a sync held until its ETA (the end of a simulated job's run). A copy
    # started early is harmless (every task is idempotent; admit and sync are singletons
    # behind a lock), and nothing waits for a lost message: beat re-drives admit and sync
    # within seconds and the sync re-reconciles jobs missing from the cluster.
    "visibility_timeout": 3600,
}
CELERY_WORKER_PREFETCH_MULTIPLIER = 4
# Each kind of work has a queue of its own, so that none waits behind another: an admission
# cycle never behind a webhook to a slow receiver or an estimate pass, a sync never behind
# an admission burst. The sync alone goes to "cluster": the process that consumes it holds
# the cluster's watches (jobs/cluster/watch.py), so a deployment runs one worker of one
# process for it (deploy/kubernetes/cluster.yaml: `-Q cluster --concurrency 1`) and the
# others without it (`--exclude-queues cluster`); every other process then holds no watch.
# A worker started without -Q or -X consumes every queue (the tests, a one-process setup).
# Reconcile, quota publishing and the periodic chores stay on the default queue.
CELERY_TASK_DEFAULT_QUEUE = "celery"
TASK_QUEUES = {
    ADMIT_TASK: "admission",
    SYNC_TASK: "cluster",
    ESTIMATES_TASK: "estimates",
    DELIVER_TASK: "webhooks",
    PRUNE_TASK: "webhooks",
}
CELERY_TASK_ROUTES = {task: {"queue": queue} for task, queue in TASK_QUEUES.items()}
CELERY_TASK_QUEUES = [
    Queue(name) for name in dict.fromkeys([CELERY_TASK_DEFAULT_QUEUE, *TASK_QUEUES.values()])
]
# Pool processes of a worker (celery worker --concurrency): in a container, its CPU limit
# (deploy/kubernetes/worker.yaml), not the node's cores; unset, one per core it sees.
if os.environ.get("WORKER_CONCURRENCY"):
    CELERY_WORKER_CONCURRENCY = max(env_int("WORKER_CONCURRENCY", 1), 1)
# Late acknowledgement (a message is acknowledged once its task ended, so a task cut off
# by a killed worker runs again) is only safe for idempotent tasks: it is set on each task
# in jobs/tasks.py that is (all of them today), and off for any other.
CELERY_TASK_ACKS_LATE = False
# A late-acknowledged task whose pool process died (SIGKILL, out of memory) is put back in
# the queue and run again, rather than acknowledged as failed.
CELERY_TASK_REJECT_ON_WORKER_LOST = True
# A late-acknowledged task still running when the broker connection is lost cannot be
# acknowledged any more and will be delivered again: it is stopped at once rather than left
# to run beside its second copy (Celery 6's default).
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = True

# Limits of the REST API (portal/throttling.py), so that one pipeline gone wrong cannot
# take the service from everyone else. A request is a submission (POST, PUT, PATCH,
# DELETE: submitting, cancelling, bulk actions; a batch counts each of its jobs) or a
# read (GET); each kind is counted per token and per person (all their tokens and
# sessions together), in fixed windows, across every web process (in Redis). Rates are
# DRF's "3000/min" (per s, min, hour or day); "off" turns one off. Past a limit the API
# answers 429 naming it, with Retry-After: the seconds until its window ends.
API_SUBMIT_RATE_PER_TOKEN = env_rate("API_SUBMIT_RATE_PER_TOKEN", "3000/min")
API_SUBMIT_RATE_PER_PERSON = env_rate("API_SUBMIT_RATE_PER_PERSON", "6000/min")
API_READ_RATE_PER_TOKEN = env_rate("API_READ_RATE_PER_TOKEN", "1200/min")
API_READ_RATE_PER_PERSON = env_rate("API_READ_RATE_PER_PERSON", "2400/min")
# Where the counts are kept (default: the broker's Redis), and how long a count may take
# (connect and read): a Redis that does not answer in time lets the request through
# uncounted, and the limits then rest, uncounted, for API_THROTTLE_REST_SECONDS before
# Redis is tried again, so a hung Redis costs each web process one such wait per rest.
API_THROTTLE_REDIS_URL = env_str("API_THROTTLE_REDIS_URL", REDIS_URL)
API_THROTTLE_TIMEOUT_SECONDS = env_float("API_THROTTLE_TIMEOUT_SECONDS", 0.05)
API_THROTTLE_REST_SECONDS = env_float("API_THROTTLE_REST_SECONDS", 5.0)
if not 0 < API_THROTTLE_TIMEOUT_SECONDS <= 1 or API_THROTTLE_REST_SECONDS < 0:
    raise ImproperlyConfigured(
        "API_THROTTLE_TIMEOUT_SECONDS must be above 0 and at most 1, and "
        "API_THROTTLE_REST_SECONDS at least 0, got "
        f"{API_THROTTLE_TIMEOUT_SECONDS:g} and {API_THROTTLE_REST_SECONDS:g}"
    )

# How often beat re-drives the admission cycle and the cluster sync (seconds). Each entry
# expires just under its interval so late runs never stack.
ADMIT_BEAT_SECONDS = env_float("ADMIT_BEAT_SECONDS", 2.0)
SYNC_BEAT_SECONDS = env_float("SYNC_BEAT_SECONDS", 1.0)
# How often beat recomputes every node's usage and every queue's pending count from the
# jobs and logs any node above its limit or any count that drifted (jobs/engine/usage_audit.py).
USAGE_AUDIT_SECONDS = env_float("USAGE_AUDIT_SECONDS", 300.0)
# The usage history (jobs/usage/samples.py): beat records every node's used, min, max, pending
# demand and admitted jobs per resource once per USAGE_HISTORY_SECONDS (one sample per
# interval, however many beats or workers), and deletes samples older than
# USAGE_HISTORY_DAYS. Rows kept: nodes x resources x 1,440 a day at the default.
USAGE_HISTORY_SECONDS = env_int("USAGE_HISTORY_SECONDS", 60)
USAGE_HISTORY_DAYS = env_int("USAGE_HISTORY_DAYS", 14)
if USAGE_HISTORY_SECONDS < 1 or USAGE_HISTORY_DAYS < 1:
    raise ImproperlyConfigured(
        "USAGE_HISTORY_SECONDS and USAGE_HISTORY_DAYS must be at least 1, got "
        f"{USAGE_HISTORY_SECONDS} and {USAGE_HISTORY_DAYS}"
    )
# Fair sharing over time (queues.fairness, jobs/engine/fair_share.py): while the tree has a
# half-life, beat computes every node's decayed usage from the ledger of holds this often.
FAIR_SHARE_SECONDS = env_int("FAIR_SHARE_SECONDS", 60)
if FAIR_SHARE_SECONDS < 1:
    raise ImproperlyConfigured(f"FAIR_SHARE_SECONDS must be at least 1, got {FAIR_SHARE_SECONDS}")
# Retention (jobs/engine/retention.py): finished jobs older than JOB_RETENTION_DAYS (0: keep
# every job) are written to JOB_ARCHIVE_DIR as compressed JSON lines, JOB_ARCHIVE_BATCH a
# file, and deleted with their events; beat looks for them every ARCHIVE_SECONDS. In a
# deployment JOB_ARCHIVE_DIR is a volume of the workers' (docs/deployment.md).
JOB_RETENTION_DAYS = env_int("JOB_RETENTION_DAYS", 180)
JOB_ARCHIVE_DIR = Path(os.environ.get("JOB_ARCHIVE_DIR", STATE_DIR / "archive"))
JOB_ARCHIVE_BATCH = env_int("JOB_ARCHIVE_BATCH", 5000)
ARCHIVE_SECONDS = env_float("ARCHIVE_SECONDS", 3600.0)
if JOB_RETENTION_DAYS < 0 or JOB_ARCHIVE_BATCH < 1 or ARCHIVE_SECONDS <= 0:
    raise ImproperlyConfigured(
        "JOB_RETENTION_DAYS must be 0 or more, JOB_ARCHIVE_BATCH at least 1 and "
        f"ARCHIVE_SECONDS above 0, got {JOB_RETENTION_DAYS}, {JOB_ARCHIVE_BATCH} and "
        f"{ARCHIVE_SECONDS}"
    )
# How often beat replays the admission rule forward to estimate when the first
# ESTIMATE_DEPTH pending jobs of every queue start (jobs/reads/estimate.py); pages read the result.
ESTIMATE_SECONDS = env_float("ESTIMATE_SECONDS", 10.0)
ESTIMATE_DEPTH = env_int("ESTIMATE_DEPTH", 200)
# The most of one worker process's time the estimates take: after a replay that took d
# seconds, the next waits until d / ESTIMATE_SHARE has passed since it began, so at
# thousands of queues the estimates grow older instead of taking a process from admission.
ESTIMATE_SHARE = env_float("ESTIMATE_SHARE", 0.1)
if ESTIMATE_SECONDS <= 0 or ESTIMATE_DEPTH < 1 or not 0 < ESTIMATE_SHARE <= 1:
    raise ImproperlyConfigured(
        "ESTIMATE_SECONDS must be above 0, ESTIMATE_DEPTH at least 1 and ESTIMATE_SHARE "
        f"above 0 and at most 1, got {ESTIMATE_SECONDS:g}, {ESTIMATE_DEPTH} and "
        f"{ESTIMATE_SHARE:g}"
    )
# How long a submission's Idempotency-Key answers a retry with the jobs it queued (hours);
# beat deletes older keys every hour (jobs.services.submission_keys_prune).
IDEMPOTENCY_KEY_HOURS = env_int("IDEMPOTENCY_KEY_HOURS", 24)
if IDEMPOTENCY_KEY_HOURS < 1:
    raise ImproperlyConfigured(
        f"IDEMPOTENCY_KEY_HOURS must be at least 1, got {IDEMPOTENCY_KEY_HOURS}"
    )
# Webhooks (hooks/): a department's or a job's callback URLs, sent a signed JSON event on
# each state change of its jobs (docs/api.md, "Webhooks").
# The address of the portal as receivers reach it, for the job's link in an event
# (https://caldera.example.com); empty: the link is the path alone.
PUBLIC_URL = env_str("PUBLIC_URL", "")
# Beat's delivery pass, which sends the events state changes wrote (seconds).
WEBHOOK_BEAT_SECONDS = env_float("WEBHOOK_BEAT_SECONDS", 2.0)
# http:// URLs besides https:// (development, a receiver on the same host); never in production.
WEBHOOK_ALLOW_HTTP = env_bool("WEBHOOK_ALLOW_HTTP", DEBUG)
# Networks a hook may reach though they are private, loopback or link-local, e.g. a CI
# runner inside the company: "10.20.0.0/16,192.168.5.7/32". Empty: none.
WEBHOOK_ALLOWED_NETWORKS = env_list("WEBHOOK_ALLOWED_NETWORKS", [])
for _network in WEBHOOK_ALLOWED_NETWORKS:
    try:
        ipaddress.ip_network(_network, strict=False)
    except ValueError:
        raise ImproperlyConfigured(
            f"WEBHOOK_ALLOWED_NETWORKS: {_network!r} is not a network (10.0.0.0/8)"
        ) from None
# A PEM file of certificate authorities trusted for https receivers besides the system's
# (a company's own authority, for receivers inside it); empty: the system's only.
WEBHOOK_CA_FILE = env_str("WEBHOOK_CA_FILE", "")
# Each connect, write and read of a delivery gives up after this long (seconds).
WEBHOOK_TIMEOUT_SECONDS = env_float("WEBHOOK_TIMEOUT_SECONDS", 5.0)
# A failed delivery is tried again after base, 2 x base, 4 x base ... up to the maximum,
# WEBHOOK_MAX_ATTEMPTS times in all.
WEBHOOK_RETRY_BASE_SECONDS = env_float("WEBHOOK_RETRY_BASE_SECONDS", 10.0)
WEBHOOK_RETRY_MAX_SECONDS = env_float("WEBHOOK_RETRY_MAX_SECONDS", 3600.0)
WEBHOOK_MAX_ATTEMPTS = env_int("WEBHOOK_MAX_ATTEMPTS", 8)
# A hook whose attempts failed this many times in a row is paused until it is resumed.
WEBHOOK_PAUSE_AFTER_FAILURES = env_int("WEBHOOK_PAUSE_AFTER_FAILURES", 20)
# Deliveries done with (delivered or failed) are deleted this many days after they were made.
WEBHOOK_DELIVERIES_DAYS = env_int("WEBHOOK_DELIVERIES_DAYS", 30)
# How many hooks a department, and a job, may name.
WEBHOOKS_PER_DEPARTMENT = env_int("WEBHOOKS_PER_DEPARTMENT", 10)
WEBHOOKS_PER_JOB = env_int("WEBHOOKS_PER_JOB", 3)
# Deliveries one pass claims; the start of a receiver's answer that is kept (characters).
WEBHOOK_BATCH = 20
WEBHOOK_ANSWER_CHARS = 500
if WEBHOOK_MAX_ATTEMPTS < 1 or WEBHOOK_PAUSE_AFTER_FAILURES < 1:
    raise ImproperlyConfigured(
        "WEBHOOK_MAX_ATTEMPTS and WEBHOOK_PAUSE_AFTER_FAILURES must be at least 1"
    )

CELERY_BEAT_SCHEDULE = {
    "admit": {
        "task": ADMIT_TASK,
        "schedule": ADMIT_BEAT_SECONDS,
        "options": {"expires": ADMIT_BEAT_SECONDS * 0.9},
    },
    "sync": {
        "task": SYNC_TASK,
        "schedule": SYNC_BEAT_SECONDS,
        "options": {"expires": SYNC_BEAT_SECONDS * 0.9},
    },
    "usage-audit": {
        "task": USAGE_AUDIT_TASK,
        "schedule": USAGE_AUDIT_SECONDS,
        "options": {"expires": USAGE_AUDIT_SECONDS * 0.9},
    },
    "usage-history": {
        "task": USAGE_HISTORY_TASK,
        "schedule": float(USAGE_HISTORY_SECONDS),
        "options": {"expires": USAGE_HISTORY_SECONDS * 0.9},
    },
    "jobs-archive": {
        "task": ARCHIVE_TASK,
        "schedule": ARCHIVE_SECONDS,
        "options": {"expires": ARCHIVE_SECONDS * 0.9},
    },
    "fair-share": {
        "task": FAIR_SHARE_TASK,
        "schedule": float(FAIR_SHARE_SECONDS),
        "options": {"expires": FAIR_SHARE_SECONDS * 0.9},
    },
    # A day is summarised once it is over; hourly, so that a day is read from the summary
    # soon after midnight UTC and a run missed while beat was down is made up.
    "accounting": {
        "task": ACCOUNTING_TASK,
        "schedule": 3600.0,
        "options": {"expires": 3240.0},
    },
    "tokens-expire": {
        "task": TOKENS_EXPIRE_TASK,
        "schedule": 300.0,
        "options": {"expires": 270.0},
    },
    "estimates": {
        "task": ESTIMATES_TASK,
        "schedule": ESTIMATE_SECONDS,
        "options": {"expires": ESTIMATE_SECONDS * 0.9},
    },
    "submission-keys-prune": {
        "task": SUBMISSION_KEYS_PRUNE_TASK,
        "schedule": 3600.0,
        "options": {"expires": 3240.0},
    },
    "webhooks": {
        "task": DELIVER_TASK,
        "schedule": WEBHOOK_BEAT_SECONDS,
        "options": {"expires": WEBHOOK_BEAT_SECONDS * 0.9},
    },
    "webhooks-prune": {
        "task": PRUNE_TASK,
        "schedule": 3600.0,
        "options": {"expires": 3240.0},
    },
}

# Backoff of a job that was tried and did not fit: base * 2**(attempts - 1), capped.
BACKOFF_BASE_SECONDS = env_float("BACKOFF_BASE_SECONDS", 2.0)
BACKOFF_MAX_SECONDS = env_float("BACKOFF_MAX_SECONDS", 60.0)

# The cluster backend: "simulated" is the embedded cluster of docs/architecture.md
# section 8, "kubernetes" a real cluster reached through the KUBERNETES_* settings below.
CLUSTER_BACKEND = env_str("CLUSTER_BACKEND", "simulated")
if CLUSTER_BACKEND not in ("simulated", "kubernetes"):
    raise ImproperlyConfigured(
        f"CLUSTER_BACKEND is simulated or kubernetes, got {CLUSTER_BACKEND!r}"
    )
# How a job waits for its dequeue: "create" keeps it out of the cluster until then;
# "suspend" creates a RayJob or PyTorchJob suspended when it is queued and releases it
# at its dequeue, as kube-queue does (a Volcano Job has no suspend and is created then).
CLUSTER_GATE = env_str("CLUSTER_GATE", "create")
if CLUSTER_GATE not in ("create", "suspend"):
    raise ImproperlyConfigured(f"CLUSTER_GATE is create or suspend, got {CLUSTER_GATE!r}")
# A job leaving the cluster (stopping after a cancel, or preempted) holds its quota until
# the cluster has removed its objects, which takes its pods' grace period. Past this many
# seconds its page says the cluster has not (its garbage collector may be down) and
# /metrics counts it (caldera_leaving_jobs_stuck).
LEAVING_WARN_SECONDS = env_float("LEAVING_WARN_SECONDS", 300.0)
if LEAVING_WARN_SECONDS <= 0:
    raise ImproperlyConfigured(f"LEAVING_WARN_SECONDS must be above 0, got {LEAVING_WARN_SECONDS}")
# The Kubernetes backend: a kubeconfig file and context, or (both empty) the in-cluster
# ServiceAccount, falling back to ~/.kube/config. KUBERNETES_HOST instead names an API
# server URL that needs no credentials (kubectl proxy). Every call times out after
# KUBERNETES_TIMEOUT_SECONDS and a transient failure is tried KUBERNETES_ATTEMPTS times.
# Statuses and events are read at every sync (SYNC_BEAT_SECONDS).
# The quota tree written to the cluster for its own schedulers, on every change and every
# minute: "elasticquotatree" (ACK's ElasticQuotaTree in kube-system) and/or "volcano" (one
# Volcano Queue per leaf queue: capability = max, guarantee = min). Empty: neither.
CLUSTER_PUBLISH_QUOTA = [
    t.strip() for t in env_str("CLUSTER_PUBLISH_QUOTA", "").split(",") if t.strip()
]
if set(CLUSTER_PUBLISH_QUOTA) - {"elasticquotatree", "volcano"}:
    raise ImproperlyConfigured(
        "CLUSTER_PUBLISH_QUOTA lists elasticquotatree and/or volcano, "
        f"got {CLUSTER_PUBLISH_QUOTA!r}"
    )
if CLUSTER_PUBLISH_QUOTA and CLUSTER_BACKEND != "kubernetes":
    raise ImproperlyConfigured("CLUSTER_PUBLISH_QUOTA needs CLUSTER_BACKEND=kubernetes")
if CLUSTER_PUBLISH_QUOTA:  # a change is written at once; this repairs what was missed
    CELERY_BEAT_SCHEDULE["publish-quota"] = {
        "task": PUBLISH_QUOTA_TASK,
        "schedule": 60.0,
        "options": {"expires": 54.0},
    }
KUBERNETES_CONFIG = env_str("KUBERNETES_CONFIG", "")
KUBERNETES_CONTEXT = env_str("KUBERNETES_CONTEXT", "")
KUBERNETES_HOST = env_str("KUBERNETES_HOST", "")
KUBERNETES_TIMEOUT_SECONDS = env_float("KUBERNETES_TIMEOUT_SECONDS", 10.0)
KUBERNETES_ATTEMPTS = env_int("KUBERNETES_ATTEMPTS", 3)
# Keep the job objects in memory through a watch per namespace (resumed from its last
# resourceVersion, listed again on 410 Gone) instead of listing them at every sync.
KUBERNETES_WATCH = env_bool("KUBERNETES_WATCH", True)
# How far each watch reaches: "namespace", a watch per kind and namespace the tree binds
# (the per-namespace Roles are all Caldera needs), or "cluster", one watch per kind for
# every namespace (its objects, labelled caldera.io/job-id, and the Warning events), which
# needs the ClusterRole "caldera-watch" that `manage.py cluster_rbac` then prints. A tree of
# hundreds of namespaces wants "cluster": two thousand namespaces are 2,000 x (runtimes + 1)
# watches otherwise, each a connection and a thread.
KUBERNETES_WATCH_SCOPE = env_str("KUBERNETES_WATCH_SCOPE", "namespace")
if KUBERNETES_WATCH_SCOPE not in ("namespace", "cluster"):
    raise ImproperlyConfigured(
        f"KUBERNETES_WATCH_SCOPE={KUBERNETES_WATCH_SCOPE!r}: it is namespace or cluster"
    )
# The job runtimes the cluster has operators for, in order of preference per kind: a Ray
# job runs on the first of kuberay/volcano listed, a PyTorch job on the first of
# kubeflow/volcano, unless its submission names another listed one. The form and the API
# offer only these.
CLUSTER_RUNTIMES = [
    r.strip()
    for r in env_str("CLUSTER_RUNTIMES", "kuberay,kubeflow,volcano").split(",")
    if r.strip()
]
_UNKNOWN_RUNTIMES = sorted(set(CLUSTER_RUNTIMES) - {"kuberay", "kubeflow", "volcano"})
if _UNKNOWN_RUNTIMES or not CLUSTER_RUNTIMES:
    raise ImproperlyConfigured(
        f"CLUSTER_RUNTIMES lists kuberay, kubeflow and/or volcano, got {CLUSTER_RUNTIMES!r}"
    )
# An admitted job whose pods are not all running this long after its dequeue leaves the
# cluster and waits in backoff, so a gang the cluster cannot place never holds its quota.
START_TIMEOUT_SECONDS = env_float("START_TIMEOUT_SECONDS", 300.0)
# Start timeouts a job may have: each requeues it with a backoff that doubles, and the last
# fails it with the cluster's last scheduling failure (Kueue's backoffLimitCount).
START_TIMEOUT_ATTEMPTS = env_int("START_TIMEOUT_ATTEMPTS", 5)
if START_TIMEOUT_ATTEMPTS < 1:
    raise ImproperlyConfigured(
        f"START_TIMEOUT_ATTEMPTS must be at least 1, got {START_TIMEOUT_ATTEMPTS}"
    )
# A namespace the cluster refuses Caldera's jobs in (not found, being deleted, or without
# Caldera's Role: manage.py cluster_rbac) troubles only its own jobs: admissions into it are
# held in backoff with the server's words this long, in case it comes back, then fail.
NAMESPACE_GRACE_SECONDS = env_float("NAMESPACE_GRACE_SECONDS", 600.0)
# The cluster is named unavailable (every page's banner, /healthz) once it has failed this
# long: an API server that restarts answers 503 and refuses every request for about a
# second, which is not an outage of its RBAC.
CLUSTER_UNAVAILABLE_GRACE_SECONDS = env_float("CLUSTER_UNAVAILABLE_GRACE_SECONDS", 5.0)
# A job's log, its head or master pod's: the job page shows its last JOB_LOG_TAIL_LINES
# lines, refreshed while the job runs; a download or an API read takes at most
# JOB_LOG_LIMIT_BYTES of it (the answer says when it is cut there). Logs are read while a
# person waits, so the cluster is given JOB_LOG_TIMEOUT_SECONDS and one try.
JOB_LOG_TAIL_LINES = env_int("JOB_LOG_TAIL_LINES", 100)
JOB_LOG_LIMIT_BYTES = env_int("JOB_LOG_LIMIT_BYTES", 10 * 2**20)
JOB_LOG_TIMEOUT_SECONDS = env_float("JOB_LOG_TIMEOUT_SECONDS", 5.0)
if min(JOB_LOG_TAIL_LINES, JOB_LOG_LIMIT_BYTES, JOB_LOG_TIMEOUT_SECONDS) <= 0:
    raise ImproperlyConfigured(
        "JOB_LOG_TAIL_LINES, JOB_LOG_LIMIT_BYTES and JOB_LOG_TIMEOUT_SECONDS must be above 0"
    )
# The Ray dashboard of a running Ray job, as its page links it: a URL the deployment serves
# the job's head Service at (an Ingress, a proxy), with the placeholders {namespace},
# {service} (the head Service: <RayCluster>-head-svc for a RayJob, <job>-head-svc for a
# Volcano Job with the ray plugin), {name} (the job's object) and {id}. Unset, the page
# shows the `kubectl port-forward` line that reaches it instead.
RAY_DASHBOARD_URL = env_str("RAY_DASHBOARD_URL", "")
if RAY_DASHBOARD_URL:
    if not RAY_DASHBOARD_URL.startswith(("https://", "http://")):
        raise ImproperlyConfigured(
            f"RAY_DASHBOARD_URL must begin with https:// or http://, got {RAY_DASHBOARD_URL!r}"
        )
    try:
        RAY_DASHBOARD_URL.format(namespace="n", service="s", name="j", id=1)
    except (KeyError, IndexError, ValueError) as error:
        raise ImproperlyConfigured(
            "RAY_DASHBOARD_URL may hold the placeholders {namespace}, {service}, {name} and "
            f"{{id}} only: {error!r} in {RAY_DASHBOARD_URL!r}"
        ) from None
# How large one job may be, so that no member's job can slow another's page or take the
# cluster's pods: worker groups per job (the submit form's 8) and pods per job (the head or
# master and every worker; an autoscaling group at its max_replicas). Both are declared
# in the API's schema; quota may also limit pods per department (``pods`` in min and max).
JOB_MAX_WORKER_GROUPS = env_int("JOB_MAX_WORKER_GROUPS", 8)
JOB_MAX_PODS = env_int("JOB_MAX_PODS", 1000)
if min(JOB_MAX_WORKER_GROUPS, JOB_MAX_PODS) < 1:
    raise ImproperlyConfigured("JOB_MAX_WORKER_GROUPS and JOB_MAX_PODS must be at least 1")
# A job's Kubernetes manifest may be sent as YAML (``Content-Type: application/yaml``) to
# the operations that take one (docs/api.md, "Native manifests"): read by these parsers,
# at most YAML_BODY_MAX_BYTES (a script of 1 MiB and its job fit).
MANIFEST_PARSER_CLASSES = ["portal.input.CheckedYAMLParser", "portal.input.CheckedXYAMLParser"]
YAML_BODY_MAX_BYTES = env_int("YAML_BODY_MAX_BYTES", 2 * 2**20)
if YAML_BODY_MAX_BYTES < 1:
    raise ImproperlyConfigured("YAML_BODY_MAX_BYTES must be at least 1")
# Simulated cluster nodes: "COUNTxRESOURCES" groups separated by ";", resources as
# name=quantity pairs separated by ","; after a space, "labels:k=v,..." and
# "taints:k=v:Effect,..." as kubectl writes them (jobs.cluster.simulated.parse_nodes).
# Default: 4 nodes of 16 cpu, 64Gi, 4 GPUs, labelled with their GPU's product as NVIDIA's
# GPU feature discovery labels a node.
SIMULATED_CLUSTER_NODES = env_str(
    "SIMULATED_CLUSTER_NODES",
    "4xcpu=16,memory=64Gi,nvidia.com/gpu=4 labels:nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB",
)
# Seconds between two gang scheduling cycles of a job that does not fit.
SIMULATED_SCHEDULING_CYCLE_SECONDS = env_float("SIMULATED_SCHEDULING_CYCLE_SECONDS", 5.0)

# Demo traffic: a gentle stream of jobs so queues move (make demo); 0 turns it off.
DEMO_TRAFFIC = env_bool("DEMO_TRAFFIC", True)

# Each Celery worker writes a heartbeat to Redis this often; /healthz counts the workers
# heard from within three beats (portal/heartbeat.py) instead of pinging them.
WORKER_HEARTBEAT_SECONDS = env_float("WORKER_HEARTBEAT_SECONDS", 5.0)
# Beat may run as two replicas: the one holding the beat lease sends the schedule and
# renews it every third of this; a stand-by takes over within this long after the
# leader's death (at once after a clean stop). portal/heartbeat.py.
BEAT_LEASE_SECONDS = env_float("BEAT_LEASE_SECONDS", 10.0)
# Where a worker and beat touch the file their liveness probe reads (``manage.py probe
# worker --alive``): the process runs, whatever Redis and the database do.
ALIVE_DIR = env_str("ALIVE_DIR", tempfile.gettempdir())
# /readyz and /healthz give each dependency this long (seconds): Redis's connect and its
# one read, PostgreSQL's statement (statement_timeout). A stopped Redis then costs a probe
# this much, well inside the probes' own timeouts, instead of the broker's 2 s timeout.
PROBE_TIMEOUT_SECONDS = env_float("PROBE_TIMEOUT_SECONDS", 0.5)
if not 0 < PROBE_TIMEOUT_SECONDS <= 2:
    raise ImproperlyConfigured(
        f"PROBE_TIMEOUT_SECONDS must be above 0 and at most 2, got {PROBE_TIMEOUT_SECONDS:g}"
    )

# LOG_FORMAT=json: one JSON object per line, with the request id, the person, the job and
# the Celery task (portal/logs.py); plain: a readable line. Celery's worker then logs
# through these handlers rather than its own.
LOG_FORMAT = env_str("LOG_FORMAT", "plain")
LOGGING = logging_config(LOG_FORMAT, env_str("LOG_LEVEL", "INFO"))
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
