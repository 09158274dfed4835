"""Job documents from files: Caldera's own, as ``POST /api/v1/jobs/`` takes them, in JSON or
YAML (several YAML documents in one file, separated by ``---``, are several jobs)."""

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
            source = path if len(parsed) == 1 else f"{path}#{index}"
            documents.append(Document(source, _checked(source, body)))
    return documents


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
    if "apiVersion" in body:
        raise BadDocument(
            f"{source}: a Kubernetes manifest ({body.get('kind', 'unknown kind')}); caldera submit "
            "takes Caldera job documents only (docs/api.md, POST /api/v1/jobs/)"
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
