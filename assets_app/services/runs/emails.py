"""``email_on_failure`` / ``email_on_retry``: a try that fails or is retried mails its task's
``email`` addresses through Django's email backend (``EMAIL_*`` settings; the console
backend by default), after the commit that recorded it, with Airflow's default subject and
body (``airflow.sdk.execution_time.task_runner._send_error_email_notification``). A mail that
cannot be sent is logged, never fails the report.

Whether to mail is read in the statements the report runs anyway (the finishing ``UPDATE``'s
``RETURNING``, the retry's task query), so a task without ``email`` costs no statement more.
"""

from __future__ import annotations

import html
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from django.conf import settings
from django.core.mail import EmailMultiAlternatives
from django.db import transaction

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class FailureMail:
    """What a failure or retry mail says."""

    recipients: tuple[str, ...]
    dag_id: str
    task_id: str
    run_id: str
    map_index: int
    try_number: int
    max_tries: int
    state: str  # failed or up_for_retry
    hostname: str = ""
    exception: str = ""  # the failure's reason, when known


def failure_mail_render(mail: FailureMail) -> tuple[str, str, str]:
    """(subject, plain text, HTML) as Airflow's defaults write them."""
    map_part = f" map_index={mail.map_index}" if mail.map_index >= 0 else ""
    ti = f"<TaskInstance: {mail.dag_id}.{mail.task_id} {mail.run_id}{map_part} [{mail.state}]>"
    subject = f"Airflow alert: {ti}"
    exception = mail.exception or f"the try ended {mail.state}"
    body = (
        f"Try {mail.try_number} out of {mail.max_tries + 1}<br>"
        f"Exception:<br>{html.escape(exception).replace(chr(10), '<br>')}<br>"
        f"Host: {html.escape(mail.hostname)}<br>"
    )
    text = (
        f"Try {mail.try_number} out of {mail.max_tries + 1}\n"
        f"Exception:\n{exception}\n"
        f"Host: {mail.hostname}\n"
    )
    return subject, text, body


def failure_mail_send(mail: FailureMail) -> None:
    """Send it now; a failure to send is logged."""
    subject, text, body = failure_mail_render(mail)
    message = EmailMultiAlternatives(
        subject=subject,
        body=text,
        from_email=settings.DEFAULT_FROM_EMAIL,
        to=list(mail.recipients),
    )
    message.attach_alternative(body, "text/html")
    try:
        message.send()
    except Exception:
        logger.exception("could not mail %s: %s", ", ".join(mail.recipients), subject)
    else:
        logger.info("mailed %s: %s", ", ".join(mail.recipients), subject)


def failure_mail_on_commit(mail: FailureMail) -> None:
    """Send it once the current transaction commits (at once outside one)."""
    if mail.recipients:
        transaction.on_commit(lambda: failure_mail_send(mail))


def recipients_of(email: Sequence[str] | None) -> tuple[str, ...]:
    return tuple(str(address) for address in email or () if address)
