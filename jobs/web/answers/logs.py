"""The end of a job's log as the API answers it."""

from __future__ import annotations

from rest_framework import serializers


class JobLogOut(serializers.Serializer):
    """The end of a job's log: its main pod's (a Ray job's head, a PyTorch job's master)."""

    pod = serializers.CharField(help_text="the pod whose log this is")
    lines = serializers.ListField(
        child=serializers.CharField(allow_blank=True, trim_whitespace=False),
        help_text="its lines, oldest first, without their line ends",
    )
    truncated = serializers.BooleanField(
        help_text="not the whole log: earlier lines were left out (tail_lines), or the log "
        "was cut at the server's byte limit (its last line may then be cut short)"
    )
