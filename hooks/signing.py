"""A hook's secret and the signature of each delivery.

The signature is HMAC-SHA256 with the hook's secret over ``<timestamp>.<body>``, sent as
``Caldera-Signature: v1=<hex>`` beside ``Caldera-Timestamp: <unix seconds>``. Signing the
timestamp with the body lets a receiver refuse an old delivery replayed at it: it checks
the signature and that the timestamp is recent (README.md shows the five lines). ``v1=``
names the scheme, so a second one could be sent beside it one day.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

SECRET_PREFIX = "whsec_"


def secret_new() -> str:
    return SECRET_PREFIX + secrets.token_urlsafe(32)


def signature(secret: str, timestamp: int, body: bytes) -> str:
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return "v1=" + digest.hexdigest()
