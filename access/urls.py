"""The pages of credentials (access.views); the API's are in portal/urls.py."""

from django.urls import path

from . import views

urlpatterns = [
    path("account/", views.account, name="account"),
    path("account/preferences/", views.preferences, name="account-preferences"),
    path("account/tokens/<int:pk>/revoke/", views.token_revoke, name="token-revoke"),
    path("account/tokens/revoke-all/", views.tokens_revoke_all, name="tokens-revoke-all"),
    path("departments/<slug:name>/", views.department, name="department"),
    path(
        "departments/<slug:name>/service-identities/",
        views.identity_create,
        name="identity-create",
    ),
    path(
        "departments/<slug:name>/service-identities/<str:username>/tokens/",
        views.identity_token_create,
        name="identity-token-create",
    ),
]
