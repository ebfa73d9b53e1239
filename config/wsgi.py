"""WSGI entry point (gunicorn config.wsgi). Uses production settings unless told otherwise.

Once the application is loaded, every object alive is moved out of the garbage collector's
sight (:func:`config.startup.loaded_objects_freeze`): a loaded process holds about 130,000
objects, and each full collection, which a request that creates many objects (1,000 alias
events) triggers every few requests, walked all of them.
"""

import os

from django.core.wsgi import get_wsgi_application

from config.startup import loaded_objects_freeze

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.production")

application = get_wsgi_application()
loaded_objects_freeze()
