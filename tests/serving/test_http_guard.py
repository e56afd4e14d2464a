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


def test_only_the_host_names_a_loopback_server_was_bound_for_are_answered(_exported, tmp_path):
    # Host: attacker.example answered 200 on /v1/status (and senti label's /api/job): a page that rebinds its own
    # name to 127.0.0.1 could read every text. Loopback names only, by default.
    import httpx

    from senti.serving.http_guard import allowed_hosts, host_name
    from tests.helpers import AUTH, assert_only_own_scripts, output_of, start_senti

    assert host_name("127.0.0.1:8600") == "127.0.0.1" and host_name("[::1]:80") == "[::1]" and host_name("x") == "x"
    assert allowed_hosts("0.0.0.0") is None and "localhost" in (allowed_hosts("127.0.0.1") or ())
    server, base = start_senti("serve", "--model", str(_exported[0]))
    try:
        port = base.rsplit(":", 1)[1]
        for path in ("/v1/status", "/readyz", "/"):
            bad = httpx.get(f"{base}{path}", headers={**AUTH, "Host": "attacker.example"}, timeout=30)
            assert bad.status_code == 421, (path, bad.status_code)
        for name in (f"127.0.0.1:{port}", f"localhost:{port}"):
            assert httpx.get(f"{base}/v1/status", headers={**AUTH, "Host": name}, timeout=30).status_code == 200
        page = httpx.get(f"{base}/", headers=AUTH, timeout=30)
        assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
        assert page.headers["x-content-type-options"] == "nosniff" and page.headers["x-frame-options"] == "DENY"
        assert_only_own_scripts(page)
        assert_only_own_scripts(httpx.get(f"{base}/docs", headers=AUTH, timeout=30))
    finally:
        server.terminate()
        server.wait(60)
    assert "Traceback" not in output_of(server)
