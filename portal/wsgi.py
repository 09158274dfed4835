import os

from django.core.wsgi import get_wsgi_application

from portal.memory import freeze_loaded_objects

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
application = get_wsgi_application()
# Each web worker imports this module once it runs (or the server's main process before it
# forks them, when it preloads): what is loaded now lives as long as the process.
freeze_loaded_objects()
