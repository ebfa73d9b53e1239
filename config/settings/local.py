"""Local development: the embedded SQLite database, debug on unless told otherwise."""

from config.env import env
from config.settings.base import *  # noqa: F403

DEBUG = env.bool("DJANGO_DEBUG", default=True)
