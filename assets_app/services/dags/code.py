"""The text of the files DAGs come from (``dag_code``), kept when a file loads so that the
admin and ``/api/v2/dagSources`` show it without reading the DAG folder."""

from __future__ import annotations

import hashlib

from django.utils import timezone

from assets_app.models import DagCode


def dag_code_store(*, fileloc: str, source: str) -> bool:
    """Keep ``source`` as the text of ``fileloc``; one ``SELECT`` when it is the text stored,
    else one write more. ``True`` when something was written. Call inside the load's
    transaction."""
    digest = hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()
    stored = DagCode.objects.filter(fileloc=fileloc).values_list("source_code_hash").first()
    if stored is not None and stored[0] == digest:
        return False
    DagCode.objects.update_or_create(
        fileloc=fileloc,
        defaults={
            "source_code": source,
            "source_code_hash": digest,
            "last_updated": timezone.now(),
        },
    )
    return True
