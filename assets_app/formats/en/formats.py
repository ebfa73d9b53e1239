"""English formats: ISO dates and timestamps with seconds and the time zone, so that events
seconds apart read differently (``2026-11-30 21:32:42 UTC``)."""

from assets_app.formats import TIMESTAMP_FORMAT

DATE_FORMAT = "Y-m-d"
SHORT_DATE_FORMAT = "Y-m-d"
DATETIME_FORMAT = TIMESTAMP_FORMAT
SHORT_DATETIME_FORMAT = TIMESTAMP_FORMAT
TIME_FORMAT = "H:i:s"
MONTH_DAY_FORMAT = "F j"
YEAR_MONTH_FORMAT = "F Y"
