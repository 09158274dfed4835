"""An OpenID provider of the tests' own: django-oidc-provider in a Django project run as a
separate process (``python -m tests.support.identity_provider``), so Caldera's sign-in is tested
over real HTTP against a real provider, as against Keycloak or Dex.
"""
