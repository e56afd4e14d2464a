"""The pages of `senti serve` for a person: `/` (try texts, the model's version, drift against the dev
reference) and `/docs` (Swagger UI). Every asset is served from this machine, so both work on a network
without internet (FastAPI's default `/docs` loads Swagger UI from a public CDN and renders blank offline)."""

from __future__ import annotations

import base64
import hashlib
import re
from pathlib import Path

from fastapi import Request  # module level: FastAPI resolves the endpoints' string annotations here

STATIC = Path(__file__).parent / "static"
DOCS_ASSETS = ("swagger-ui-bundle.js", "swagger-ui.css", "favicon-32x32.png")  # all /docs needs
MEDIA_TYPES = {".js": "text/javascript", ".css": "text/css", ".png": "image/png"}


def swagger_ui_dir() -> Path:
    """Swagger UI 5's files as the `swagger-ui-py` package ships them."""
    import swagger_ui

    return Path(swagger_ui.__file__).parent / "static"


def add_pages(app, status, authorize_page) -> None:
    """Routes `/`, `/v1/status` (the figures the page draws, JSON), `/docs` and its assets on `app`.
    `status()` returns the figures; `authorize_page(request)` raises 401 when the API key is set and missing."""
    from fastapi import HTTPException
    from fastapi.openapi.docs import get_swagger_ui_html
    from fastapi.responses import FileResponse, HTMLResponse, JSONResponse

    page = (STATIC / "console.html").read_text(encoding="utf-8")
    headers = page_headers(page)
    # /docs is the same page on every request: made, and its script hashed, once
    docs_page = bytes(get_swagger_ui_html(openapi_url=app.openapi_url, title="senti API",
                                          swagger_js_url="/docs/assets/swagger-ui-bundle.js",
                                          swagger_css_url="/docs/assets/swagger-ui.css",
                                          swagger_favicon_url="/docs/assets/favicon-32x32.png",
                                          swagger_ui_parameters={"validatorUrl": None}).body).decode()  # no badge
    docs_headers = page_headers(docs_page)

    @app.get("/", include_in_schema=False)
    async def console(request: Request):
        authorize_page(request)
        return HTMLResponse(page, headers=headers)

    @app.get("/v1/status", responses={401: {"description": "missing or wrong API key"}})
    async def model_status(request: Request):
        """The serving model (version, backend, when it was loaded, last reload) and the drift figures of the
        texts scored since start-up beside the dev reference recorded at export."""
        authorize_page(request)
        return JSONResponse(status())

    @app.get("/docs", include_in_schema=False)
    async def docs():
        return HTMLResponse(docs_page, headers=docs_headers)

    @app.get("/docs/assets/{name}", include_in_schema=False)
    async def docs_asset(name: str):
        if name not in DOCS_ASSETS:  # a fixed list: nothing else of the package, nothing outside it
            raise HTTPException(404, "not found")
        return FileResponse(swagger_ui_dir() / name, media_type=MEDIA_TYPES[Path(name).suffix],
                            headers={"Cache-Control": "public, max-age=86400"})


INLINE_SCRIPT = re.compile(r"<script(?![^>]*\bsrc=)[^>]*>(.*?)</script>", re.DOTALL | re.IGNORECASE)


def page_headers(html: str) -> dict[str, str]:
    """The headers every page is sent with. The browser itself refuses anything not from this server, so a page
    can never reach out by mistake; it runs no script but the page's own inline ones, named by their SHA-256 in
    the policy (not 'unsafe-inline': text injected into a page could not run as a script); no other site can frame
    it (its buttons clickjacked) or have a response read as another type."""
    hashes = " ".join(f"'sha256-{base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()}'"
                      for body in INLINE_SCRIPT.findall(html))
    return {"Content-Security-Policy": f"default-src 'self'; script-src 'self' {hashes}; "
                                       "style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
                                       "frame-ancestors 'none'",
            "X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff"}
