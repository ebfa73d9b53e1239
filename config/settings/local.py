"""Local development: the embedded SQLite database, debug on unless told otherwise."""

from config.env import env
from config.settings.base import *  # noqa: F403

# the demo and the docs' screenshots (manage.py demo, manage.py screenshots): not in production
INSTALLED_APPS = [*INSTALLED_APPS, "devtools"]  # noqa: F405

DEBUG = env.bool("DJANGO_DEBUG", default=True)

# No FERNET_KEY set: secrets are encrypted with a key derived from SECRET_KEY (assets_app.crypto)
FERNET_KEY_DEVELOPMENT_FALLBACK = True
