"""The secrets of access tokens: how they look, and the digest that is all we keep of them.

``cal_pat_`` (a personal access token) or ``cal_wit_`` (a workload identity's, from an
exchange), 32 random base62 characters, then a 6-character CRC32 of them: a secret scanner
finds leaked ones by the prefix and tells them from look-alikes by the checksum, and a typo
is refused without a database lookup. Tokens from before scoped tokens (40 hex
characters) keep working: they are found by their digest like any other.
"""

from __future__ import annotations

import hashlib
import secrets
import string
import zlib

from .models import AccessToken

PERSONAL_PREFIX = "cal_pat_"
EXCHANGED_PREFIX = "cal_wit_"
PREFIXES: dict[str, str] = {
    AccessToken.Kind.PERSONAL: PERSONAL_PREFIX,
    AccessToken.Kind.EXCHANGED: EXCHANGED_PREFIX,
}
ALPHABET = string.digits + string.ascii_letters
RANDOM_LENGTH = 32
CHECKSUM_LENGTH = 6
SHOWN = 6  # random characters kept beside the prefix to name a token
LONGEST = 100  # no key is longer: anything longer is refused before any lookup


def _base62(number: int, width: int) -> str:
    digits = []
    for _ in range(width):
        number, digit = divmod(number, len(ALPHABET))
        digits.append(ALPHABET[digit])
    return "".join(reversed(digits))


def _checksum(body: str) -> str:
    return _base62(zlib.crc32(body.encode()), CHECKSUM_LENGTH)


def new_key(kind: str) -> str:
    body = "".join(secrets.choice(ALPHABET) for _ in range(RANDOM_LENGTH))
    return PREFIXES[kind] + body + _checksum(body)


def key_refusal(key: str) -> str | None:
    """Why ``key`` cannot be a token, or None: a key with our prefix must carry its checksum."""
    if not key or len(key) > LONGEST or not key.isascii() or not key.isprintable():
        return "the token is malformed"
    for prefix in PREFIXES.values():
        if key.startswith(prefix):
            body, checksum = key[len(prefix) : -CHECKSUM_LENGTH], key[-CHECKSUM_LENGTH:]
            if len(body) != RANDOM_LENGTH or _checksum(body) != checksum:
                return "the token is malformed (its checksum does not match)"
    return None


def digest(key: str) -> str:
    """What is stored of a key. Keys carry 190 random bits, so a fast hash is enough: no
    one can search that space, and the lookup on every request stays cheap."""
    return hashlib.sha256(key.encode()).hexdigest()


def display_prefix(key: str) -> str:
    """The part of a key shown to name it: ``cal_pat_AbC123``, or a legacy key's first 8."""
    for prefix in PREFIXES.values():
        if key.startswith(prefix):
            return key[: len(prefix) + SHOWN]
    return key[:8]
