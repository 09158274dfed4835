"""The ``Idempotency-Key`` header of a submission, declared once: how it reads from a
request, what it is checked against (the body's digest) and how the schema states it.

A key is 1 to ``IDEMPOTENCY_KEY_MAX`` visible ASCII characters (``!`` to ``~``, no space:
a proxy may trim spaces at either end, and the key must arrive as it was sent), such as a
UUID or a pipeline's run id and attempt. Any other value answers 400 naming the header.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass

from django.utils.translation import gettext as _
from drf_spectacular.utils import OpenApiParameter

from jobs.document.validation import JobInvalid

IDEMPOTENCY_HEADER = "Idempotency-Key"
IDEMPOTENCY_KEY_MAX = 255
IDEMPOTENCY_KEY_PATTERN = rf"^[!-~]{{1,{IDEMPOTENCY_KEY_MAX}}}$"
REPLAYED_HEADER = "Idempotent-Replayed"


@dataclass(frozen=True)
class IdempotencyKey:
    """A request's key and the digest of what it asks (``request_digest``)."""

    key: str
    digest: str


def idempotency_key(headers, *, endpoint: str, body: object) -> IdempotencyKey | None:
    """The request's key with its body's digest; None without the header; JobInvalid
    naming the header when its value is not a key."""
    value = headers.get(IDEMPOTENCY_HEADER)
    if value is None:
        return None
    if not re.fullmatch(IDEMPOTENCY_KEY_PATTERN, value):
        raise JobInvalid(
            {
                IDEMPOTENCY_HEADER: _(
                    "must be 1 to %(most)s visible ASCII characters (! to ~, no space)"
                )
                % {"most": IDEMPOTENCY_KEY_MAX}
            }
        )
    return IdempotencyKey(key=value, digest=request_digest(endpoint=endpoint, body=body))


def request_digest(*, endpoint: str, body: object) -> str:
    """sha256 (hex) of the endpoint and the body's canonical JSON (keys sorted, no spaces):
    the same document sent with its keys in another order is the same request, and a job
    sent alone is not a batch of one."""
    canonical = json.dumps(
        {"endpoint": endpoint, "body": body},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def idempotency_parameter(what: str) -> OpenApiParameter:
    """The header as the schema states it on a submit operation."""
    return OpenApiParameter(
        IDEMPOTENCY_HEADER,
        {
            "type": "string",
            "minLength": 1,
            "maxLength": IDEMPOTENCY_KEY_MAX,
            "pattern": IDEMPOTENCY_KEY_PATTERN,
        },
        OpenApiParameter.HEADER,
        required=False,
        description=f"Makes a retry safe: a request with a key you sent in the last "
        f"IDEMPOTENCY_KEY_HOURS (24 by default) and the same body answers 200 with {what} "
        "that request queued, as they are now, and queues nothing; the same key with "
        "another body answers 409. Keys are yours, whichever token sends them.",
    )
