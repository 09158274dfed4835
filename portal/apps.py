from django.apps import AppConfig
from django.core import checks


class PortalConfig(AppConfig):
    name = "portal"

    def ready(self) -> None:
        # Imported here, as Django asks: sign-in uses the models, loaded only now.
        from .sign_in import sign_in_checks

        checks.register(sign_in_checks)
