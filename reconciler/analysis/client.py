"""Prometheus's HTTP API: the only code that speaks to Prometheus (SPEC section 4c).

One question is asked: ``GET /api/v1/query?query=...`` (an instant query, evaluated
now; https://prometheus.io/docs/prometheus/latest/querying/api/#instant-queries).
Its answer is ``{"status": "success", "data": {"resultType", "result"}}``, or
``{"status": "error", "errorType", "error"}`` with a 4xx/5xx code.

Failures are split by what they say about the release, because the rollout treats
them differently:

- Prometheus answered that the query is wrong (``bad_data``, an execution error,
  any 4xx): ``QueryError``, a failed measurement with Prometheus's reason;
- Prometheus could not be asked (refused, timed out, 5xx, 429, not JSON):
  ``PrometheusUnreachable``, an inconclusive measurement. A broken monitoring
  system says nothing about the release: the rollout holds, it never rolls forward
  and never rolls back on it.

Every request has a connect and a read timeout, and connection errors, 5xx and 429
are retried a bounded number of times (``retries``) with a short backoff, so a pass
that measures spends at most about ``(retries + 1) * timeout`` on it. Credentials
come from the environment or a mounted Secret, never from the catalog:
``RECONCILER_PROMETHEUS_TOKEN`` (a bearer token) or ``RECONCILER_PROMETHEUS_USERNAME``
and ``RECONCILER_PROMETHEUS_PASSWORD`` (basic auth), each also as ``..._FILE``
naming a file (a Secret mounted into the pod); ``RECONCILER_PROMETHEUS_CA_FILE``
trusts a private CA. No credential ever reaches a message or a log.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import urllib3

from reconciler.model.errors import ReconcilerError, UsageError

ENV_PREFIX = "RECONCILER_PROMETHEUS_"
QUERY_PATH = "/api/v1/query"
USER_AGENT = "reconciler-analysis"
_RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
_MAX_ANSWER = 4 * 1024 * 1024  # an analysis query answers with one number, not a dump
_MESSAGE_LIMIT = 300


class PrometheusError(ReconcilerError):
    """Prometheus could not answer a query; ``reason`` is for the measurement's record."""

    def __init__(self, address: str, reason: str) -> None:
        super().__init__(f"prometheus {address}: {reason}")
        self.reason = reason


class QueryError(PrometheusError):
    """Prometheus refused or failed the query itself: a failed measurement."""


class PrometheusUnreachable(PrometheusError):
    """Prometheus could not be asked: an inconclusive measurement."""


@dataclass(frozen=True)
class Credentials:
    """A bearer token, or a user name and password, for Prometheus (never from the catalog)."""

    token: str = ""
    username: str = ""
    password: str = ""

    @classmethod
    def from_environment(cls, env: Mapping[str, str] | None = None) -> Credentials:
        """Read ``RECONCILER_PROMETHEUS_{TOKEN,USERNAME,PASSWORD}`` or their ``_FILE`` forms."""
        env = os.environ if env is None else env
        values = {key: _secret(env, key) for key in ("TOKEN", "USERNAME", "PASSWORD")}
        if values["TOKEN"] and (values["USERNAME"] or values["PASSWORD"]):
            raise UsageError(
                f"set either {ENV_PREFIX}TOKEN or {ENV_PREFIX}USERNAME/PASSWORD, not both"
            )
        if bool(values["USERNAME"]) != bool(values["PASSWORD"]):
            raise UsageError(f"{ENV_PREFIX}USERNAME and {ENV_PREFIX}PASSWORD go together")
        return cls(values["TOKEN"], values["USERNAME"], values["PASSWORD"])

    def headers(self) -> dict[str, str]:
        if self.token:
            return {"Authorization": f"Bearer {self.token}"}
        if self.username:
            return urllib3.util.make_headers(basic_auth=f"{self.username}:{self.password}")
        return {}


def _secret(env: Mapping[str, str], key: str) -> str:
    value = env.get(ENV_PREFIX + key, "")
    path = env.get(f"{ENV_PREFIX}{key}_FILE", "")
    if value and path:
        raise UsageError(f"set {ENV_PREFIX}{key} or {ENV_PREFIX}{key}_FILE, not both")
    if path:
        try:
            return Path(path).read_text().strip()
        except OSError as e:
            raise UsageError(f"{ENV_PREFIX}{key}_FILE {path}: {e.strerror}") from e
    return value.strip()


@dataclass(frozen=True)
class Sample:
    """One series of an instant query's answer: its labels and its value."""

    labels: Mapping[str, str]
    value: float


@dataclass(frozen=True)
class Answer:
    """What an instant query returned: ``scalar``/``vector`` samples, or another type."""

    result_type: str  # scalar | vector | matrix | string
    samples: tuple[Sample, ...] = ()


