"""What the page tests send: a signed-in session, htmx's request header, and the submit
form's fields for the seed's RayJob."""

from __future__ import annotations

HTMX = {"HX-Request": "true"}

RAY_FORM = {
    "queue": "root/algorithm/video",
    "kind": "ray",
    "name": "rayjob-video",
    "image": "rayproject/ray:2.36.1",
    "entrypoint": "python /home/ray/samples/sample_code.py",
    "command": "",
    "script": "",
    "head_cpu": "4",
    "head_memory": "4G",
    "head_gpu": "",
    "worker_name": "small-group",
    "worker_replicas": "2",
    "worker_cpu": "4",
    "worker_memory": "4G",
    "worker_gpu": "",
    "priority": "0",
    "run_seconds": "600",
}


def login(client, user):
    """Django's test ``client`` signed in as ``user``."""
    client.force_login(user)
    return client
