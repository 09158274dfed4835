"""Job documents from files, as ``POST /api/v1/jobs/`` takes them, in JSON or YAML: Caldera's
own, or the Kubernetes objects a team already has (a RayJob, a PyTorchJob, a Volcano Job).
A file of one job object and other objects (the ConfigMaps it mounts, a Volcano Queue) is
one job, sent whole as a ``v1`` ``List`` in the file's order, as ``kubectl apply -f`` would
apply it (the server keeps the ConfigMaps with the job, and replaces a Queue by the job's
own when ``--queue`` names it); several YAML documents that are each a job are several
jobs."""

from __future__ import annotations

import hashlib
import json
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml


class BadDocument(Exception):
    pass


@dataclass(frozen=True)
class Document:
    source: str  # "train.yaml", "train.yaml#2" for a file's second document, "-" for stdin
    body: dict[str, Any]

    @property
    def native(self) -> bool:
        """A Kubernetes object (or a List of one and its script), not Caldera's document:
        ``--queue`` and ``--priority`` go with it as the query's, since it has no such
        fields."""
        return "apiVersion" in self.body


# The kinds of object that are a job.
JOB_KINDS = ("RayJob", "PyTorchJob", "Job")


def read(paths: list[str]) -> list[Document]:
    documents: list[Document] = []
    for path in paths:
        text = _text(path)
        try:
            if path.endswith(".json"):
                parsed: list[Any] = [json.loads(text)]
            else:
                parsed = [d for d in yaml.safe_load_all(text) if d is not None]
        except (ValueError, yaml.YAMLError) as error:
            raise BadDocument(f"{path}: not JSON or YAML: {error}") from error
        if not parsed:
            raise BadDocument(f"{path}: no document in it")
        for index, body in enumerate(parsed, start=1):
            _checked(path if len(parsed) == 1 else f"{path}#{index}", body)
        documents.extend(_jobs(path, parsed))
    return documents


def _is_job(body: dict[str, Any]) -> bool:
    return "apiVersion" not in body or body.get("kind") in JOB_KINDS


def _jobs(path: str, parsed: list[dict[str, Any]]) -> list[Document]:
    """A file's jobs: each document when every one is a job; else the file's one job with
    the other objects, as one List in the file's order."""
    if len(parsed) == 1 or all(_is_job(body) for body in parsed):
        return [
            Document(path if len(parsed) == 1 else f"{path}#{index}", body)
            for index, body in enumerate(parsed, start=1)
        ]
    jobs = [body for body in parsed if _is_job(body)]
    if len(jobs) != 1 or "apiVersion" not in jobs[0]:
        raise BadDocument(
            f"{path}: the ConfigMaps and other objects of a file go with its one job object "
            f"(this file has {len(jobs)} jobs)"
        )
    return [Document(path, {"apiVersion": "v1", "kind": "List", "items": parsed})]


def _text(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    try:
        with open(path, encoding="utf-8") as file:
            return file.read()
    except OSError as error:
        raise BadDocument(f"{path}: {error.strerror}") from error


def _checked(source: str, body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise BadDocument(
            f"{source}: a job document is a mapping of fields, not {type(body).__name__}"
        )
    return body


# Where a CI platform says which run, attempt and step this is: (variable, ...) per platform.
CI_RUN = {
    "github": ("GITHUB_RUN_ID", "GITHUB_RUN_ATTEMPT", "GITHUB_JOB", "GITHUB_ACTION"),
    "gitlab": ("CI_PIPELINE_ID", "CI_JOB_ID"),  # a retried GitLab job has an id of its own
}


def ci_key(bodies: list[dict[str, Any]], environ: Mapping[str, str]) -> str | None:
    """The Idempotency-Key a CI step submits with by default: its run, attempt and step, and
    a digest of the documents (so that two submits of one step are two requests), or None
    outside CI. A step that retries (or a pipeline that re-runs it) in the same attempt
    gets the jobs it queued the first time; a new attempt queues anew."""
    for platform, names in CI_RUN.items():
        if all(environ.get(name) for name in names):
            digest = hashlib.sha256(json.dumps(bodies, sort_keys=True).encode()).hexdigest()
            run = "-".join(environ[name] for name in names)
            return re.sub(r"[^!-~]", "_", f"{platform}-{run}-{digest[:16]}")[:255]
    return None
