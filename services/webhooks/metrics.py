"""The webhooks process's Prometheus metrics, on ``webhook_metrics_port``
(viewer token; services/metrics_http.py).

- ``settleq_webhook_attempts_total{result}``: attempts by result
  (``delivered``, ``http_error``, and the attempt's error codes:
  ``timeout``, ``address_refused``, ``url_refused``, ``dns_failed``,
  ``connect_failed``).
- ``settleq_webhook_attempt_duration_seconds``: one attempt, DNS to answer.
- ``settleq_webhook_delivery_latency_seconds``: from the commit that wrote
  the event to its delivery's 2xx.
- ``settleq_webhook_endpoints_disabled_total``: endpoints this process
  disabled for failing five days in a row.
- ``settleq_webhook_pruned_rows_total{table}``: rows its pruner deleted past
  their retention (pruner.py).

What waits and what failed (``settleq_webhook_deliveries{status}``, the
oldest undelivered event's age, endpoints by status) is read from the
database by the API at scrape time (services/api/metrics.py): one reading
for every webhooks process.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics

from shared.adapters.webhook_delivery import Attempt

LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 3600, 6 * 3600, 86400)


class WebhookMetrics:
    def __init__(self) -> None:
        disable_created_metrics()  # type: ignore[no-untyped-call]  # no *_created series
        self.registry = CollectorRegistry()
        self.attempts = Counter(
            "settleq_webhook_attempts",
            "Webhook delivery attempts by result",
            ["result"],
            registry=self.registry,
        )
        self.duration = Histogram(
            "settleq_webhook_attempt_duration_seconds",
            "One webhook attempt, from DNS to the answer",
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
            registry=self.registry,
        )
        self.latency = Histogram(
            "settleq_webhook_delivery_latency_seconds",
            "From the commit that wrote an event to its delivery",
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.pruned = Counter(
            "settleq_webhook_pruned_rows",
            "Rows the pruner deleted, past their retention, by table",
            ["table"],
            registry=self.registry,
        )
        self.disabled = Counter(
            "settleq_webhook_endpoints_disabled",
            "Endpoints disabled for failing five days in a row",
            registry=self.registry,
        )

    def attempted(self, attempt: Attempt) -> None:
        result = "delivered" if attempt.delivered else attempt.error or "http_error"
        self.attempts.labels(result).inc()
        self.duration.observe(attempt.latency_ms / 1000)
