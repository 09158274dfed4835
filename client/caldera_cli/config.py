"""Where the server and the token come from: ``caldera login`` writes them to
``$XDG_CONFIG_HOME/caldera/config.json`` (``~/.config`` by default), readable by its owner
only; ``CALDERA_URL`` and ``CALDERA_TOKEN`` override the file, so a pipeline needs no file."""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path


class NotConfigured(Exception):
    """No server or no token: neither login nor the environment gave one."""


@dataclass(frozen=True)
class Settings:
    url: str
    token: str


def config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(Path.home(), ".config")
    return Path(base) / "caldera" / "config.json"


def read_file() -> dict[str, str]:
    """The saved settings, or nothing when there is no file yet."""
    try:
        with open(config_path(), encoding="utf-8") as file:
            saved = json.load(file)
    except FileNotFoundError:
        return {}
    return {key: value for key, value in saved.items() if isinstance(value, str)}


def settings() -> Settings:
    """The environment's values, else the file's."""
    saved = read_file()
    url = os.environ.get("CALDERA_URL") or saved.get("url")
    token = os.environ.get("CALDERA_TOKEN") or saved.get("token")
    if not url:
        raise NotConfigured("no server: run `caldera login --url URL` or set CALDERA_URL")
    if not token:
        raise NotConfigured("no token: run `caldera login` or set CALDERA_TOKEN")
    return Settings(url=normalise_url(url), token=token)


def normalise_url(url: str) -> str:
    url = url.strip().rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise NotConfigured(f"{url!r} is not an http:// or https:// address")
    return url


def save(values: dict[str, str]) -> Path:
    """Write the settings with mode 0600 (in a directory of mode 0700), replacing the file
    whole so a reader never sees half of it."""
    path = config_path()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=".config-")
    try:
        os.fchmod(descriptor, 0o600)  # mkstemp's default, said out loud
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            json.dump(values, file, indent=2)
            file.write("\n")
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise
    return path
