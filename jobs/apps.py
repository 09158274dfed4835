from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "jobs"

    def ready(self) -> None:
        # Imported here, as Django asks: the receivers use the models, loaded only now.
        from . import receivers

        receivers.connect()
