"""Job documents from files: Caldera's own, as ``POST /api/v1/jobs/`` takes them, in JSON or
YAML (several YAML documents in one file, separated by ``---``, are several jobs)."""

from __future__ import annotations

import json
import sys
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
