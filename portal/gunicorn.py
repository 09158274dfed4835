"""gunicorn's settings and hooks for Caldera's web server (``gunicorn -c python:portal.gunicorn``):
the figures its workers share (portal/process_metrics.py) start clean and outlive a worker;
refusals are JSON and /livez is answered by the arbiter on the probe port
(portal/web_server.py).

PROBE_PORT (unset or 0: no listener; the image sets 8001) and PROBE_HOST (default
0.0.0.0) are read here, from the environment, as gunicorn's arbiter never loads Django's
settings.
"""

import os

from gunicorn import glogging

from portal.logs import Context, JsonFormatter
from portal.process_metrics import forget_dead_processes, process_exited
from portal.web_server import LivenessListener, json_refusals

# Limits of what gunicorn reads before Django sees a request; beyond them it answers
# 414 or 431 (JSON, json_refusals). 8190 bytes, gunicorn's largest, matches the 8 KiB
# lines of common proxies, so a URL the ingress passed is not refused here; Caldera's
# own links are far shorter (lists by id go in a POST body).
limit_request_line = 8190
limit_request_field_size = 8190
limit_request_fields = 100


def _env_port(name: str) -> int:
    value = os.environ.get(name, "").strip() or "0"
    if not value.isdigit() or int(value) > 65535:
        raise RuntimeError(f"{name} must be a port number (0: none), got {value!r}")
    return int(value)


class JsonLogger(glogging.Logger):
    """gunicorn's own lines (its errors, its access log) as JSON objects, one per line,
    like Django's with LOG_FORMAT=json (portal/logs.py)."""

    def setup(self, cfg) -> None:
        super().setup(cfg)
        for log in (self.error_log, self.access_log):
            for handler in log.handlers:
                handler.setFormatter(JsonFormatter())
                handler.addFilter(Context())


if os.environ.get("LOG_FORMAT", "plain") == "json":
    logger_class = JsonLogger

PROBE_PORT = _env_port("PROBE_PORT")
PROBE_HOST = os.environ.get("PROBE_HOST", "").strip() or "0.0.0.0"

_liveness: LivenessListener | None = None


def on_starting(server) -> None:
    forget_dead_processes()


def when_ready(server) -> None:
    """The arbiter listens; before its first worker is forked, the probe listener starts."""
    global _liveness
    if PROBE_PORT:
        _liveness = LivenessListener(server, PROBE_HOST, PROBE_PORT)
        _liveness.start()
        server.log.info("Liveness probe at http://%s:%d/livez", PROBE_HOST, PROBE_PORT)


def post_fork(server, worker) -> None:
    json_refusals()
    if _liveness is not None:
        _liveness.close_in_worker()


def child_exit(server, worker) -> None:
    process_exited(worker.pid)


def on_exit(server) -> None:
    if _liveness is not None:
        _liveness.stop()
