"""A refusal worded in English by a rule module that knows no languages, and what it takes
to say it in the reader's.

``kube.quantity`` and ``queues.quota`` are pure rules, run by the admission cycle, the
tree import and the tests alike, without Django's translation machinery. Their messages
are read once, by whoever was refused, in the request that was refused; so, unlike
``queues.phrases`` (stored for months), nothing is kept: a ``Said`` is the English text
itself (a ``str``: logs, the CLI's tests and every comparison read it as before) that also
carries its template and arguments, and the code that turns it into an API error or a
form's message (``queues.phrases.in_language``) translates it there, in the request's
language.

``gettext_noop`` is declared here, not imported, so these modules stay free of Django;
``makemessages`` finds the templates by that name all the same.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def gettext_noop(message: str) -> str:
    """Marks ``message`` for the catalogue; translated where it is shown."""
    return message


class Said(str):
    """English text made from ``template`` (``%(name)s`` placeholders) and ``values``."""

    template: str
    values: Mapping[str, Any]

    def __new__(cls, template: str, **values: Any) -> Said:
        said = super().__new__(cls, template % values if values else template)
        said.template, said.values = template, values
        return said
