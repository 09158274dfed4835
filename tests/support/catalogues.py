"""The translation catalogues compiled for a test that reads a page in Chinese.

The compiled files are never kept in the repository (``make`` builds them); a test that
needs them compiles each catalogue newer than its compiled file, writing it beside the
catalogue under another name and moving it into place, so that two test processes
compiling at once never read half a file. Then Django forgets the catalogues it has read
(a process that rendered a Chinese page before they were compiled read none)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from django.conf import settings
from django.test import override_settings


def compile_catalogues() -> None:
    for folder in settings.LOCALE_PATHS:
        for source in Path(folder).glob("*/LC_MESSAGES/*.po"):
            target = source.with_suffix(".mo")
            if target.exists() and target.stat().st_mtime >= source.stat().st_mtime:
                continue
            partial = target.with_name(f"{target.name}.{os.getpid()}")
            subprocess.run(["msgfmt", "--check", "-o", str(partial), str(source)], check=True)
            partial.replace(target)
    # A changed LOCALE_PATHS makes Django drop the catalogues it has loaded.
    with override_settings(LOCALE_PATHS=list(settings.LOCALE_PATHS)):
        pass
