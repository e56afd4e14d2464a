"""The human step of the surge loop: the picks of `senti select`, one answer at a time, kept in an audit log.

The log (LABELS, JSONL) gets one line per answer, flushed and fsynced before the answer is acknowledged, so a
killed server loses at most the answer in flight. Nothing is rewritten: an undo or an edit appends a new line,
and the last line per id wins. `resolve_log` reads such a file as training rows (`senti train --dataset LABELS`).
"""

from __future__ import annotations

import bisect
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from senti.core.aspects import ASPECT_POLARITIES, Aspect
from senti.core.errors import DataError
from senti.core.rows import read_rows
from senti.toolkit.data.label_log import ASPECT_ANSWER, LOG_VERSION, SETTLE, UNLABELLED, log_record
from senti.toolkit.data.review import REVIEW_ANSWERS

# label: chosen by number or mouse; accept/reject: the guess; aspects: a polarity per aspect (--aspects);
# keep/change/drop: a suspect of senti audit under review (--review)
# settle: a third labeller's label for a text two labelled differently (--review disagreements)
ANSWERS = ("label", "accept", "reject", "skip", "undo", ASPECT_ANSWER, *REVIEW_ANSWERS, SETTLE)
NAME_LIMIT = 64  # characters of a labeller's name, kept in every line they answer
LEASE_SECONDS = 600  # a text shown in one tab is offered to no other tab for this long, unless answered


@dataclass
class Pick:
    id: str
    text: str
    record: dict  # the input's columns, written back beside each answer
    guess: str | None = None
    confidence: float | None = None
    reason: str | None = None
    given: str | None = None  # under review: the label the row has (the guess is the audit's suggestion)


def pick_id(record: dict, line: int) -> str:
    """A pick's identity: its `id` column, else the pool line `senti select` recorded, else its own line."""
    if record.get("id") not in (None, ""):
        return str(record["id"])
    pool_line = _senti_column(record, "line")
    return f"line {pool_line}" if pool_line not in (None, "") else f"picks line {line}"


def _senti_column(record: dict, name: str):
    """A column senti select wrote: under its name, or `senti_`-prefixed where the input had that name."""
    while f"senti_{name}" in record:
        name = f"senti_{name}"
    return record.get(name)


def labels_in_picks(picks: list[Pick]) -> list[str] | None:
    """The label set senti select wrote beside each pick (`labels`), when the picks carry one and agree on it."""
    found: set[tuple[str, ...] | None] = set()
    for p in picks:
        value = _senti_column(p.record, "labels")
        ok = isinstance(value, list) and all(isinstance(n, str) and n for n in value)
        found.add(tuple(value) if ok else None)
    names = found.pop() if len(found) == 1 else None
    return list(names) if names else None


def read_picks(path: Path, text_column: str | None = None) -> list[Pick]:
    """The texts to label, with the model's guess when the file has one (`guess`, `confidence` of senti select)."""
    picks: list[Pick] = []
    seen: dict[str, int] = {}
    for row in read_rows(Path(path), text_column, strict=True):
        record = row.record or {"text": row.text}
        pid = pick_id(record, row.line)
        if pid in seen:
            raise DataError(f"{path}:{row.line}: id {pid!r} again (first on line {seen[pid]}); ids must be unique")
        seen[pid] = row.line
        guess, confidence, reason = (_senti_column(record, name) for name in ("guess", "confidence", "reason"))
        try:
            confidence = None if confidence in (None, "") else float(confidence)
        except (TypeError, ValueError):
            raise DataError(f"{path}:{row.line}: confidence {confidence!r} is not a number") from None
        assert row.text is not None  # read_rows gives a text to every row without an error
        picks.append(Pick(pid, row.text, record, guess or None, confidence, reason))
    if not picks:
        raise DataError(f"{path}: no texts to label")
    return picks


SUSPECT_KEYS = ("where", "text", "label", "suggested")


