"""Login throttling on every face that checks a password (``LOGIN_THROTTLE`` in the settings;
the counting is :mod:`assets_app.services.accounts`'s).

:class:`ThrottledModelBackend` is Django's ``ModelBackend`` that first asks whether this user
from this client address (or this address at all) must wait: if so, it checks no password —
the hashing work a guesser can make the server do is bounded — marks the request and refuses;
otherwise it counts the failure or resets the user's count on success. At most
``CONCURRENT_CHECKS`` passwords are hashed at once in a process (~0.5-2 CPU-s each, PBKDF2):
a login that waits longer than ``CHECK_WAIT_SECONDS`` for its turn is throttled too.
Django's ``authenticate`` calls it for ``/auth/token`` and ``/auth/token/cli``, the admin's
login form alike. :class:`LoginThrottleMiddleware` answers
a marked request 429 with ``Retry-After``: JSON ``{"detail": …}`` on the APIs, a short page
on the admin.

The client address is ``REMOTE_ADDR``: behind a proxy, make the proxy's address the client's
(gunicorn's ``--forwarded-allow-ips`` with ``X-Forwarded-For``), else every user shares the
proxy's.
"""

from __future__ import annotations

import functools
import logging
import math
import threading
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.contrib.auth.backends import ModelBackend
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.html import escape

from assets_app.services.accounts import LoginKeys, login_failed, login_succeeded, login_wait

logger = logging.getLogger(__name__)

#: The attribute a throttled request carries: the seconds to wait.
RETRY_AFTER_ATTRIBUTE = "login_retry_after"


@functools.cache
def _checks() -> threading.BoundedSemaphore:
    """The password checks this process may run at once (``CONCURRENT_CHECKS``)."""
    return threading.BoundedSemaphore(settings.LOGIN_THROTTLE["CONCURRENT_CHECKS"])


def _message(seconds: int) -> str:
    return f"Too many failed logins for this user from this address; try again in {seconds} s"


class ThrottledModelBackend(ModelBackend):
    """``ModelBackend`` behind the login throttle (see the module's docstring). Without a
    request (a management command, a test's ``client.login``) it is plain ``ModelBackend``."""

    def authenticate(
        self,
        request: HttpRequest | None,
        username: str | None = None,
        password: str | None = None,
        **kwargs: Any,
    ) -> Any:
        if request is None or username is None or password is None:
            return super().authenticate(request, username, password, **kwargs)
        keys = LoginKeys.of(username=str(username), address=request.META.get("REMOTE_ADDR", ""))
        wait = login_wait(keys)
        if wait > 0:
            # on the HttpRequest the middleware sees (DRF would hand its wrapper)
            setattr(getattr(request, "_request", request), RETRY_AFTER_ATTRIBUTE, math.ceil(wait))
            logger.warning("login of %r throttled for %.0f s", username, wait)
            raise PermissionDenied(_message(math.ceil(wait)))  # ends authenticate(): no hashing
        # at most CONCURRENT_CHECKS password hashes at once per process: a flood of logins
        # for many users waits here (then 429) instead of taking every thread's CPU
        if not _checks().acquire(timeout=settings.LOGIN_THROTTLE["CHECK_WAIT_SECONDS"]):
            setattr(getattr(request, "_request", request), RETRY_AFTER_ATTRIBUTE, 1)
            raise PermissionDenied(_message(1))
        try:
            user = super().authenticate(request, username, password, **kwargs)
        finally:
            _checks().release()
        if user is None:
            login_failed(keys)
        else:
            login_succeeded(keys)
        return user


class LoginThrottleMiddleware:
    """A request the backend throttled is answered 429 with ``Retry-After``, whatever the view
    made of the refused login (a 401, the admin's form again)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        seconds = getattr(request, RETRY_AFTER_ATTRIBUTE, None)
        if seconds is None:
            return response
        message = _message(seconds)
        throttled: HttpResponse
        if request.path.startswith("/admin/"):
            throttled = HttpResponse(
                f"<!doctype html><title>Too many failed logins</title><p>{escape(message)}.</p>",
                status=429,
            )
        else:
            throttled = JsonResponse({"detail": message}, status=429)
        throttled["Retry-After"] = str(seconds)
        return throttled