@dataclass
class PrometheusClient:
    """Instant queries against one Prometheus, with bounded time and retries."""

    address: str
    credentials: Credentials = field(default_factory=Credentials)
    ca_file: str | None = None
    timeout: float = 5.0
    retries: int = 2
    backoff: float = 0.25
    _pool: urllib3.PoolManager = field(init=False, repr=False)

    def __post_init__(self) -> None:
        parts = urlsplit(self.address)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise UsageError(f"prometheus address {self.address!r} is not an http(s) URL")
        if parts.username or parts.password:
            raise UsageError("put Prometheus credentials in the environment, not in its URL")
        self.address = self.address.rstrip("/")
        options: dict[str, Any] = {
            "retries": False,
            "timeout": urllib3.Timeout(connect=self.timeout, read=self.timeout),
            "maxsize": 4,
        }
        if self.ca_file:
            options["ca_certs"] = self.ca_file
        self._pool = urllib3.PoolManager(**options)

    @classmethod
    def from_environment(cls, address: str, **kwargs: Any) -> PrometheusClient:
        """A client with the environment's credentials and CA file."""
        ca = os.environ.get(ENV_PREFIX + "CA_FILE") or None
        if ca is not None and not Path(ca).is_file():
            raise UsageError(f"{ENV_PREFIX}CA_FILE {ca} is not a file")
        return cls(address, Credentials.from_environment(), ca_file=ca, **kwargs)

    def close(self) -> None:
        self._pool.clear()

    def query(self, expr: str) -> Answer:
        """The instant query ``expr`` evaluated now; ``QueryError``/``PrometheusUnreachable``."""
        url = f"{self.address}{QUERY_PATH}?{urlencode({'query': expr})}"
        headers = {"User-Agent": USER_AGENT, "Accept": "application/json"}
        headers.update(self.credentials.headers())
        last = ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff * 2 ** (attempt - 1))
            try:
                response = self._pool.request(
                    "GET", url, headers=headers, preload_content=False, redirect=False
                )
            except urllib3.exceptions.HTTPError as e:
                last = _reason(e)
                continue
            try:
                body = response.read(_MAX_ANSWER + 1, decode_content=True)
            except urllib3.exceptions.HTTPError as e:
                last = _reason(e)
                continue
            finally:
                response.release_conn()
            if response.status in _RETRY_STATUS:
                last = f"HTTP {response.status}{_detail(body)}"
                continue
            return self._answer(response.status, body)
        raise PrometheusUnreachable(self.address, f"unreachable: {last}")

    def _answer(self, status: int, body: bytes) -> Answer:
        if len(body) > _MAX_ANSWER:
            raise QueryError(self.address, f"answer larger than {_MAX_ANSWER} bytes")
        try:
            data = json.loads(body)
        except ValueError:
            if status >= 400:
                raise QueryError(self.address, f"HTTP {status}{_detail(body)}") from None
            raise PrometheusUnreachable(self.address, "answered with something not JSON") from None
        if not isinstance(data, dict):
            raise PrometheusUnreachable(self.address, "answered with something not an API answer")
        if status in (401, 403):
            raise PrometheusUnreachable(self.address, f"HTTP {status}: credentials refused")
        if data.get("status") != "success":
            kind = str(data.get("errorType", f"HTTP {status}"))
            raise QueryError(self.address, _short(f"{kind}: {data.get('error', 'no reason')}"))
        return _parse(data.get("data"), self.address)


def _parse(data: object, address: str) -> Answer:
    if not isinstance(data, dict):
        raise PrometheusUnreachable(address, "answer without data")
    kind = str(data.get("resultType", ""))
    result = data.get("result")
    try:
        if kind == "scalar" and isinstance(result, list):
            return Answer(kind, (Sample({}, _number(result[1])),))
        if kind == "vector" and isinstance(result, list):
            return Answer(
                kind,
                tuple(
                    Sample(dict(item.get("metric") or {}), _number(item["value"][1]))
                    for item in result
                ),
            )
    except (KeyError, IndexError, TypeError, ValueError) as e:
        raise PrometheusUnreachable(address, f"malformed {kind} answer") from e
    if kind in ("matrix", "string"):
        return Answer(kind)
    raise PrometheusUnreachable(address, f"unknown result type {kind!r}")


def _number(text: object) -> float:
    """Prometheus writes sample values as strings: ``"0.002"``, ``"NaN"``, ``"+Inf"``."""
    if not isinstance(text, str):
        raise ValueError(f"sample value {text!r} is not a string")
    value = float(text)
    return math.nan if math.isnan(value) else value


def _detail(body: bytes) -> str:
    text = body[:_MESSAGE_LIMIT].decode("utf-8", "replace").strip()
    return f": {_short(text)}" if text else ""


def _short(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= _MESSAGE_LIMIT else line[: _MESSAGE_LIMIT - 3] + "..."


def _reason(e: Exception) -> str:
    """A connection failure in a few words, without a URL (it may carry a query's text)."""
    inner = getattr(e, "reason", None) or e
    text = type(inner).__name__
    if "Timeout" in text or "timed out" in str(inner):
        return "timed out"
    if "NewConnectionError" in text or "Refused" in str(inner):
        return "connection refused"
    if "SSL" in text:
        return "TLS error: " + _short(str(inner))[:120]
    return _short(f"{text}: {inner}")[:160]


__all__ = [
    "Answer",
    "Credentials",
    "PrometheusClient",
    "PrometheusError",
    "PrometheusUnreachable",
    "QueryError",
    "Sample",
]
