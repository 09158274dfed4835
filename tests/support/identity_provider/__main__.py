"""Start the provider on a fresh database: migrate it, make the signing key, serve on a free
port and print ``listening on <port>``."""

import os
import sys
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import django
from django.core.management import call_command
from django.core.wsgi import get_wsgi_application


class ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class QuietHandler(WSGIRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 (the base class's name)
        pass


def main() -> None:
    os.environ["DJANGO_SETTINGS_MODULE"] = "tests.support.identity_provider.settings"
    django.setup()
    call_command("migrate", verbosity=0)
    call_command("creatersakey")
    server = make_server(
        "127.0.0.1", 0, get_wsgi_application(), ThreadingServer, handler_class=QuietHandler
    )
    print(f"listening on {server.server_port}", flush=True)
    sys.stdout.close()
    server.serve_forever()


if __name__ == "__main__":
    main()
