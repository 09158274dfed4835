"""The end of a job's log as the API answers it."""

from __future__ import annotations

from rest_framework import serializers

# The header that tells an answer of the kept end of a log from one read from the cluster.
LOG_HEADER = "X-Caldera-Log"
KEPT_TAIL = "kept-tail"


class JobLogOut(serializers.Serializer):
    """The end of a job's log: its main pod's (a Ray job's head, a PyTorch job's master)."""

    pod = serializers.CharField(help_text="the pod whose log this is")
    lines = serializers.ListField(
        child=serializers.CharField(allow_blank=True, trim_whitespace=False),
        help_text="its lines, oldest first, without their line ends",
    )
    kept_at = serializers.DateTimeField(
        allow_null=True,
        help_text="not read from the cluster: the end of the log Caldera kept when the job "
        "ended, at this time, before its pods were removed (the answer's X-Caldera-Log "
        "header is then kept-tail); null when read from the cluster now",
    )
    exit_code = serializers.IntegerField(
        allow_null=True,
        help_text="the exit code of the pod's main container once it has ended, as the "
        "cluster said; null while it runs or when unknown",
    )
    truncated = serializers.BooleanField(
        help_text="not the whole log: earlier lines were left out (tail_lines), or the log "
        "was cut at the server's byte limit (its last line may then be cut short)"
    )
