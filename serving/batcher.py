"""Dynamic batching: requests that arrive together share one model call, behind a bounded queue."""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field


class QueueFull(Exception):
    """More texts are waiting than the queue holds; the caller should answer 503."""


@dataclass
class _Job:
    texts: list[str]
    future: asyncio.Future
    enqueued: float = field(default_factory=time.perf_counter)


class Batcher:
    """Collects jobs for up to `max_wait_ms` or `max_batch_size` texts, then runs `predict` in one thread.

    The model call runs in a single worker thread: the runtime already uses every core, so two
    concurrent calls would only fight over them, while the event loop keeps accepting requests.
    """

    def __init__(self, predict, max_batch_size: int = 32, max_wait_ms: float = 5.0, max_queue: int = 1024,
                 on_batch=None):
        self.predict = predict
        self.max_batch_size = max_batch_size
        self.max_wait = max_wait_ms / 1000
        self.max_queue = max_queue
        self.on_batch = on_batch or (lambda size, seconds: None)
        self.pending = 0  # texts queued or being scored
        self._queue: asyncio.Queue[_Job] = asyncio.Queue()
        self._carry: _Job | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="senti-model")
        self._task: asyncio.Task | None = None

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def submit(self, texts: list[str]):
        if self.pending + len(texts) > self.max_queue:
            raise QueueFull()
        job = _Job(texts, asyncio.get_running_loop().create_future())
        self.pending += len(texts)
        await self._queue.put(job)
        return await job.future

    async def _next_batch(self) -> list[_Job]:
        first = self._carry or await self._queue.get()
        self._carry = None
        batch, size = [first], len(first.texts)
        deadline = time.perf_counter() + self.max_wait
        while size < self.max_batch_size:
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                break
            try:
                job = await asyncio.wait_for(self._queue.get(), remaining)
            except asyncio.TimeoutError:
                break
            if size + len(job.texts) > self.max_batch_size:
                self._carry = job  # first in the next batch: order is kept
                break
            batch.append(job)
            size += len(job.texts)
        return batch

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            batch = await self._next_batch()
            texts = [t for job in batch for t in job.texts]
            started = time.perf_counter()
            try:
                results = await loop.run_in_executor(self._executor, self.predict, texts)
            except Exception as err:  # a failed batch fails its requests, never the server
                for job in batch:
                    if not job.future.done():
                        job.future.set_exception(err)
            else:
                self.on_batch(len(texts), time.perf_counter() - started)
                offset = 0
                for job in batch:
                    if not job.future.done():  # the client may have gone away
                        job.future.set_result(results[offset : offset + len(job.texts)])
                    offset += len(job.texts)
            finally:
                self.pending -= len(texts)

    async def stop(self) -> None:
        """Finish what is queued, then stop the worker."""
        while self.pending and self.running:
            await asyncio.sleep(0.01)
        if self._task:
            self._task.cancel()
        self._executor.shutdown(wait=True)
