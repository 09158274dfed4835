"""What the page tests send: a signed-in session, htmx's request header, the submit
form's fields for the seed's RayJob, and a confirmed action."""

from __future__ import annotations

import re

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


# A PyTorchJob as the form writes it: a master and two workers of 2 cpu, 8Gi, one GPU each.
PYTORCH_FORM = {
    "queue": "root/algorithm/text",
    "kind": "pytorch",
    "name": "resnet-ddp",
    "image": "pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime",
    "entrypoint": "",
    "command": "torchrun train.py",
    "script": "",
    "head_cpu": "2",
    "head_memory": "8Gi",
    "head_gpu": "1",
    "worker_name": "worker",
    "worker_replicas": "2",
    "worker_cpu": "2",
    "worker_memory": "8Gi",
    "worker_gpu": "1",
    "priority": "0",
    "run_seconds": "120",
}


def login(client, user):
    """Django's test ``client`` signed in as ``user``."""
    client.force_login(user)
    return client


def confirmed(client, url: str, data: dict, **extra):
    """POST ``data`` to ``url`` as a person does an action that asks first: once, which
    asks, then again from the question's own form, with its ``confirm`` and, past the
    threshold, the number it asks to type."""
    asked = client.post(url, data)
    assert asked.status_code == 200, asked.content
    question = asked.content.decode()
    answer = {**data, "confirm": re.search(r'name="confirm" value="(\w+)"', question)[1]}
    if typed := re.search(r'name="typed"[^>]* pattern="(\d+)"', question):
        answer["typed"] = typed[1]
    return client.post(url, answer, **extra)
