"""One validated settings object: environment ``SETTLEQ_*``, optional YAML.

``SETTLEQ_CONFIG`` names a YAML file holding the same settings; environment
variables win over it. Nothing else in settleq reads the environment.
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    YamlConfigSettingsSource,
)

from shared.adapters.db.urls import database_url_problem
from shared.config.files import ConfigError, FileSettingsSource, env_name, secrets_dir_source
from shared.domain.money import CURRENCY, DEFAULT_CURRENCY
from shared.domain.period_dates import Calendar, zone_problem
from shared.domain.periods import OWN, Booking, Journaling, PeriodName, booking
from shared.domain.pipeline.events import EVENT_BATCH_LIMIT
from shared.domain.pipeline.queues import DELIVERY_LIMIT, QueueType, family_queues, queue_for
from shared.domain.signing import token_matches

MiB = 1024 * 1024
_SHA256_HEX = re.compile(r"[0-9a-f]{64}")

# The retired settings a supervisor (`settleq up`, `settleq worker --processes N`) read.
RETIRED_SUPERVISION = ("restart_give_up_deaths", "restart_give_up_window_s")
# Settings that are gone, and what took their place (docs/operations.md#upgrade-notes).
RETIRED = {
    "relay_defer_max_s": (
        "outcome events are batched and the relay publishes them as their units commit,"
        " so it no longer holds them back on a busy host; remove it"
    ),
    "relay_nice": (
        "the process that commits a unit publishes its events, and the relay only"
        " sweeps what is left past SETTLEQ_RELAY_GRACE_S, so it no longer runs niced;"
        " remove it"
    ),
    **dict.fromkeys(
        RETIRED_SUPERVISION,
        "a supervisor no longer gives up on a child that keeps dying, nor stops the stack"
        " for it: the child is restarted at the capped backoff and reported crash-looping"
        " (docs/operations.md#a-component-keeps-restarting); remove it",
    ),
}


class ProducerKey(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    key_id: str = Field(min_length=1)
    secrets: list[str] = Field(min_length=1, max_length=2)
    partitions: list[str] = Field(default_factory=list)

    def may_submit_for(self, partition_key: str) -> bool:
        return "*" in self.partitions or partition_key in self.partitions


class OutcomeAccounts(BaseModel):
    """The general-ledger accounts the money a remittance's rows of one outcome
    took is debited and credited to (docs/operations.md#configuration)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    debit: str = Field(min_length=1, max_length=128)
    credit: str = Field(min_length=1, max_length=128)


class JournalAccounts(BaseModel):
    """The general-ledger accounts a kind's positive balance is debited and
    credited to; and, optionally, those of its ``disputed``, ``resolved``,
    ``deducted`` and ``written_off`` rows, booked as entries of their own (not
    named: booked with the rest)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    debit: str = Field(min_length=1, max_length=128)
    credit: str = Field(min_length=1, max_length=128)
    disputed: OutcomeAccounts | None = None
    resolved: OutcomeAccounts | None = None
    deducted: OutcomeAccounts | None = None
    written_off: OutcomeAccounts | None = None

    def booking(self) -> Booking:
        outcomes = {
            name: (given.debit, given.credit)
            for name in OWN
            if (given := getattr(self, name)) is not None
        }
        return booking(self.debit, self.credit, outcomes)


def _default_map_processes() -> int:
    """Two where there are two cores and a fork (a child maps about half a file's sets)."""
    return 2 if (os.cpu_count() or 1) >= 2 and hasattr(os, "fork") else 1


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="SETTLEQ_", extra="ignore")

    database_url: str = "sqlite:///./settleq.db"
    # A replica for reads that may lag (docs/operations.md#reads-from-a-replica):
    # closed periods' journals and lines, and history. Never the feed, an open
    # period or anything read before a write. None: the primary serves them.
    read_database_url: str | None = None
    broker_url: str = "amqp://guest:guest@127.0.0.1:5672/"
    redis_url: str = "redis://127.0.0.1:6379/0"
    queue_prefix: str = Field(default="settleq", pattern=r"^[A-Za-z0-9_-]{1,64}$")
    max_queue_depth: int = 5000
    # quorum: replicated queues for a RabbitMQ cluster, one lane per job size
    # (shared/domain/pipeline/queues.py). A prefix holds queues of one type only.
    queue_type: QueueType = "classic"

    producer_keys: list[ProducerKey] = Field(default_factory=list)
    viewer_tokens: Annotated[list[str], NoDecode] = Field(default_factory=list)
    operator_tokens: Annotated[list[str], NoDecode] = Field(default_factory=list)
    internal_signing_key: str | None = None
    signature_tolerance_s: int = 300

    max_body_bytes: int = 256 * MiB
    max_chunk_documents: int = Field(default=750, ge=1)
    max_chunk_bytes: int = Field(default=45 * MiB, ge=1024)
    # Found best by the bench here (fairness and throughput): docs/performance.md#performance.
    max_chunk_lines: int = Field(default=5000, ge=1)

    # Processes that map a large X12 210 file's sets (services/api/edi/parallel/parent.py):
    # the request's own and children started by a fork server; 1 maps in process.
    x12_map_processes: int = Field(default_factory=lambda: _default_map_processes(), ge=1)

    task_timeout_s: int = 180
    max_attempts: int = Field(default=5, ge=1)
    # Deliveries of one quorum-queue message (a worker died holding it, or its
    # node went away) before it is dead-lettered: at least max_attempts. Unset:
    # DELIVERY_LIMIT, or max_attempts where that is higher (delivery_limit()).
    queue_delivery_limit: int | None = Field(default=None, ge=1)
    backoff_base_ms: int = Field(default=500, ge=1)
    backoff_max_ms: int = 60_000
    # Messages of a job whose submission never finished (no 202) are dropped
    # after this long; the producer's retry of the submission republishes them.
    receiving_timeout_s: int = 600
    # How long a worker waits for a job still being enqueued before retrying it.
    accept_wait_s: float = Field(default=1.0, ge=0)
    claim_lease_ms: int = Field(default=30_000, ge=100)

    relay_batch: int = Field(default=5, ge=1)  # outbox rows (units of work) per transaction
    # Most events in one outcome-event message (docs/architecture.md#outcome-events):
    # a unit's events of one outcome and kind travel together, split after this many.
    event_batch_max: int = Field(default=1000, ge=1, le=EVENT_BATCH_LIMIT)
    relay_poll_s: float = 0.2
    # The process that commits a unit publishes its events right after the
    # commit (docs/architecture.md#events-at-commit-and-the-relay);
    # the relay publishes only a unit left unpublished longer than this (a
    # crash between commit and publish, a broker outage).
    relay_grace_s: float = Field(default=2.0, ge=0)
    # Off: a settling worker publishes no events and leaves every unit to the
    # relay, which publishes them once ``relay_grace_s`` has passed, in commit
    # order, from one process. For a deployment that wants that order, or no
    # event publishing on its worker hosts, at the cost of the grace's latency.
    # The API's own units (dispute resolutions) are published at commit either way.
    worker_publishes_events: bool = True

    # Worker processes per tier (`settleq up`, `settleq worker --queues <tier>`),
    # the bench's best on two cores: validation is light, settlement holds a
    # core per process (two threads each overlap its database waits).
    fast_path_processes: int = Field(default=1, ge=1)
    compute_heavy_processes: int = Field(default=2, ge=1)
    worker_threads: int = Field(default=2, ge=1)
    # Messages a worker process holds unacknowledged beyond the ones it works on:
    # few, so that a small job's chunk overtakes a big job's soon (priorities
    # only reorder what is still in RabbitMQ).
    worker_prefetch: int = Field(default=0, ge=0)

    # Supervision by `settleq up` and `settleq worker --processes N`
    # (docs/operations.md#supervision, services/supervisor): a child that exits unexpectedly is
    # restarted after restart_backoff_initial_s, doubling up to restart_backoff_max_s; the delay
    # starts over once a child stayed up restart_reset_after_s. A child that keeps dying is
    # crash-looping (services/supervisor/policy.py): still restarted, every
    # restart_backoff_max_s, never a reason to stop the rest. On SIGTERM/SIGINT the
    # children get shutdown_grace_s to stop, then what is left is killed (exit 1).
    restart_backoff_initial_s: float = Field(default=1.0, gt=0)
    restart_backoff_max_s: float = Field(default=30.0, gt=0)
    restart_reset_after_s: float = Field(default=60.0, gt=0)
    shutdown_grace_s: float = Field(default=30.0, ge=0)
    # The JSON file where `settleq up` keeps its restart counts and crash-looping
    # components, for the API's metrics and /readyz. `up` sets it for its children
    # (a file of its own in a temporary directory unless set here); unset: no such
    # metric.
    supervisor_counts_file: str | None = None

    # Booking periods (docs/api.md#periods-and-the-close):
    # the first one's name (else the UTC month of the first migrate), and the
    # journal's accounts per kind (null leaves a kind out; a kind not named
    # keeps its default).
    first_period: PeriodName | None = None
    # month or quarter: dated periods, each ended by settleq at its calendar end
    # in period_tz; manual: a period ends only when an operator closes it. A
    # ledger remembers its mode: an undated open period stays manual.
    period: Literal["month", "quarter", "manual"] = "month"
    period_tz: str = "UTC"
    # Drills and tests only: dated periods this many seconds long instead.
    period_seconds: int | None = Field(default=None, ge=1, le=366 * 86400)
    journal_accounts: dict[str, JournalAccounts | None] = Field(default_factory=dict)
    # What every journal line carries (docs/api.md#the-journal): the entity (a
    # subsidiary, ledger or company code) and the currency of contracts that
    # name none.
    journal_entity: str = Field(default="", max_length=64, pattern=r"^[^\x00-\x1f\x7f]*$")
    currency: str = Field(default=DEFAULT_CURRENCY, pattern=CURRENCY)
    # How long a close waits for the transactions booking into its period before
    # it gives up (409 close_waiting), cutting nothing: settlement goes on meanwhile.
    close_wait_s: float = Field(default=30.0, gt=0, le=3600)

    api_host: str = "127.0.0.1"
    api_port: int = 8000

    # Webhooks (docs/api.md#webhooks, services/webhooks). Endpoints must be
    # https:// and public unless this is true (development and tests).
    webhook_allow_private: bool = False
    # Attempts one webhooks process makes at once: each waits on the network,
    # up to 10 s on an endpoint that hangs.
    webhook_threads: int = Field(default=8, ge=1, le=64)
    # How often the relay looks for webhook events to fan out, and the webhooks
    # component for deliveries due.
    webhook_poll_s: float = Field(default=0.2, gt=0)
    # Tests only: every wait of the retry schedule, the 3 days before a delivery
    # fails and the 5 before an endpoint is disabled, multiplied by this.
    webhook_schedule_scale: float = Field(default=1.0, gt=0, le=1)
    # The webhooks process's Prometheus metrics port (viewer token): 0 = off.
    webhook_metrics_port: int = Field(default=0, ge=0, le=65535)
    # Endpoints one producer key may register (422 webhook_endpoint_limit beyond):
    # every endpoint gets a signed POST of every event it subscribes to.
    webhook_max_endpoints: int = Field(default=10, ge=1, le=1000)
    # Days a delivered delivery and its attempts are kept (a failed one: 90, or
    # this if longer); the webhooks component's pruner deletes older ones.
    webhook_retention_days: int = Field(default=30, ge=1)
    # Days a refused X12 file's row (edi_refusals) is kept; pruned by the
    # webhooks component too.
    edi_refusal_retention_days: int = Field(default=90, ge=1)

    # Each worker process serves Prometheus metrics on its own port (viewer
    # token): 0 = off. ``--processes N`` and ``settleq up`` give process i the
    # port ``worker_metrics_port + i`` (docs/guide.md#observability).
    worker_metrics_port: int = Field(default=0, ge=0, le=65535)
    worker_metrics_host: str = "127.0.0.1"

    # json: one JSON object per line; console: readable lines; auto: console on a
    # terminal, JSON otherwise (shared/logs.py).
    log_format: Literal["auto", "json", "console"] = "auto"
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"

    @field_validator("database_url", "read_database_url")
    @classmethod
    def _ledger_url(cls, value: str | None) -> str | None:
        problem = None if value is None else database_url_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @field_validator("period_tz")
    @classmethod
    def _iana_zone(cls, value: str) -> str:
        problem = zone_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    def calendar(self) -> Calendar | None:
        """The dated periods' calendar, or None when periods are manual."""
        if self.period == "manual":
            return None
        if self.period_seconds is not None:
            return Calendar("seconds", self.period_tz, self.period_seconds)
        return Calendar(self.period, self.period_tz)

    @field_validator("journal_accounts")
    @classmethod
    def _known_kinds(cls, value: dict[str, JournalAccounts | None]) -> Any:
        from shared.domain.kinds import KINDS

        unknown = sorted(set(value) - set(KINDS))
        if unknown:
            raise ValueError(f"names no kind settleq settles: {', '.join(unknown)}")
        return value

    def journal_pairs(self) -> dict[str, Booking | None]:
        """``journal_accounts`` as the journal books them, by kind named: a kind
        named keeps no default of its own outcomes' accounts."""
        return {k: None if a is None else a.booking() for k, a in self.journal_accounts.items()}

    def journaling(self) -> Journaling:
        """How the journal is made: its accounts, entity, currency and time zone."""
        return Journaling(self.journal_pairs(), self.journal_entity, self.currency, self.period_tz)

    @field_validator("queue_delivery_limit")
    @classmethod
    def _covers_attempts(cls, value: int | None, info: ValidationInfo) -> int | None:
        attempts = info.data.get("max_attempts")
        if value is not None and isinstance(attempts, int) and value < attempts:
            raise ValueError(
                f"must be at least SETTLEQ_MAX_ATTEMPTS ({attempts}): RabbitMQ would"
                " dead-letter a message before settleq had tried it that often"
            )
        return value

    @field_validator("viewer_tokens", "operator_tokens", mode="before")
    @classmethod
    def _split_csv(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [part.strip().lower() for part in value.split(",") if part.strip()]
        return value

    @field_validator("viewer_tokens", "operator_tokens")
    @classmethod
    def _sha256_digests(cls, value: list[str]) -> list[str]:
        # Tokens are configured as digests only; a clear token here is a mistake.
        if any(not _SHA256_HEX.fullmatch(v) for v in value):
            raise ValueError("tokens must be SHA-256 hex digests of the bearer tokens")
        return value

    @field_validator("log_format", "log_level", mode="before")
    @classmethod
    def _any_case(cls, value: Any, info: ValidationInfo) -> Any:
        if not isinstance(value, str):
            return value
        return value.upper() if info.field_name == "log_level" else value.lower()

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Secrets may come from files (shared/config/files.py): SETTLEQ_<NAME>_FILE,
        # then the files of SETTLEQ_SECRETS_DIR; both below the environment.
        sources = [init_settings, env_settings, FileSettingsSource(settings_cls)]
        from_dir = secrets_dir_source(settings_cls)
        if from_dir is not None:
            sources.append(from_dir)
        config_file = os.environ.get("SETTLEQ_CONFIG")
        if config_file:
            # A mistyped path must not silently run on the built-in values (a local SQLite ledger).
            if not os.path.isfile(config_file):
                raise ConfigError(f"SETTLEQ_CONFIG names no file: {config_file}")
            sources.append(YamlConfigSettingsSource(settings_cls, yaml_file=config_file))
        return tuple(sources)

    @staticmethod
    def retired_in_use(among: Collection[str] = tuple(RETIRED)) -> list[str]:
        """One sentence for each retired setting (``RETIRED``, or those of them
        ``among``) still set, in the environment or the YAML file: it is accepted
        and ignored, so that an upgrade does not stop a process over it, and the
        process warns."""
        names = {name for name in among if env_name(name) in os.environ}
        config_file = os.environ.get("SETTLEQ_CONFIG")
        if config_file and os.path.isfile(config_file):
            with open(config_file, encoding="utf-8") as text:
                loaded = yaml.safe_load(text)
            if isinstance(loaded, dict):
                names |= {name for name in among if name in loaded}
        return [f"{env_name(name)} is no longer read: {RETIRED[name]}" for name in sorted(names)]

    def producer_key(self, key_id: str) -> ProducerKey | None:
        for key in self.producer_keys:
            if key.key_id == key_id:
                return key
        return None

    def token_role(self, token: str) -> Literal["operator", "viewer"] | None:
        """The role a bearer token grants (checked in constant time), or None."""
        if token_matches(token, self.operator_tokens):
            return "operator"
        if token_matches(token, self.viewer_tokens):
            return "viewer"
        return None

    def secrets(self) -> list[str]:
        """Configured values that must never be written anywhere (shared.logs masks them)."""
        found = [s for key in self.producer_keys for s in key.secrets]
        if self.internal_signing_key:
            found.append(self.internal_signing_key)
        return found

    def queue_name(self, family: str) -> str:
        """``<prefix>.<family>``: a classic tier's queue, the events exchange."""
        return f"{self.queue_prefix}.{family}"

    def delivery_limit(self) -> int:
        """The ``x-delivery-limit`` of a quorum queue (``queue_delivery_limit``)."""
        if self.queue_delivery_limit is not None:
            return self.queue_delivery_limit
        return max(DELIVERY_LIMIT, self.max_attempts)

    def queues_of(self, family: str) -> tuple[str, ...]:
        """The queues a tier's workers consume: one, or a quorum tier's lanes."""
        return family_queues(self.queue_prefix, family, self.queue_type)

    def queue_for(self, family: str, priority: int) -> str:
        """Where a chunk of a job of this priority is published in this tier."""
        return queue_for(self.queue_prefix, family, self.queue_type, priority)