def read_suspects(path: Path) -> list[Pick]:
    """The suspects of `senti audit` (suspects.jsonl) as texts to review: the given label beside the suggested one
    (the guess), the margin as the reason."""
    from senti.core.rows import parse_json_line

    picks: list[Pick] = []
    seen: set[str] = set()
    with Path(path).open(encoding="utf-8", errors="replace") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            record, error = parse_json_line(line)
            if record is None or not all(isinstance(record.get(k), str) for k in SUSPECT_KEYS):
                raise DataError(f"{path}:{n}: not a suspect of senti audit ({error or 'needs ' + ', '.join(SUSPECT_KEYS)})")
            if record["where"] in seen:
                raise DataError(f"{path}:{n}: {record['where']} again; a review file lists each row once")
            seen.add(record["where"])
            scores = record.get("probabilities")
            probabilities: dict = scores if isinstance(scores, dict) else {}
            confidence = probabilities.get(record["suggested"])
            margin = record.get("score")
            picks.append(Pick(record["where"], record["text"], record, record["suggested"],
                              float(confidence) if isinstance(confidence, int | float) else None,
                              f"audit: {record['where']} is labelled {record['label']}, its likeliest label is "
                              f"{record['suggested']}" + (f" (margin {margin:.2f})" if isinstance(margin, int | float)
                                                          else ""), record["label"]))
    if not picks:
        raise DataError(f"{path}: no suspects to review")
    return picks


def check_name(name) -> str | None:
    """A labeller's name as the page gives it: printable, at most NAME_LIMIT characters, or DataError."""
    if name is None or name == "":
        return None
    if not isinstance(name, str) or not name.strip():
        raise DataError("the labeller's name is empty")
    if len(name) > NAME_LIMIT:
        raise DataError(f"the labeller's name has {len(name)} characters; at most {NAME_LIMIT}")
    if not name.isprintable():
        raise DataError("the labeller's name holds control characters; give letters, digits and spaces")
    return name.strip()


