"""A rate limit as the settings write it: ``3000/min``, Django REST framework's form (a
count, a slash, then ``s``, ``min``, ``hour`` or ``day``), or ``off``.

Kept apart from portal/throttling.py, which counts against these rates, because the
settings read them too, to refuse a malformed one when the process starts, and the
settings cannot import DRF's throttling (it reads the settings as it is imported).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

OFF = "off"
# Each period's spellings in DRF's form, its seconds, and how a sentence says it.
PERIODS = {
    ("s", "sec", "second"): (1, "a second"),
    ("m", "min", "minute"): (60, "a minute"),
    ("h", "hour"): (3600, "an hour"),
    ("d", "day"): (86_400, "a day"),
}
_SPELLINGS = {spelling: period for spellings, period in PERIODS.items() for spelling in spellings}
_FORM = re.compile(r"(\d+)/([a-z]+)")


@dataclass(frozen=True)
class Rate:
    count: int  # at most this many in each window...
    seconds: int  # ...of this many seconds
    per: str  # "a minute"
    text: str  # as written: "3000/min"


@cache
def parse_rate(text: str) -> Rate | None:
    """The rate ``text`` writes, or None for ``off``; ValueError saying the form of any
    other text."""
    text = text.strip()
    if text.lower() == OFF:
        return None
    matched = _FORM.fullmatch(text)
    period = matched and _SPELLINGS.get(matched[2])
    if not matched or not period or int(matched[1]) < 1:
        raise ValueError(
            f"must be a count of at least 1 per s, min, hour or day (3000/min), or {OFF}; "
            f"got {text!r}"
        )
    seconds, per = period
    return Rate(count=int(matched[1]), seconds=seconds, per=per, text=text)
