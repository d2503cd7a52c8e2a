"""GET requests against the Kubernetes API: timeouts, retries, pagination, error statuses.

The HTTP exchange itself is a plain function (``Send``), supplied by ``live.py`` from the
``kubernetes`` package's configured connection pool (auth, TLS, proxies), or by a test.
Keeping the policy here, apart from the client library, makes it testable on its own and
keeps ``kubernetes`` imported in exactly one module (STYLE "Start-up time").

Policy (DESIGN §8, issue #7):

- GET only: this module has no way to send anything else.
- One timeout per request (``--request-timeout``), never beyond the overall deadline
  (``--timeout``); a read that would start after the deadline fails as a timeout.
- Retries only for what is safe and transient: 429 and 5xx answers, and connections
  that could not be made or were reset. Backoff doubles from 0.1 s, and a server's
  ``Retry-After`` is honoured (capped by the deadline). 4xx answers other than 429 are
  final: retrying a 403 or 404 cannot change it.
- Lists are read in pages (``limit=500`` + ``continue``), each page filtered by the
  caller before the next is read, so memory holds what is kept plus one page.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

logger = logging.getLogger(__name__)

JSON = "application/json"
AGGREGATED_DISCOVERY = (
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,"
    "application/json"
)
PAGE_SIZE = 500
"""kubectl's default ``--chunk-size`` (peers.md §3)."""
MAX_ATTEMPTS = 4
BACKOFF_BASE = 0.1
MAX_RETRY_AFTER = 5.0
RETRYABLE_STATUSES = frozenset({429, 500, 502, 503, 504})


@dataclass(frozen=True, slots=True)
class RawResponse:
    """One HTTP answer: status, headers (lower-case names) and the body bytes."""

    status: int
    headers: Mapping[str, str]
    body: bytes


