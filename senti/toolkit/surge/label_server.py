"""`senti label`: a local page for labelling the picks of `senti select`, one text at a time, by keyboard or mouse.

Routes: `/` (the page), `/api/job`, `/api/next`, `/api/answer`, `/api/undo`. Every answer is in the log before
the page moves on (see `senti.toolkit.surge.labeling`). Behind the API key when one is set (the browser asks for it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import Request  # module level: FastAPI resolves the endpoints' string annotations here
from pydantic import BaseModel, ConfigDict, Field

from senti.core.aspects import ASPECT_POLARITIES
from senti.core.errors import SentiError
from senti.toolkit.surge.labeling import LabelJob, Pick

PAGE = Path(__file__).parent / "static" / "label.html"


class TabRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tab: str = Field(min_length=1, max_length=64, description="The browser tab asking (made up by the page)")
    by: str | None = Field(default=None, max_length=1000, description="The labeller's name, kept in the log")


class AnswerRequest(TabRequest):
    id: str = Field(max_length=1000)
    answer: str = Field(description="label, accept, reject, skip, aspects; keep, change or drop under review")
    label: str | None = None
    aspects: dict[str, str] | None = Field(default=None, max_length=256,
                                           description="aspects: aspect name -> polarity")


def _shown(job: LabelJob, pick: Pick | None) -> dict:
    """What the page shows: the text a tab holds (with the aspects found in it, in aspect mode) and the progress."""
    done, total = job.progress()
    progress = {"done": done, "total": total, "recent": job.recent()}
    if pick is None:
        return {"item": None, **progress}
    item: dict[str, Any] = {"id": pick.id, "text": pick.text, "guess": pick.guess, "confidence": pick.confidence,
                            "reason": pick.reason, "position": job.index[pick.id] + 1, "given": pick.given}
    if job.settling:  # who said what, for the one who settles it
        item["labels"] = {who or "(unnamed)": r["label"] for who, r in job.answers.get(pick.id, {}).items()
                          if r["label"] is not None}
    if job.aspects is not None:
        item["aspects"] = job.found(pick)
    return {"item": item, **progress}


def create_label_app(job: LabelJob, api_key: str | None = None):
    from fastapi import FastAPI, HTTPException
    from fastapi.responses import HTMLResponse

    from senti.serving.auth import page_guard
    from senti.serving.console import page_headers

    app = FastAPI(title="senti label", docs_url=None, redoc_url=None, openapi_url=None)
    page = PAGE.read_text(encoding="utf-8")
    headers, authorize = page_headers(page), page_guard(api_key, "senti label")

    @app.get("/")
    def index(request: Request):
        authorize(request)
        return HTMLResponse(page, headers=headers)

    @app.get("/api/job")
    def describe(request: Request):
        authorize(request)
        return {"labels": job.labels, "total": job.progress()[1], "done": job.progress()[0],
                "output": str(job.log_path),
                "model_version": job.model_version, "guesses": any(p.guess for p in job.picks),
                "aspect_mode": job.aspects is not None, "polarities": list(ASPECT_POLARITIES),
                "review_mode": job.review, "settle_mode": job.settling, "named": job.named(),
                "overlap": len(job.twice)}

    @app.post("/api/next")
    def next_text(body: TabRequest, request: Request):
        authorize(request)
        return _shown(job, _next(job, body))

    def record(body: AnswerRequest, request: Request) -> None:
        authorize(request)
        try:
            job.answer(body.tab, body.id, body.answer, body.label, body.aspects, body.by)
        except SentiError as err:
            raise HTTPException(409, str(err)) from None

    @app.post("/api/answer")
    def answer(body: AnswerRequest, request: Request):
        record(body, request)
        return _shown(job, _next(job, body))

    @app.post("/api/edit")
    def edit(body: AnswerRequest, request: Request):
        """Change an earlier answer (one of the last ten); the text the tab holds stays its own."""
        record(body, request)
        done, total = job.progress()
        return {"done": done, "total": total, "recent": job.recent()}

    @app.post("/api/undo")
    def undo(body: TabRequest, request: Request):
        authorize(request)
        try:
            return _shown(job, job.undo(body.tab, body.by) or job.next_for(body.tab, body.by))
        except SentiError as err:
            raise HTTPException(409, str(err)) from None

    _agreement_route(app, job, authorize)
    return app


def _next(job: LabelJob, body: TabRequest) -> Pick | None:
    """The next text for the asking tab and labeller (409 for a name the job refuses)."""
    from fastapi import HTTPException

    try:
        return job.next_for(body.tab, body.by)
    except SentiError as err:
        raise HTTPException(409, str(err)) from None


def _agreement_route(app, job: LabelJob, authorize) -> None:
    @app.get("/api/agreement")
    def agreement(request: Request):
        """Cohen's kappa per pair of labellers so far (toolkit.surge.agreement), or why there is none yet."""
        authorize(request)
        from senti.toolkit.surge.agreement import agreement as measure

        try:
            report = measure([job.log_path])
        except SentiError as err:
            return {"pairs": [], "note": str(err)}
        return {"pairs": [{"first": p.first, "second": p.second, "texts": p.texts, "raw": p.raw,
                           "kappa": p.kappa} for p in report.pairs], "disagreements": len(report.disagreements)}
