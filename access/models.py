"""Credentials: access tokens, the trust policies that exchange a CI platform's ID token for
one, the exchanges made, and the service identities a department's pipelines act as.

A token's secret is shown once, when it is made, and stored only as its SHA-256 digest; its
prefix (``cal_pat_AbC123``) is kept to name it on pages, in the audit and to a secret
scanner's report.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from queues.models import Department
from queues.scope import Right


class TrustPolicy(models.Model):
    """Which CI jobs may sign in as whom: an ID token from ``issuer`` for ``audience`` whose
    claims meet every condition is exchanged for a token acting as ``acts_as`` with this
    policy's scope, for ``lifetime_seconds``."""

    name = models.SlugField(max_length=63, unique=True)
    issuer = models.URLField(
        max_length=500, help_text="e.g. https://token.actions.githubusercontent.com"
    )
    audience = models.CharField(max_length=255, help_text="the aud the CI job asks its token for")
    conditions = models.JSONField(
        default=dict,
        blank=True,
        help_text='claim name -> value or glob, e.g. {"repository": "org/repo", '
        '"ref": "refs/heads/main", "sub": "repo:org/repo:*"}',
    )
    acts_as = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="trust_policies"
    )
    right = models.CharField(max_length=10, choices=Right.choices, default=Right.SUBMIT)
    departments = models.ManyToManyField(Department, blank=True, related_name="+")
    lifetime_seconds = models.PositiveIntegerField(
        default=900, validators=[MinValueValidator(60), MaxValueValidator(12 * 3600)]
    )
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]
        verbose_name_plural = "trust policies"

    def __str__(self) -> str:
        return self.name


TOKEN_STATES = ("active", "expired", "revoked")


class AccessToken(models.Model):
    class Kind(models.TextChoices):
        PERSONAL = "personal", "personal access token"
        EXCHANGED = "exchanged", "exchanged for a CI job's ID token"
        LEGACY = "legacy", "a token from before scoped tokens"

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="access_tokens"
    )
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.PERSONAL)
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=20, db_index=True)
    digest = models.CharField(max_length=64, unique=True)  # SHA-256 of the secret, hex
    right = models.CharField(max_length=10, choices=Right.choices)
    all_departments = models.BooleanField(
        default=False, help_text="every department of the person's, today's and later ones"
    )
    departments = models.ManyToManyField(Department, blank=True, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    expires_at = models.DateTimeField(null=True, blank=True)  # None: never
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    last_used_at = models.DateTimeField(null=True, blank=True)
    last_used_from = models.GenericIPAddressField(null=True, blank=True)
    # The addresses it was used from, the latest last (ADDRESSES_KEPT of them): a use from
    # any other is recorded in the audit.
    addresses = ArrayField(models.GenericIPAddressField(), default=list, blank=True)
    expiry_recorded = models.BooleanField(default=False)
    policy = models.ForeignKey(
        TrustPolicy, null=True, blank=True, on_delete=models.SET_NULL, related_name="tokens"
    )

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.name})"

    def state(self, now=None) -> str:
        """One of TOKEN_STATES."""
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at is not None and self.expires_at <= (now or timezone.now()):
            return "expired"
        return "active"


class Exchange(models.Model):
    """One ID token exchanged for an access token: the policy, the claims it matched."""

    at = models.DateTimeField(default=timezone.now, db_index=True)
    policy = models.ForeignKey(
        TrustPolicy, null=True, on_delete=models.SET_NULL, related_name="exchanges"
    )
    issuer = models.CharField(max_length=500)
    subject = models.CharField(max_length=500)
    claims = models.JSONField(default=dict)  # the conditions' claims, and iss, sub, aud
    token = models.ForeignKey(
        AccessToken, null=True, on_delete=models.SET_NULL, related_name="exchanges"
    )
    address = models.GenericIPAddressField(null=True, blank=True)

    class Meta:
        ordering = ["-at", "-id"]

    def __str__(self) -> str:
        return f"{self.subject} through {self.policy or 'a deleted policy'}"


class ServiceIdentity(models.Model):
    """A department's pipelines as a user of their own: no password, no sign-in, a member
    of that one department (submit rights at most), managed by its managers."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="service_identity"
    )
    department = models.ForeignKey(
        Department, on_delete=models.CASCADE, related_name="service_identities"
    )
    description = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["department__name", "user__username"]
        verbose_name_plural = "service identities"

    def __str__(self) -> str:
        return self.user.username


class Preference(models.Model):
    """How a person reads the pages: language, time zone and theme. Blank means "as my
    browser says" (its Accept-Language, its time zone, its prefers-color-scheme); a
    person without a row reads everything as their browser says. Applied to every page and
    fragment by portal.preferences.PersonPreferences."""

    class Theme(models.TextChoices):
        AUTO = "", _("As my system")
        LIGHT = "light", _("Light")
        DARK = "dark", _("Dark")

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        primary_key=True,
        on_delete=models.CASCADE,
        related_name="preference",
    )
    # One of settings.LANGUAGES, or blank.
    language = models.CharField(max_length=16, blank=True)
    # An IANA zone name (zoneinfo.available_timezones()), or blank.
    time_zone = models.CharField(max_length=64, blank=True)
    theme = models.CharField(max_length=8, choices=Theme.choices, blank=True)

    def __str__(self) -> str:
        return f"{self.user}: {self.language or '-'} {self.time_zone or '-'} {self.theme or '-'}"
