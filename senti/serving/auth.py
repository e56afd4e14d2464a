"""Who may call: the API key of `senti serve` and `senti label`, for the routes (X-API-Key or Authorization)
and for the pages (a 401 the browser answers itself)."""

from __future__ import annotations

import base64
import binascii
import hmac


def key_accepted(api_key: str | None, x_api_key: str | None, authorization: str | None) -> bool:
    """Whether a request carries the API key (always, when none is set): X-API-Key, or an Authorization header."""
    if api_key is None:
        return True
    given = x_api_key or presented_key(authorization)
    return hmac.compare_digest(given.encode(), api_key.encode())


def page_guard(api_key: str | None, realm: str):
    """`guard(request)` for pages: a 401 the browser answers itself (Basic, any user name, the key as password),
    then sends with the page's own requests. Not counted as a failed prediction."""
    from fastapi import HTTPException

    def guard(request) -> None:
        if not key_accepted(api_key, request.headers.get("x-api-key"), request.headers.get("authorization")):
            raise HTTPException(401, "missing or wrong API key", {"WWW-Authenticate": f'Basic realm="{realm}"'})

    return guard


def presented_key(authorization: str | None) -> str:
    """The API key in an Authorization header: `Bearer KEY` (any case), or Basic with the key as password."""
    scheme, _, value = (authorization or "").strip().partition(" ")
    if scheme.lower() == "bearer":
        return value.strip()
    if scheme.lower() == "basic":
        try:
            return base64.b64decode(value.strip(), validate=True).decode("utf-8").partition(":")[2]
        except (binascii.Error, UnicodeDecodeError):
            return ""
    return ""