class LabelJob:
    """The picks, the answers so far (from the log) and which tab holds which text."""

    def __init__(self, picks: list[Pick], labels: list[str], log_path: Path, model_version: str | None = None,
                 aspects: list[Aspect] | None = None, unit: str = "sentence", review: bool = False):
        if len(set(labels)) != len(labels) or len(labels) < 2:
            raise DataError(f"labels must be at least two distinct names; got {labels}")
        self.picks, self.labels, self.log_path = picks, labels, Path(log_path)
        self.model_version = model_version
        self.aspects, self.unit = aspects, unit  # aspect mode: each text is answered per aspect found in it
        self.review = review  # review mode: each text a suspect of senti audit, kept, changed or dropped
        self.by_id = {p.id: p for p in picks}
        for p in picks:
            if p.guess is not None and p.guess not in labels:
                raise DataError(f"pick {p.id!r}: the guess {p.guess!r} is not one of the labels {labels}")
        self.index = {p.id: i for i, p in enumerate(picks)}
        self.last: dict[str, dict] = {}  # id -> its last answer
        self.answers: dict[str, dict[str, dict]] = {}  # id -> labeller ("" unnamed) -> their last answer
        self.twice: set[str] = set()  # ids given to two labellers (`plan`'s overlap)
        self.settling = False  # the queue is the texts labelled differently, for a third labeller to settle
        # ids in the order of their last answer (not undone): a dict, so moving one to the end is O(1) (a list made
        # resuming a 40,000-line log take 32 s)
        self.history: dict[str, None] = {}
        self.open = list(range(len(picks)))  # indices of the picks without an answer, in order
        self.answered_by: dict[str, str] = {}  # id -> the tab that answered it in this server's life
        self.leases: dict[str, tuple[str, float]] = {}  # id -> (tab, since)
        self.lock = threading.Lock()
        self._writer = self._lock_log()
        self.repaired = self._replay_log()

    def _lock_log(self):
        """Hold a lock beside the log for the job's life: two `senti label` on one LABELS file both handed out the
        same texts and both appended. (A lock file beside it: POSIX locks on the log itself would be released
        by each append's close.)"""
        import fcntl

        links = self.log_path.stat().st_nlink if self.log_path.exists() else 1
        if links > 1:  # two names: two lock files
            raise DataError(f"{self.log_path}: this labels file has {links} hard links; give a file with one name, "
                            "so one server at a time can hold it")
        real = self.log_path.resolve()  # a symbolic link and its target share one lock
        lock_path = real.with_name(f".{real.name}.lock")
        handle = open(lock_path, "a+")  # noqa: SIM115 - kept open for the job's life
        try:
            fcntl.lockf(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            raise DataError(f"{self.log_path}: another senti label is writing to this file; one server per labels "
                            "file (stop the other, or give another --output)") from None
        return handle

    # -- the log --------------------------------------------------------------------------------------------
    def _replay_log(self) -> int:
        """Read an existing log of this job; a half-written last line (a kill during a write) is cut off.
        Returns how many bytes were cut."""
        if not self.log_path.exists():
            return 0
        data = self.log_path.read_bytes()
        cut = len(data) - (data.rfind(b"\n") + 1)
        if cut:
            with self.log_path.open("r+b") as fh:
                fh.truncate(len(data) - cut)
                os.fsync(fh.fileno())
        for n, raw in enumerate(data[: len(data) - cut].splitlines(), 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise DataError(f"{self.log_path}:{n}: not valid UTF-8") from None
            record = log_record(line, f"{self.log_path}:{n}")
            pick = self.by_id.get(str(record["id"]))
            if pick is None or pick.text != record["text"]:
                raise DataError(f"{self.log_path}:{n}: id {record['id']!r} is not a text of these picks: the labels "
                                "file belongs to another job; give another --output")
            self._remember(record)
        return cut

    def _remember(self, record: dict, tab: str | None = None) -> None:
        pid = record["id"]
        self.last[pid] = record
        self.history.pop(pid, None)
        got = self.answers.setdefault(pid, {})
        if record["answer"] != "undo":
            got[str(record.get("by") or "")] = record
            if tab is not None:
                self.answered_by[pid] = tab
        else:
            got.pop(str(record.get("by") or ""), None)
            self.answered_by.pop(pid, None)
        if got:
            self.history[pid] = None
        self._queue(pid)

    def _queue(self, pid: str) -> None:
        """Put `pid` in the queue or take it out, as `wanted` says."""
        at = bisect.bisect_left(self.open, self.index[pid])
        waiting = at < len(self.open) and self.open[at] == self.index[pid]
        if self.wanted(pid) and not waiting:
            self.open.insert(at, self.index[pid])
        elif not self.wanted(pid) and waiting:
            del self.open[at]

    def wanted(self, pid: str) -> bool:
        """Whether `pid` still waits for an answer: fewer labellers than it is given to, or (settling) labelled
        differently and not settled."""
        got = self.answers.get(pid, {})
        if self.settling:
            return self.disputed(pid) and not any(r["answer"] == SETTLE for r in got.values())
        return len(got) < (2 if pid in self.twice else 1)

    def disputed(self, pid: str) -> bool:
        said = {str(r["label"]) for r in self.answers.get(pid, {}).values()
                if r["answer"] not in (*UNLABELLED, SETTLE, ASPECT_ANSWER, "drop")}
        return len(said) > 1

    def plan(self, overlap: float = 0.0, settling: bool = False) -> None:
        """A team's queue: `overlap` of the texts (the same ones at every start: the lowest CRC-32s of their ids)
        given to two labellers; or, `settling`, only the texts labelled differently."""
        import zlib

        if not 0 <= overlap <= 1:
            raise DataError(f"--overlap {overlap}: a share of the texts, from 0 to 1")
        ranked = sorted(self.picks, key=lambda p: (zlib.crc32(p.id.encode("utf-8", "surrogatepass")), p.id))
        self.twice = {p.id for p in ranked[:round(overlap * len(self.picks))]}
        self.settling = settling
        self.open = [i for i, p in enumerate(self.picks) if self.wanted(p.id)]

    def named(self) -> bool:
        """Whether every answer must name its labeller: a review, a shared queue, a settling."""
        return self.review or bool(self.twice) or self.settling

    def _append(self, record: dict, tab: str | None = None) -> None:
        with self.log_path.open("a", encoding="utf-8") as fh:
            fh.write(_json_line(record))
            fh.flush()
            os.fsync(fh.fileno())
        self._remember(record, tab)

    # -- what the page asks ---------------------------------------------------------------------------------
    def labelled(self, pid: str) -> bool:
        return pid in self.last and self.last[pid]["answer"] not in UNLABELLED

    def done(self) -> int:
        return self.progress()[0]

    def progress(self) -> tuple[int, int]:
        """(texts done, texts in the job): settling, the texts labelled differently and how many are settled."""
        if self.settling:
            disputed = sum(self.disputed(pid) for pid in self.answers)
            return disputed - len(self.open), disputed
        return len(self.picks) - len(self.open), len(self.picks)

    def next_for(self, tab: str, by: str | None = None) -> Pick | None:
        """The first waiting text that no other tab holds and the labeller `by` has not answered (nor, settling,
        labelled); it is held for `tab` until answered."""
        who = check_name(by) or ""
        with self.lock:
            now = time.monotonic()
            for pid, (holder, since) in list(self.leases.items()):
                if holder == tab or now - since > LEASE_SECONDS:
                    del self.leases[pid]
            for i in self.open:  # the held texts (a few, one a tab) are all that is passed over
                p = self.picks[i]
                if p.id not in self.leases and who not in self.answers.get(p.id, {}):
                    self.leases[p.id] = (tab, now)
                    return p
            return None

    def found(self, pick: Pick) -> list[dict]:
        """Aspect mode: the aspects found in the pick's text, each with its evidence (character offsets), for the
        page to highlight and ask about."""
        from senti.serving.aspects import mentions

        said = mentions(pick.text, self.aspects or [], self.unit)
        return [{"name": a.name, "label": a.label or a.name, "evidence": [e.to_json() for e in said[a.name]]}
                for a in self.aspects or [] if a.name in said]

    def check_aspects(self, aspects) -> dict[str, str]:
        """An aspect answer's polarities: aspects of the job's list, each one of ASPECT_POLARITIES."""
        if self.aspects is None:
            raise DataError("this job labels whole texts; start senti label with --aspects to label aspects")
        names = {a.name for a in self.aspects}
        if not isinstance(aspects, dict) or not aspects:
            raise DataError("an aspect answer needs aspects: an object of aspect name -> polarity")
        for name, polarity in aspects.items():
            if name not in names:
                raise DataError(f"aspect {name!r} is not in the job's aspect list")
            if polarity not in ASPECT_POLARITIES:
                raise DataError(f"aspect {name!r}: polarity must be one of {', '.join(ASPECT_POLARITIES)}; got "
                                f"{polarity!r}")
        return dict(aspects)

    def _label_for(self, pick: Pick, answer: str, label: str | None) -> str | None:
        """The label an answer gives `pick` (None: none), or DataError for an answer this job does not take."""
        if answer not in ANSWERS or answer == "undo":
            raise DataError(f"answer must be one of {', '.join(a for a in ANSWERS if a != 'undo')}; got {answer!r}")
        if (answer in REVIEW_ANSWERS) != self.review and answer != "skip":
            raise DataError(f"{answer!r} does not answer this job: keep, change and drop answer a review of senti "
                            "audit's suspects (senti label --review), the other answers label texts")
        if (answer == SETTLE) != self.settling and answer != "skip":
            raise DataError(f"{answer!r} does not answer this job: settle answers the texts labelled differently "
                            "(senti label --review disagreements), and only it does")
        if answer in (ASPECT_ANSWER, "skip", "drop"):
            return None
        if answer == "keep":
            return pick.given
        if answer in ("accept", "reject"):
            if pick.guess is None:
                raise DataError(f"text {pick.id!r} has no model guess to {answer}")
            if answer == "reject" and len(self.labels) != 2:
                raise DataError("reject needs exactly two labels (it means the other one); choose a label instead")
            return pick.guess if answer == "accept" else next(lab for lab in self.labels if lab != pick.guess)
        label = pick.guess if answer == "change" and label is None else label
        if label not in self.labels:
            raise DataError(f"label {label!r} is not one of {self.labels}")
        return label

    def answer(self, tab: str, pid: str, answer: str, label: str | None = None, aspects=None,
               by: str | None = None) -> dict:
        """Record an answer for `pid` (a new one, or an edit of an earlier one) by the labeller named `by`, and
        return the logged line."""
        pick = self.by_id.get(pid)
        if pick is None:
            raise DataError(f"no text with id {pid!r} in this job")
        by = self.labeller(by)
        label = self._label_for(pick, answer, label)
        if answer == SETTLE and by in self.answers.get(pid, {}):
            raise DataError(f"{by} labelled text {pid!r}: a text is settled by someone who did not label it")
        polarities = self.check_aspects(aspects) if answer == ASPECT_ANSWER else None
        with self.lock:
            holder = self.leases.get(pid)
            if holder and holder[0] != tab:
                raise DataError(f"text {pid!r} is being labelled in another tab")
            record = self._line(pick, label, answer, by)
            if polarities is not None:
                record["aspects"] = polarities
            self._append(record, tab)
            self.leases.pop(pid, None)
            return record

    def labeller(self, by: str | None) -> str | None:
        """The checked name of who answers; a review names its reviewer (who said what is kept for good)."""
        name = check_name(by)
        if name is None and self.named():
            raise DataError("this job records who answered: give your name on the page first")
        return name

    def _line(self, pick: Pick, label: str | None, answer: str, by: str | None) -> dict:
        record = {"log_version": LOG_VERSION, "id": pick.id, "text": pick.text, "label": label, "answer": answer,
                  "guess": pick.guess, "confidence": pick.confidence, "model_version": self.model_version,
                  "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "input": pick.record}
        if by is not None:
            record["by"] = by
        if pick.given is not None:
            record["given"] = pick.given
        return record

    def undo(self, tab: str, by: str | None = None) -> Pick | None:
        """Take back `tab`'s most recent answer (another tab's answers are its own labeller's): a correction line is
        appended and the text comes back to `tab`. Answers read back from the log were given in an earlier server's
        life: any tab may take back the most recent of those once it has none of its own."""
        by = self.labeller(by)
        with self.lock:
            pid = next((p for p in reversed(self.history) if self.answered_by.get(p) == tab), None)
            if pid is None:
                pid = next((p for p in reversed(self.history) if p not in self.answered_by), None)
            if pid is None:
                return None
            pick = self.by_id[pid]
            self._append(self._line(pick, None, "undo", by))
            for held, (holder, _) in list(self.leases.items()):
                if holder == tab:
                    del self.leases[held]
            self.leases[pid] = (tab, time.monotonic())
            return pick

    def recent(self, n: int = 10) -> list[dict]:
        """The last `n` answers, newest first, as the page lists them."""
        from itertools import islice

        return [{"id": pid, "text": self.by_id[pid].text[:80], "label": self.last[pid]["label"],
                 "answer": self.last[pid]["answer"],
                 **({"given": self.by_id[pid].given} if self.by_id[pid].given is not None else {}),
                 **({"aspects": self.last[pid]["aspects"]} if "aspects" in self.last[pid] else {})}
                for pid in islice(reversed(self.history), n)]


def _json_line(record: dict) -> str:
    import json

    return json.dumps(record, ensure_ascii=False) + "\n"


def open_job(picks_path: Path, log_path: Path, model: Path | None = None, labels: str | None = None,
             text_column: str | None = None, trust_pickle: bool = False, aspects: Path | None = None,
             unit: str = "sentence") -> LabelJob:
    """A labelling job from the CLI's options, checked before any page is served."""
    from senti.serving.streaming import check_output

    check_output(picks_path, log_path, suffixes=(".jsonl",), holds="the answers and who gave them")
    log_path = Path(log_path)
    picks = read_picks(picks_path, text_column)
    names = [n.strip() for n in labels.split(",")] if labels else None
    if names is not None and not all(names):
        raise DataError(f"--labels {labels}: an empty label name; give names separated by commas, e.g. negative,positive")
    version = None
    if model is not None:
        from senti.toolkit.surge.selection import load_scorer

        score, model_labels, version = load_scorer(model, trust_pickle)
        missing = [p for p in picks if p.guess is None]
        for p, row in zip(missing, score([p.text for p in missing]) if missing else []):
            p.guess, p.confidence = model_labels[int(row.argmax())], float(row.max())
        if names and set(names) - set(model_labels):
            raise DataError(f"--labels {labels}: {', '.join(sorted(set(names) - set(model_labels)))} not among the "
                            f"model's labels {model_labels}")
        names = names or model_labels
    names = names or labels_in_picks(picks) or (list(ASPECT_POLARITIES[:3]) if aspects is not None else None)
    if not names:
        raise DataError("say the label names: --labels a,b or --model EXPORT_OR_CHECKPOINT (picks of senti select "
                        "carry them)")
    listed = None
    if aspects is not None:
        from senti.core.aspects import read_aspects
        from senti.serving.aspects import check_unit

        check_unit(unit)
        listed = read_aspects(aspects)
    return LabelJob(picks, names, log_path, version, listed, unit)



def open_review(suspects_path: Path, log_path: Path, labels: str | None = None) -> LabelJob:
    """A review job over senti audit's suspects: the label names are the audit's (each suspect's probabilities)
    unless `labels` gives them."""
    from senti.serving.streaming import check_output

    check_output(suspects_path, log_path, suffixes=(".jsonl",), holds="the decisions and who made them")
    picks = read_suspects(suspects_path)
    names = [n.strip() for n in labels.split(",")] if labels else None
    if names is None:
        found = {tuple(p.record["probabilities"]) for p in picks if isinstance(p.record.get("probabilities"), dict)}
        names = list(found.pop()) if len(found) == 1 else sorted({str(p.given) for p in picks} |
                                                                 {str(p.guess) for p in picks})
    for p in picks:
        if p.given not in names:
            raise DataError(f"{suspects_path}: {p.id} is labelled {p.given!r}, not one of {names}")
    return LabelJob(picks, names, Path(log_path), None, None, review=True)
