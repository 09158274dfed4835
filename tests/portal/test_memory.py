"""A web worker and a Celery pool process keep what they loaded out of the garbage
collector's full passes (portal/memory.py), so that a request or a task that makes many
objects does not walk Django and the project again each time."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ..support.paths import REPO

LOADED = 10_000  # Django and the project alone are well over this many objects


def frozen_after(code: str) -> int:
    """How many objects a fresh interpreter has frozen after running ``code``."""
    done = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport gc\nprint(gc.get_freeze_count())"],
        cwd=REPO,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "portal.settings"},
        capture_output=True,
        text=True,
        check=True,
    )
    return int(done.stdout.split()[-1])


def test_nothing_is_frozen_by_merely_setting_django_up():
    assert frozen_after("import django\ndjango.setup()") == 0


@pytest.mark.parametrize(
    "code",
    [
        "import portal.wsgi",  # what gunicorn's worker imports
        "from celery.signals import worker_process_init\nimport django\ndjango.setup()\n"
        "import portal.celery\nworker_process_init.send(sender=None)",
    ],
    ids=["web worker", "celery pool process"],
)
def test_a_loaded_process_freezes_what_it_loaded(code):
    assert frozen_after(code) > LOADED