class TransportError(Exception):
    """No HTTP answer: the connection failed or the request timed out."""

    def __init__(self, reason: str, *, timed_out: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.timed_out = timed_out


Send = Callable[[str, Mapping[str, str], str, float], RawResponse]
"""``send(path, query, accept, timeout_seconds) -> RawResponse``; raises TransportError."""


class ApiError(Exception):
    """A read that failed for good: an error status, a timeout, or no connection.

    ``status`` is the HTTP status (None when there was no answer); ``reason`` the
    Status object's reason (``Forbidden``, ``NotFound``, ``Timeout``...); ``message``
    the server's own message, which for 403 names the user and the missing verb.
    """

    def __init__(
        self,
        status: int | None,
        reason: str,
        message: str,
        *,
        timed_out: bool = False,
        unreachable: bool = False,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.message = message
        self.timed_out = timed_out
        self.unreachable = unreachable


@dataclass(slots=True)
class RequestStats:
    """What a Reader did: requests sent (retries included) and retries among them."""

    requests: int = 0
    retries: int = 0
    paths: list[str] = field(default_factory=list)


class Reader:
    """GETs with the retry, timeout and pagination policy of this module's docstring."""

    def __init__(
        self,
        send: Send,
        *,
        request_timeout: float,
        overall_timeout: float,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._send = send
        self.request_timeout = request_timeout
        self.overall_timeout = overall_timeout
        self._clock = clock
        self._sleep = sleep
        self._deadline = clock() + overall_timeout
        self._lock = threading.Lock()
        self.stats = RequestStats()

    def remaining(self) -> float:
        """Seconds left before the overall deadline."""
        return self._deadline - self._clock()

    def _count(self, path: str, retry: bool) -> None:
        with self._lock:
            self.stats.requests += 1
            self.stats.paths.append(path)
            if retry:
                self.stats.retries += 1

    def get(
        self, path: str, query: Mapping[str, str] | None = None, *, accept: str = JSON
    ) -> RawResponse:
        """One GET with retries; a 2xx RawResponse or ApiError."""
        query = dict(query or {})
        attempt = 0
        while True:
            left = self.remaining()
            if left <= 0:
                raise ApiError(
                    None,
                    "Timeout",
                    f"overall timeout of {self.overall_timeout:g}s reached before the read",
                    timed_out=True,
                )
            timeout = min(self.request_timeout, left)
            self._count(path, attempt > 0)
            attempt += 1
            try:
                response = self._send(path, query, accept, timeout)
            except TransportError as exc:
                if exc.timed_out:
                    raise ApiError(
                        None, "Timeout", f"timed out after {timeout:g}s", timed_out=True
                    ) from None
                if attempt < MAX_ATTEMPTS and self._pause(BACKOFF_BASE * 2 ** (attempt - 1)):
                    continue
                raise ApiError(None, "Unreachable", exc.reason, unreachable=True) from None
            if 200 <= response.status < 300:
                return response
            if response.status in RETRYABLE_STATUSES and attempt < MAX_ATTEMPTS:
                delay = BACKOFF_BASE * 2 ** (attempt - 1)
                retry_after = _retry_after(response.headers)
                if retry_after is not None:
                    delay = max(delay, min(retry_after, MAX_RETRY_AFTER))
                if self._pause(delay):
                    logger.debug("retrying GET %s after HTTP %d", path, response.status)
                    continue
            raise _api_error(response)

    def _pause(self, seconds: float) -> bool:
        """Sleep before a retry, unless that would run past the deadline."""
        if seconds >= self.remaining():
            return False
        self._sleep(seconds)
        return True

    def get_json(
        self, path: str, query: Mapping[str, str] | None = None, *, accept: str = JSON
    ) -> dict[str, Any]:
        """A GET whose answer is a JSON object."""
        response = self.get(path, query, accept=accept)
        data = _loads(response.body)
        if not isinstance(data, dict):
            raise ApiError(response.status, "BadResponse", f"{path}: expected a JSON object")
        return data

    def get_text(self, path: str, query: Mapping[str, str] | None = None) -> str:
        """A GET whose answer is text (pod logs); undecodable bytes are replaced."""
        return self.get(path, query, accept="text/plain, */*").body.decode("utf-8", "replace")

    def pages(
        self, path: str, query: Mapping[str, str] | None = None, *, page_size: int = PAGE_SIZE
    ) -> Iterator[dict[str, Any]]:
        """Every page of a list, in order; each item gets the list's kind and apiVersion.

        Raw list responses omit ``kind``/``apiVersion`` on items; they are put back so
        the items read like the objects ``kubectl get -o yaml`` prints.
        """
        base = dict(query or {})
        base["limit"] = str(page_size)
        token: str | None = None
        while True:
            page_query = dict(base)
            if token:
                page_query["continue"] = token
            page = self.get_json(path, page_query)
            kind = str(page.get("kind") or "")
            item_kind = kind[: -len("List")] if kind.endswith("List") else ""
            api_version = page.get("apiVersion")
            items = _items_of(page)
            for item in items:
                if isinstance(item, dict):
                    if item_kind:
                        item.setdefault("kind", item_kind)
                    if api_version:
                        item.setdefault("apiVersion", api_version)
            yield page
            meta = page.get("metadata")
            token = meta.get("continue") if isinstance(meta, dict) else None
            if not token or not isinstance(token, str):
                return

    def list_items(
        self,
        path: str,
        query: Mapping[str, str] | None = None,
        *,
        keep: Callable[[Mapping[str, Any]], bool] | None = None,
    ) -> list[dict[str, Any]]:
        """Every item of a list (all pages), filtered page by page by ``keep``."""
        out: list[dict[str, Any]] = []
        for page in self.pages(path, query):
            for item in _items_of(page):
                if isinstance(item, dict) and (keep is None or keep(item)):
                    out.append(item)
        return out


def _items_of(page: Mapping[str, Any]) -> list[Any]:
    """A list page's ``items``; a server answering something else there lists nothing
    (each item's own shape is checked where it enters the Snapshot)."""
    items = page.get("items")
    return items if isinstance(items, list) else []


def _loads(body: bytes) -> Any:
    import orjson

    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise ApiError(None, "BadResponse", f"malformed JSON from the API server: {exc}") from None


def _retry_after(headers: Mapping[str, str]) -> float | None:
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


def _api_error(response: RawResponse) -> ApiError:
    """An ApiError from a non-2xx answer, with the Status object's reason and message."""
    reason, message = "", ""
    try:
        status = _loads(response.body)
    except ApiError:
        status = None
    if isinstance(status, dict) and status.get("kind") == "Status":
        reason = str(status.get("reason") or "")
        message = str(status.get("message") or "")
    if not message:
        message = (
            response.body.decode("utf-8", "replace").strip()[:300] or f"HTTP {response.status}"
        )
    if not reason:
        reason = {
            400: "BadRequest",
            401: "Unauthorized",
            403: "Forbidden",
            404: "NotFound",
            410: "Expired",
            429: "TooManyRequests",
        }.get(response.status, "InternalError" if response.status >= 500 else "Unknown")
    return ApiError(response.status, reason, message)
