"""Where the limiter of log lines lived: it is `exporter.log_limit` now, which the exporter's refusal log shares
(the exporter may not import the adapter's modules); its importers here keep their import."""

from exporter.log_limit import INTERVAL_S as INTERVAL_S
from exporter.log_limit import MAX_CAUSES as MAX_CAUSES
from exporter.log_limit import LogLimiter as LogLimiter
