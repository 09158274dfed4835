"""YAML as a Kubernetes manifest is written, read with the JSON body's bounds.

A YAML body reaches the same readers a JSON one does (a job's manifest, the runtime
environment inside a RayJob), so it is read to the same values and within bounds a JSON
body cannot break: one document, or several read as a ``List`` (a file of a job and its
ConfigMaps, as ``kubectl apply -f`` reads it); few aliases, and no structure that aliases
blow up past ``MAX_NODES`` values (a "billion laughs" is a few hundred bytes); no deeper nesting
than JSON's limit; and only JSON's values: a timestamp stays text, as Kubernetes reads
it, and a ``!!binary`` or ``!!set`` is refused.
"""

from __future__ import annotations

from typing import Any

import yaml

MAX_ALIASES = 100
MAX_NODES = 200_000  # every value, an alias counted again each time: far beyond a job's
MAX_DEPTH = 100


class YamlRefused(ValueError):
    """Text that is not one YAML document within the bounds: ``field`` is where (``body``
    for the whole), the message why."""

    def __init__(self, reason: str, field: str = "body"):
        super().__init__(reason)
        self.field = field


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader with aliases counted, and timestamps left as text."""

    def __init__(self, stream: str):
        super().__init__(stream)
        self.aliases = 0

    def compose_node(self, parent, index):  # type: ignore[no-untyped-def]
        if self.check_event(yaml.AliasEvent):
            self.aliases += 1
            if self.aliases > MAX_ALIASES:
                raise YamlRefused(f"has more than {MAX_ALIASES} aliases")
        return super().compose_node(parent, index)


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


MAX_DOCUMENTS = 50  # a job and its ConfigMaps, as a file of several documents holds them


def load_file(text: str) -> Any:
    """What ``text`` holds, as JSON would hold it, read as ``kubectl apply -f`` reads a
    file: one document is itself; several (``---`` between them) are the ``v1`` ``List`` of
    those that are not empty. YamlRefused otherwise."""
    loader = _Loader(text)
    documents = []
    try:
        while loader.check_data():  # type: ignore[no-untyped-call]
            document = loader.get_data()
            if document is not None:
                documents.append(document)
            if len(documents) > MAX_DOCUMENTS:
                raise YamlRefused(f"holds more than {MAX_DOCUMENTS} documents")
    except yaml.YAMLError as error:
        raise YamlRefused(f"is not YAML: {error}") from None
    except RecursionError:
        raise YamlRefused(f"is nested deeper than {MAX_DEPTH} levels") from None
    finally:
        loader.dispose()
    data = (
        documents[0]
        if len(documents) == 1
        else {"apiVersion": "v1", "kind": "List", "items": documents}
        if documents
        else None
    )
    _check(data)
    return data


def _check(data: Any) -> None:
    """Only JSON's values, within MAX_NODES and MAX_DEPTH, walked as a JSON encoder would
    walk them (an alias's value once for each time it is used)."""
    stack: list[tuple[Any, str, int]] = [(data, "", 0)]
    seen = 0
    while stack:
        value, where, depth = stack.pop()
        seen += 1
        if seen > MAX_NODES:
            raise YamlRefused(f"holds more than {MAX_NODES} values (aliases count each time)")
        if depth > MAX_DEPTH:
            raise YamlRefused(f"is nested deeper than {MAX_DEPTH} levels")
        if isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(key, str):
                    raise YamlRefused(f"has a key that is not text: {key!r}", where or "body")
                stack.append((item, f"{where}.{key}" if where else key, depth + 1))
        elif isinstance(value, list):
            stack.extend((item, f"{where}[{i}]", depth + 1) for i, item in enumerate(value))
        elif not (value is None or isinstance(value, str | int | float | bool)):
            kind = type(value).__name__
            raise YamlRefused(f"is a YAML {kind}, not a JSON value; quote it", where or "body")
