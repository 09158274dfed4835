"""The provider's settings: its own database, its own users and groups."""

import os

import dj_database_url

SECRET_KEY = "identity-provider-of-the-tests"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
ROOT_URLCONF = "tests.support.identity_provider.urls"
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "oidc_provider",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
]
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [os.path.join(os.path.dirname(__file__), "templates")],
        "APP_DIRS": True,
        "OPTIONS": {"context_processors": ["django.template.context_processors.request"]},
    }
]
DATABASES = {"default": dj_database_url.parse(os.environ["IDP_DATABASE_URL"])}
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"
USE_TZ = True
LOGIN_URL = "/accounts/login/"
# The provider's session cookie must not be taken for Caldera's on the same host.
SESSION_COOKIE_NAME = "idp_session"
CSRF_COOKIE_NAME = "idp_csrftoken"
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

# A "groups" scope whose claim lists the user's groups, as Dex, Okta and Keycloak's group
# mapper send them; the ID token's audience can be changed (see urls.control).
OIDC_EXTRA_SCOPE_CLAIMS = "tests.support.identity_provider.claims.GroupClaims"
OIDC_IDTOKEN_PROCESSING_HOOK = "tests.support.identity_provider.claims.id_token_hook"
OIDC_USERINFO = "tests.support.identity_provider.claims.userinfo"
