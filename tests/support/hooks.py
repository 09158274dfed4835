"""The five lines of README.md that check a webhook's signature, read from the README itself,
so that the README cannot show lines that do not work."""

from __future__ import annotations

import re

from .paths import REPO


def readme_verify():
    """``verify(secret, headers, body)`` as README.md writes it (the block after the
    ``webhook-verify`` marker)."""
    text = (REPO / "README.md").read_text()
    found = re.search(r"<!-- webhook-verify -->\n```python\n(.*?)```", text, re.S)
    assert found is not None, "README.md shows no webhook-verify block"
    lines = [line for line in found.group(1).splitlines() if line.strip()]
    assert len(lines) == 5, lines
    namespace: dict = {}
    exec(found.group(1), namespace)  # noqa: S102 - the README's own lines, run as a reader would
    return namespace["verify"]
