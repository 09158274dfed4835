"""API authentication (kept apart from portal.api, which the settings must not import)."""

from __future__ import annotations

from typing import cast

from django.contrib.auth import get_user_model
from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication
from rest_framework.authtoken.models import Token

from .input import text_problem

TOKEN_LENGTH = cast(int, Token._meta.get_field("key").max_length)  # a CharField's


class LeanTokenAuthentication(TokenAuthentication):
    """DRF's token check in one plain query: the user row, joined through the token.

    The same rules as DRF's (an unknown key or an inactive user is refused), without the
    ORM building a select_related query on every request, which cost as much as the rest of
    a submission (docs/benchmarks.md).
    """

    def authenticate_credentials(self, key):
        if len(key) > TOKEN_LENGTH or text_problem(key, free_text=False) is not None:
            # No token looks like this; PostgreSQL would refuse a NUL with a 500.
            raise exceptions.AuthenticationFailed("Invalid token.")
        model = get_user_model()
        users = model.objects.raw(
            f"SELECT u.* FROM {model._meta.db_table} u"
            f" JOIN {Token._meta.db_table} t ON t.user_id = u.id WHERE t.key = %s",
            [key],
        )
        user = next(iter(users), None)
        if user is None:
            raise exceptions.AuthenticationFailed("Invalid token.")
        if not user.is_active:
            raise exceptions.AuthenticationFailed("User inactive or deleted.")
        return user, key
