"""The HTTP edges of `senti serve`, below the app: whole bodies bounded in size and time, every response
counted, and headers that must arrive in time."""

from __future__ import annotations

import asyncio
import json
import os
import time

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

PREDICT_PATH = "/v1/predict"


async def _send_json(send, status: int, body: dict) -> None:
    payload = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]})
    await send({"type": "http.response.body", "body": payload})


LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})


def allowed_hosts(bind: str) -> frozenset[str] | None:
    """The Host names a server bound to `bind` answers: loopback names when it listens on loopback (a web page
    that rebinds its own name to 127.0.0.1 then cannot read it), else any (None): its names are the network's."""
    import ipaddress

    try:
        loopback = ipaddress.ip_address(bind.strip("[]")).is_loopback
    except ValueError:
        loopback = bind == "localhost"
    return LOOPBACK_NAMES if loopback else None


def host_name(header: str) -> str:
    """A Host header without its port: "127.0.0.1:8000" -> "127.0.0.1", "[::1]:8000" -> "[::1]"."""
    if header.startswith("["):
        return header[: header.find("]") + 1] if "]" in header else header
    return header.rsplit(":", 1)[0] if ":" in header else header


class HostGuard:
    """Pure ASGI middleware: a request whose Host header is not one the server was bound for gets 421, before any
    route sees it (DNS rebinding: `Host: attacker.example` on 127.0.0.1 read /api/job and /v1/status)."""

    def __init__(self, app, bind: str):
        self.app, self.allowed = app, allowed_hosts(bind)

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and self.allowed is not None:
            host = dict(scope.get("headers") or []).get(b"host", b"").decode("latin-1").lower()
            if host_name(host) not in self.allowed:
                return await _send_json(send, 421, {"detail": f"this server answers only "
                                                              f"{', '.join(sorted(self.allowed))} as the Host; "
                                                              f"got {host or 'none'}"})
        return await self.app(scope, receive, send)


class Guard:
    """Pure ASGI middleware in front of the app: reads the whole body first, bounded in size (413) and time
    (408), so the app never sees a partial one; and counts every /v1/predict response by status."""

    def __init__(self, app, limit: int, timeout_s: float, count_status):
        self.app, self.limit, self.timeout_s, self.count_status = app, limit, timeout_s, count_status

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        if scope["path"] == PREDICT_PATH:
            send = self._counting(send)
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            return await _send_json(send, 413, {"detail": f"request body over {self.limit} bytes"})
        chunks, size, deadline = [], 0, time.monotonic() + self.timeout_s
        while True:
            try:
                message = await asyncio.wait_for(receive(), max(deadline - time.monotonic(), 0))
            except asyncio.TimeoutError:
                return await _send_json(send, 408, {"detail": f"request body not received within "
                                                              f"{self.timeout_s:g} s"})
            if message["type"] == "http.disconnect":
                return  # the client left before sending its request: nothing to answer
            size += len(message.get("body", b""))
            if size > self.limit:  # chunked bodies have no Content-Length to refuse up front
                return await _send_json(send, 413, {"detail": f"request body over {self.limit} bytes"})
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body, delivered = b"".join(chunks), False

        async def replay():
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # after the body: waits for http.disconnect

        await self.app(scope, replay, send)

    def _counting(self, send):
        async def counted(message):
            if message["type"] == "http.response.start":
                self.count_status(message["status"])
            await send(message)

        return counted


HEADER_TIMEOUT_ENV = "SENTI_HEADER_TIMEOUT_S"  # read by each (worker) process; set by senti.serving.server.serve


# How long a server that is shutting down (a retiring worker, SIGTERM) keeps an idle keep-alive connection open to
# answer a request already on its way, with `Connection: close`, before closing it.
DRAIN_S = 2.0
CLOSE = (b"connection", b"close")


class HeaderTimeoutProtocol(H11Protocol):
    """uvicorn's h11 protocol, closing a connection whose request line and headers are not complete within
    SENTI_HEADER_TIMEOUT_S (default 10) seconds: uvicorn bounds only idle keep-alive connections, so a client
    trickling headers would be held forever. A module-level class, so uvicorn's worker processes can import it.

    It also drains on shutdown. uvicorn closed every idle keep-alive connection at once, and a request the client
    was sending on one in that instant was lost (4 keep-alive clients lost 10 of 2,988 requests over two rolling
    reloads): now an idle connection stays open for DRAIN_S, a request arriving on it is answered with
    `Connection: close` (the client opens its next connection to a worker still serving), and only then does
    it close."""

    _header_timer = None
    _draining = False

    def _arm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
        seconds = float(os.environ.get(HEADER_TIMEOUT_ENV, "10"))
        self._header_timer = self.loop.call_later(seconds, self._headers_late)

    def _headers_late(self) -> None:
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.transport.close()  # headers still incomplete: nothing to answer, the peer is too slow

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self._arm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._arm()

    def connection_lost(self, exc) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
        super().connection_lost(exc)

    def handle_events(self) -> None:
        before = self.cycle
        super().handle_events()
        if self._draining and self.cycle is not None and self.cycle is not before:
            # a request that arrived while draining: its task has not run yet, so its answer says close
            self.cycle.keep_alive = False
            self.cycle.default_headers = [*self.cycle.default_headers, CLOSE]

    def shutdown(self) -> None:
        if self.cycle is not None and not self.cycle.response_complete:
            super().shutdown()  # a request in flight: answered, then the connection closes
            return
        self._draining = True
        self.loop.call_later(DRAIN_S, self._close_if_idle)

    def _close_if_idle(self) -> None:
        if not self.transport.is_closing() and (self.cycle is None or self.cycle.response_complete):
            super().shutdown()
