"""A small HTTP client for settleq: signs producer requests (docs/api.md#producer-signatures).

Used by the command line (``settleq submit``, ``demo``, ``status``) and tests.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

import httpx

from shared.domain.signing import sign_request


class NoCredentials(RuntimeError):
    """A signed request without a producer key id and secret."""


class BadApiUrl(ValueError):
    """An API URL that names no HTTP server (``localhost:8000``, ``ftp://x``)."""


def api_url_problem(url: str) -> str | None:
    """What is wrong with ``url`` as the API's base URL, or None. Said before any
    request: httpx would refuse it only as ``UnsupportedProtocol`` at ``://``."""
    shown = _without_userinfo(url)
    where = "(--url or SETTLEQ_URL)"
    if "://" not in url:
        return f"the API URL {shown!r} has no scheme: write http://{shown.lstrip('/')} {where}"
    example = f"e.g. http://127.0.0.1:8000 {where}"
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        return f"the API URL {shown!r} is not a URL ({exc}); {example}"
    if parsed.scheme not in ("http", "https"):
        return f"the API URL {shown!r} is not http:// or https://; {example}"
    if not parsed.host:
        return f"the API URL {shown!r} names no host; {example}"
    return None


def _without_userinfo(url: str) -> str:
    """A URL to show: a user and password in it (never needed: requests carry
    their credentials in headers) as ``***``."""
    scheme, sep, rest = url.rpartition("://")
    netloc, slash, path = rest.partition("/")
    if "@" not in netloc:
        return url
    return f"{scheme}{sep}***@{netloc.rsplit('@', 1)[1]}{slash}{path}"


@dataclass
class Client:
    base_url: str
    key_id: str | None = None
    secret: str | None = None
    token: str | None = None
    timeout: float = 60.0
    http: httpx.Client | None = None  # injectable (e.g. FastAPI's TestClient)

    def __post_init__(self) -> None:
        if self.http is None:
            problem = api_url_problem(self.base_url)
            if problem is not None:
                raise BadApiUrl(problem)
            self.http = httpx.Client(base_url=self.base_url, timeout=self.timeout)

    def close(self) -> None:
        self._http.close()

    def signed(
        self,
        method: str,
        path: str,
        body: bytes = b"",
        headers: dict[str, str] | None = None,
        timestamp: int | None = None,
    ) -> httpx.Response:
        all_headers = {**self._signature(method, path, body, timestamp), **(headers or {})}
        return self._http.request(method, path, content=body, headers=all_headers)

    def _signature(
        self, method: str, path: str, body: bytes = b"", timestamp: int | None = None
    ) -> dict[str, str]:
        """The producer's ``X-Key-Id`` and ``X-Signature`` of this request."""
        if self.key_id is None or self.secret is None:
            raise NoCredentials(
                "a producer key id and secret are needed: --key-id and --secret"
                " (or SETTLEQ_CLIENT_KEY_ID and SETTLEQ_CLIENT_SECRET)"
            )
        t = int(time.time()) if timestamp is None else timestamp
        return {
            "X-Key-Id": self.key_id,
            "X-Signature": sign_request(self.secret, t, method, path, body),
        }

    def signed_json(self, method: str, path: str, payload: Any) -> httpx.Response:
        """A signed request with a JSON body (a producer's own resources: webhook endpoints)."""
        body = json.dumps(payload).encode()
        return self.signed(method, path, body, {"Content-Type": "application/json"})

    @property
    def _http(self) -> httpx.Client:
        assert self.http is not None
        return self.http

    def _bearer_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def bearer(self, method: str, path: str, json: Any = None) -> httpx.Response:
        return self._http.request(method, path, json=json, headers=self._bearer_headers())

    def bearer_stream(self, path: str, accept: str) -> AbstractContextManager[httpx.Response]:
        """``with client.bearer_stream(path, "text/csv") as response:`` a GET read as it arrives."""
        headers = {**self._bearer_headers(), "Accept": accept}
        return self._http.stream("GET", path, headers=headers)

    def submit(
        self,
        body: bytes,
        content_type: str = "application/json",
        idempotency_key: str | None = None,
        query: Mapping[str, str | int | None] | None = None,
    ) -> httpx.Response:
        """POST a batch; ``query`` (an X12 file's contract_version, partition_key,
        period) is signed with the path, as the server checks it."""
        headers = {"Content-Type": content_type}
        if idempotency_key:
            headers["Idempotency-Key"] = idempotency_key
        given = {k: str(v) for k, v in (query or {}).items() if v is not None}
        path = "/v1/batches" + (f"?{urlencode(given, quote_via=quote)}" if given else "")
        return self.signed("POST", path, body, headers)

    def get_stream(self, path: str, accept: str) -> AbstractContextManager[httpx.Response]:
        """``with client.get_stream(path, "text/csv") as response:`` a read as
        :meth:`get` makes it (the bearer token if any, else signed), read as it arrives."""
        auth = self._bearer_headers() if self.token else self._read_signature(path)
        return self._http.stream("GET", path, headers={**auth, "Accept": accept})

    def get(self, path: str) -> httpx.Response:
        """A read as the job reads are: with the bearer token if any, else signed."""
        if self.token:
            return self.bearer("GET", path)
        return self._http.request("GET", path, headers=self._read_signature(path))

    def _read_signature(self, path: str) -> dict[str, str]:
        # A read takes either credential: a viewer (the usual reader) told only
        # of producer keys would never learn of --token.
        if self.key_id is None or self.secret is None:
            raise NoCredentials(
                "a viewer token or a producer key is needed: --token (or"
                " SETTLEQ_CLIENT_TOKEN), or --key-id and --secret (or SETTLEQ_CLIENT_KEY_ID"
                " and SETTLEQ_CLIENT_SECRET)"
            )
        return self._signature("GET", path)

    def acknowledgement(self, job_id: str) -> httpx.Response:
        """An X12 job's 997 (``application/edi-x12``)."""
        return self.get(f"/v1/jobs/{job_id}/acknowledgement")

    def job(self, job_id: str) -> dict[str, Any]:
        response = self.get(f"/v1/jobs/{job_id}")
        response.raise_for_status()
        result: dict[str, Any] = response.json()
        return result

    def wait(self, job_id: str, timeout: float = 300, poll: float = 0.2) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            job = self.job(job_id)
            if job["state"] == "completed" or time.monotonic() > deadline:
                return job
            time.sleep(poll)
