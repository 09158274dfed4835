"""gunicorn's hooks for Caldera's web server (``gunicorn -c python:portal.gunicorn``): the
figures its workers share (portal/process_metrics.py) start clean and outlive a worker."""

from portal.process_metrics import forget_dead_processes, process_exited


def on_starting(server) -> None:
    forget_dead_processes()


def child_exit(server, worker) -> None:
    process_exited(worker.pid)
