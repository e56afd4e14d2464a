"""Dynamic batching: requests that arrive together share one model call, behind a bounded queue.

Work is counted in model inputs ("cost": a text, or each of its windows when long texts are scored
in windows), not in texts, so one huge text cannot slip past the limits as "one".
"""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

# Under load, a batch also takes whatever else is already queued, up to this many model batches: `predict` cuts
# it by length into calls of at most max_batch_size, so texts of like length share a call (less padding), as
# when thousands of texts are scored in process. Nothing more is waited for, so a quiet server is unchanged.
POOL_BATCHES = 4


class QueueFull(Exception):
    """More work is waiting than the queue holds; the caller should answer 503."""


@dataclass
class _Job:
    texts: list  # texts, or the server's CheckedText of them (serving.predictor)
    cost: int
    future: asyncio.Future
    enqueued: float = field(default_factory=time.perf_counter)


class Batcher:
    """Collects jobs for up to `max_wait_ms` or `max_batch_size` inputs (and what else is already queued, up to
    `pool_batches` x that), then runs `predict` in one thread.

    The model call runs in a single worker thread: the runtime already uses every core, so two
    concurrent calls would only fight over them, while the event loop keeps accepting requests.
    A job whose caller went away (its future cancelled) is dropped before it reaches the model; a
    failed batch is retried one job at a time, so only the job that caused the failure fails.
    """

    def __init__(self, predict, max_batch_size: int = 32, max_wait_ms: float = 5.0, max_queue: int = 1024,
                 on_batch=None, pool_batches: int = POOL_BATCHES):
        self.predict = predict
        self.max_batch_size = max_batch_size
        self.max_pool = max_batch_size * pool_batches
        self.max_wait = max_wait_ms / 1000
        self.max_queue = max_queue
        self.on_batch = on_batch or (lambda cost, seconds: None)
        self.pending = 0  # model inputs queued or being scored
        self._queue: asyncio.Queue[_Job] = asyncio.Queue()
        self._carry: _Job | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="senti-model")
        self._task: asyncio.Task | None = None

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def submit(self, texts: list, cost: int | None = None):
        """Results for `texts` once scored; `cost` is the model inputs they take (default: one per text)."""
        cost = len(texts) if cost is None else cost
        if self.pending + cost > self.max_queue:
            raise QueueFull()
        job = _Job(texts, cost, asyncio.get_running_loop().create_future())
        self.pending += cost
        await self._queue.put(job)
        return await job.future  # cancelling the caller cancels the future: the job is then dropped

    async def _next_job(self, timeout: float | None) -> _Job | None:
        """The next job still wanted, or None when `timeout` passes; cancelled jobs are released on the way."""
        while True:
            if timeout is None:
                job = await self._queue.get()
            else:
                try:
                    job = await asyncio.wait_for(self._queue.get(), max(timeout, 0))
                except asyncio.TimeoutError:
                    return None
            if not job.future.done():
                return job
            self.pending -= job.cost  # the client went away: never score it

    async def _next_batch(self) -> list[_Job]:
        first = self._carry if self._carry and not self._carry.future.done() else None
        if self._carry and first is None:
            self.pending -= self._carry.cost
        self._carry = None
        first = first or await self._next_job(None)
        assert first is not None  # with no timeout, _next_job waits for a job
        batch, size = [first], first.cost
        deadline = time.perf_counter() + self.max_wait
        while size < self.max_batch_size:
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                break
            job = await self._next_job(remaining)
            if job is None:
                break
            if size + job.cost > self.max_pool:
                self._carry = job  # first in the next batch: order is kept
                break
            batch.append(job)
            size += job.cost
        while self._carry is None and size < self.max_pool and not self._queue.empty():  # already waiting
            job = self._queue.get_nowait()
            if job.future.done():
                self.pending -= job.cost
                continue
            if size + job.cost > self.max_pool:
                self._carry = job
                break
            batch.append(job)
            size += job.cost
        return batch

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            batch = await self._next_batch()
            texts = [t for job in batch for t in job.texts]
            cost = sum(job.cost for job in batch)
            started = time.perf_counter()
            try:
                results = await loop.run_in_executor(self._executor, self.predict, texts)
            except asyncio.CancelledError:
                raise
            except BaseException as err:  # a native panic (a BaseException) fails its request, not the batcher
                err = as_error(err)
                if len(batch) == 1:
                    if not batch[0].future.done():
                        batch[0].future.set_exception(err)
                else:  # a failed batch must not fail requests that did not cause it: each one alone
                    await self._run_alone(loop, batch)
            else:
                self.on_batch(cost, time.perf_counter() - started)
                offset = 0
                for job in batch:
                    if not job.future.done():  # the client may have gone away
                        job.future.set_result(results[offset : offset + len(job.texts)])
                    offset += len(job.texts)
            finally:
                self.pending -= cost

    async def _run_alone(self, loop, batch: list[_Job]) -> None:
        for job in batch:
            if job.future.done():
                continue
            started = time.perf_counter()
            try:
                result = await loop.run_in_executor(self._executor, self.predict, job.texts)
            except asyncio.CancelledError:
                raise
            except BaseException as err:  # as in _run
                if not job.future.done():
                    job.future.set_exception(as_error(err))
            else:
                self.on_batch(job.cost, time.perf_counter() - started)
                if not job.future.done():
                    job.future.set_result(result)

    async def stop(self) -> None:
        """Finish what is queued, then stop the worker."""
        while self.pending and self.running:
            await asyncio.sleep(0.01)
        if self._task:
            self._task.cancel()
        self._executor.shutdown(wait=True)


def as_error(err: BaseException) -> Exception:
    """`err` as an Exception a request can be failed with: a BaseException that is no Exception (a panic in a
    native library) becomes a RuntimeError naming it; KeyboardInterrupt and SystemExit go on."""
    if isinstance(err, Exception):
        return err
    if isinstance(err, KeyboardInterrupt | SystemExit):
        raise err
    return RuntimeError(f"{type(err).__name__}: {str(err).splitlines()[0][:120] if str(err) else 'no message'}")
