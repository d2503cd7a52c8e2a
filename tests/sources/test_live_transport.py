"""The GET policy of live collection: retries, backoff, deadlines, pagination (no network)."""

from __future__ import annotations

import json
from collections.abc import Mapping

import pytest

from dradiag.sources.live_transport import (
    MAX_ATTEMPTS,
    MAX_RETRY_AFTER,
    ApiError,
    RawResponse,
    Reader,
    TransportError,
)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def status(
    code: int, reason: str, message: str, headers: Mapping[str, str] | None = None
) -> RawResponse:
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "reason": reason,
        "message": message,
        "code": code,
    }
    return RawResponse(code, dict(headers or {}), json.dumps(body).encode())


def ok(body: object) -> RawResponse:
    return RawResponse(200, {}, json.dumps(body).encode())


def scripted(*answers: RawResponse | Exception):
    calls: list[tuple[str, dict[str, str], float]] = []
    queue = list(answers)

    def send(path: str, query: Mapping[str, str], accept: str, timeout: float) -> RawResponse:
        calls.append((path, dict(query), timeout))
        answer = queue.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    return send, calls


def reader(send, clock: Clock, *, request_timeout: float = 10.0, overall: float = 60.0) -> Reader:
    return Reader(
        send,
        request_timeout=request_timeout,
        overall_timeout=overall,
        clock=clock,
        sleep=clock.sleep,
    )


def test_5xx_is_retried_with_doubling_backoff():
    clock = Clock()
    send, calls = scripted(
        status(500, "InternalError", "etcd"), status(503, "ServiceUnavailable", "x"), ok({"a": 1})
    )
    r = reader(send, clock)

    assert r.get_json("/api/v1/nodes/n") == {"a": 1}
    assert len(calls) == 3
    assert clock.sleeps == [0.1, 0.2]
    assert (r.stats.requests, r.stats.retries) == (3, 2)


def test_retry_after_is_honoured_and_capped():
    clock = Clock()
    send, _ = scripted(
        status(429, "TooManyRequests", "slow down", {"retry-after": "2"}),
        status(429, "TooManyRequests", "slow down", {"retry-after": "120"}),
        ok({}),
    )
    reader(send, clock).get_json("/x")

    assert clock.sleeps == [2.0, MAX_RETRY_AFTER]


@pytest.mark.parametrize(
    "code,reason",
    [(403, "Forbidden"), (404, "NotFound"), (400, "BadRequest"), (401, "Unauthorized")],
)
def test_client_errors_are_final(code, reason):
    clock = Clock()
    send, calls = scripted(status(code, reason, f"the server says {code}"))
    with pytest.raises(ApiError) as info:
        reader(send, clock).get_json("/x")

    assert (info.value.status, info.value.reason, info.value.message) == (
        code,
        reason,
        f"the server says {code}",
    )
    assert len(calls) == 1 and clock.sleeps == []


def test_persistent_5xx_gives_up_after_max_attempts():
    clock = Clock()
    send, calls = scripted(*[status(502, "", "bad gateway")] * MAX_ATTEMPTS)
    with pytest.raises(ApiError) as info:
        reader(send, clock).get_json("/x")

    assert len(calls) == MAX_ATTEMPTS
    assert info.value.status == 502 and info.value.reason == "InternalError"


def test_connection_errors_are_retried_then_reported_unreachable():
    clock = Clock()
    send, calls = scripted(*[TransportError("connection refused")] * MAX_ATTEMPTS)
    with pytest.raises(ApiError) as info:
        reader(send, clock).get_json("/version")

    assert info.value.unreachable and info.value.status is None
    assert len(calls) == MAX_ATTEMPTS


def test_a_timeout_is_not_retried():
    clock = Clock()
    send, calls = scripted(TransportError("read timed out", timed_out=True))
    with pytest.raises(ApiError) as info:
        reader(send, clock, request_timeout=3).get_json("/x")

    assert info.value.timed_out and len(calls) == 1
    assert "3s" in info.value.message


def test_request_timeout_never_exceeds_what_is_left_of_the_deadline():
    clock = Clock()
    send, calls = scripted(ok({}), ok({}))
    r = reader(send, clock, request_timeout=10, overall=12)
    r.get_json("/a")
    clock.now = 9.5
    r.get_json("/b")

    assert [c[2] for c in calls] == [10, 2.5]


def test_no_read_starts_after_the_deadline_and_no_retry_sleeps_past_it():
    clock = Clock()
    send, calls = scripted(status(503, "ServiceUnavailable", "busy", {"retry-after": "4"}))
    r = reader(send, clock, overall=3)
    with pytest.raises(ApiError) as info:
        r.get_json("/x")
    assert info.value.status == 503 and clock.sleeps == []  # a 4 s wait would pass the deadline

    clock.now = 3.0
    with pytest.raises(ApiError) as info:
        r.get_json("/y")
    assert info.value.timed_out and len(calls) == 1


def test_pages_follow_continue_tokens_and_restore_item_kinds():
    clock = Clock()
    send, calls = scripted(
        ok(
            {
                "kind": "PodList",
                "apiVersion": "v1",
                "metadata": {"continue": "t1"},
                "items": [{"metadata": {"name": "a"}}],
            }
        ),
        ok(
            {
                "kind": "PodList",
                "apiVersion": "v1",
                "metadata": {"continue": "t2"},
                "items": [{"metadata": {"name": "b"}}],
            }
        ),
        ok(
            {
                "kind": "PodList",
                "apiVersion": "v1",
                "metadata": {},
                "items": [{"metadata": {"name": "c"}}],
            }
        ),
    )
    items = reader(send, clock).list_items(
        "/api/v1/pods",
        {"fieldSelector": "spec.nodeName=n"},
        keep=lambda o: o["metadata"]["name"] != "b",
    )

    assert [i["metadata"]["name"] for i in items] == ["a", "c"]
    assert all(i["kind"] == "Pod" and i["apiVersion"] == "v1" for i in items)
    assert [c[1].get("continue") for c in calls] == [None, "t1", "t2"]
    assert all(c[1]["limit"] == "500" and c[1]["fieldSelector"] == "spec.nodeName=n" for c in calls)


def test_error_without_a_status_body_keeps_the_text():
    clock = Clock()
    send, _ = scripted(RawResponse(404, {}, b"404 page not found\n"))
    with pytest.raises(ApiError) as info:
        reader(send, clock).get_json("/apis/resource.k8s.io/v1beta9")

    assert (info.value.status, info.value.reason, info.value.message) == (
        404,
        "NotFound",
        "404 page not found",
    )
