"""The figures processes count (jobs.telemetry, portal.metrics' HTTP figures), gathered
across the processes of one machine.

With PROMETHEUS_MULTIPROC_DIR set (the image sets it), prometheus_client writes every
process's figures to files there and a scrape adds them up: gunicorn's workers for the web
server's /metrics, Celery's pool for the worker's own endpoint (WORKER_METRICS_PORT).
Without it, a scrape sees the answering process alone. This module imports nothing of
Django, so gunicorn's master and Celery's signals can use it before Django is set up.
"""

from __future__ import annotations

import hmac
import os
import threading
from pathlib import Path
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import prometheus_client
from prometheus_client import CollectorRegistry, multiprocess

PROCESS_FILE_SUFFIX = ".db"


def process_registry() -> CollectorRegistry:
    """Every process's figures where they are shared, else this process's."""
    folder = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if not folder:
        return prometheus_client.REGISTRY
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, path=folder)
    return registry


def forget_dead_processes() -> None:
    """At a start (gunicorn's master, Celery's main process): the files left by processes
    that no longer run go, so a restarted container does not count a past life's figures
    beside a new one's. Files of live processes (another server sharing the folder) stay."""
    folder = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if not folder:
        return
    Path(folder).mkdir(parents=True, exist_ok=True)
    for path in Path(folder).glob(f"*{PROCESS_FILE_SUFFIX}"):
        pid = path.stem.rsplit("_", 1)[-1]
        if pid.isdigit() and not _alive(int(pid)):
            path.unlink(missing_ok=True)


def process_exited(pid: int) -> None:
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        multiprocess.mark_process_dead(pid)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def allowed(authorization: str, remote_address: str, token: str) -> tuple[int, str] | None:
    """None when a scrape may read; else the status and the reason. With a token, the
    request must bear it; without, only the machine itself may read."""
    if token:
        sent = authorization.removeprefix("Bearer ")
        if not hmac.compare_digest(sent.encode(), token.encode()):
            return 401, "a bearer token (METRICS_TOKEN) is required\n"
        return None
    if remote_address not in ("127.0.0.1", "::1"):
        return 403, "set METRICS_TOKEN to read the metrics from another machine\n"
    return None


class _Quiet(WSGIRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 (the base class's name)
        pass


def serve_process_metrics(host: str, port: int, token: str) -> WSGIServer:
    """The worker's own /metrics, on a thread of its main process: its pool's figures,
    under the same token rule as the web server's. Returns the server (``shutdown()``)."""
    figures = prometheus_client.make_wsgi_app(process_registry())

    def app(environ, start_response):
        refusal = allowed(
            environ.get("HTTP_AUTHORIZATION", ""), environ.get("REMOTE_ADDR", ""), token
        )
        if refusal is not None:
            status, reason = refusal
            start_response(f"{status} {'Unauthorized' if status == 401 else 'Forbidden'}", [])
            return [reason.encode()]
        return figures(environ, start_response)

    server = make_server(host, port, app, handler_class=_Quiet)
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    return server
