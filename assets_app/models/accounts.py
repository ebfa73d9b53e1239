"""Failed logins, counted to slow down password guessing (``services.accounts``)."""

from __future__ import annotations

from django.db import models

#: ``user:<address> <username>`` or ``address:<address>``; a username is at most 150 characters
#: and an IPv6 address 45.
LOGIN_KEY_LENGTH = 250


class LoginFailures(models.Model):
    """The failed logins of one user from one client address, or of one client address for
    any user, since the last success (or since they lapsed)."""

    key = models.CharField(max_length=LOGIN_KEY_LENGTH, unique=True)
    failures = models.PositiveIntegerField(default=0)
    last_failure_at = models.DateTimeField()
    locked_until = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "login failures"

    def __str__(self) -> str:
        return f"{self.key}: {self.failures}"
