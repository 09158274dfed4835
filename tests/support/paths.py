"""Where the tests find the repository's own files (deploy/, k8s/, bench/, the seed tree),
whichever folder a test module is in."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
