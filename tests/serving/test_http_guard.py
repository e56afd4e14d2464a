"""The ASGI guard in front of senti serve's app, driven with ASGI messages directly: bodies bounded in size (413,
with or without Content-Length) and time (408), a client gone before its body, the whole body handed to the app
at once, and /v1/predict responses counted by status."""

from __future__ import annotations

import asyncio

from senti.serving.http_guard import PREDICT_PATH, Guard


def run(guard: Guard, path: str, messages: list, headers=(), gap_s: float = 0.0):
    """(what the guard sent, what the app received) for a request whose body arrives as `messages`."""
    sent, seen = [], []
    queue = list(messages)

    async def receive():
        if gap_s:
            await asyncio.sleep(gap_s)
        return queue.pop(0) if queue else {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    async def app(scope, receive, send):
        seen.append(await receive())
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    guard.app = app
    scope = {"type": "http", "path": path, "headers": list(headers)}
    asyncio.run(guard(scope, receive, send))
    return sent, seen


def status(sent) -> int | None:
    return next((m["status"] for m in sent if m["type"] == "http.response.start"), None)


def body(chunk: bytes, more: bool = False) -> dict:
    return {"type": "http.request", "body": chunk, "more_body": more}


def test_bodies_are_bounded_in_size_and_time_and_handed_over_whole():
    counted: list = []
    guard = Guard(None, limit=10, timeout_s=0.2, count_status=counted.append)
    sent, seen = run(guard, PREDICT_PATH, [body(b"x")], headers=[(b"content-length", b"11")])
    assert status(sent) == 413 and seen == []  # refused from the header, before reading
    sent, seen = run(guard, PREDICT_PATH, [body(b"12345", True), body(b"67890", True), body(b"!")])
    assert status(sent) == 413 and seen == []  # chunked: refused once the running size passes the limit
    sent, seen = run(guard, PREDICT_PATH, [body(b"1", True), body(b"2", True), body(b"3")], gap_s=0.15)
    assert status(sent) == 408 and seen == []  # the whole body must arrive within timeout_s
    sent, seen = run(guard, PREDICT_PATH, [{"type": "http.disconnect"}])
    assert sent == [] and seen == []  # the client left: nothing to answer, the app never runs
    sent, seen = run(guard, PREDICT_PATH, [body(b"12345", True), body(b"67890")])
    assert status(sent) == 200 and seen == [{"type": "http.request", "body": b"1234567890", "more_body": False}]
    assert counted == [413, 413, 408, 200]  # every /v1/predict response, by status
    sent, _ = run(guard, "/healthz", [body(b"")])
    assert status(sent) == 200 and counted == [413, 413, 408, 200]  # other paths are not counted
