"""How a time is written in a page, every page: ``{% moment value %}``.

``{% load times %}`` then ``{% moment job.enqueued_at %}`` writes
``<time datetime="2026-11-27T19:14:05+08:00" title="Friday 2026-11-27 19:14:05
(Asia/Shanghai, UTC+08:00)">2026-11-27 19:14:05</time>``: the exact time in the zone the
page is shown in (the person's choice, else their browser's: portal/preferences.py), that
zone named in the title, and the instant itself for scripts.

The form is ``"datetime"`` (the default), ``"time"`` or ``"date"``; ``seconds=False``
drops the seconds. ``relative=True`` marks the time for static/time.js, which shows it as
"3 minutes ago" or "in 2 hours"; ``countdown=True`` as "in 1:23", ticking each second and
ending in "now". The page's bytes stay the exact time either way: the polled fragments are
validated by a hash of their bytes (portal/fragments.py), so words that change with the
clock are written by the browser, never here. ``default`` is what stands for no time.
"""

from __future__ import annotations

from datetime import datetime

from django import template
from django.utils import timezone
from django.utils.dateformat import format as date_format
from django.utils.html import format_html
from django.utils.translation import gettext

from access.preferences import zone_label

register = template.Library()

FORMS = {"datetime": "Y-m-d H:i:s", "time": "H:i:s", "date": "Y-m-d"}
FULL = "l Y-m-d H:i:s"  # the title's: the weekday too, in the page's language


def local(value: datetime) -> datetime:
    """``value`` in the zone the page is shown in."""
    return timezone.localtime(value) if timezone.is_aware(value) else value


def title(moment: datetime) -> str:
    """The full date and time and its zone: "Friday 2026-11-27 19:14:05 (Asia/Shanghai,
    UTC+08:00)"."""
    return f"{date_format(moment, FULL)} ({zone_label(moment)})"


@register.simple_tag
def moment(
    value: datetime | None,
    form: str = "datetime",
    *,
    seconds: bool = True,
    relative: bool = False,
    countdown: bool = False,
    note: str = "",
    default: str = "",
) -> str:
    """A ``<time>`` element for ``value`` (module docstring); ``note`` leads its title (an
    estimate's basis)."""
    if value is None:
        return default
    shown = local(value)
    written = FORMS[form]
    if not seconds:
        written = written.replace(":s", "")
    hover = f"{note} · {title(shown)}" if note else title(shown)
    if countdown:
        return format_html(
            '<time datetime="{}" title="{}" data-countdown="{}">{}</time>',
            shown.isoformat(timespec="seconds"), hover,
            # "in 1:23": the words around the time left, in the page's language.
            gettext("in %s"), date_format(shown, written),
        )  # fmt: skip
    return format_html(
        '<time datetime="{}" title="{}"{}>{}</time>',
        shown.isoformat(timespec="seconds"), hover,
        " data-relative" if relative else "", date_format(shown, written),
    )  # fmt: skip


@register.simple_tag
def zone_shown() -> str:
    """The zone the page's times are in, as the page names it: "Asia/Shanghai, UTC+08:00"."""
    return zone_label(timezone.localtime())
