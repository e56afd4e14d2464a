"""`serving.batcher`: requests that arrive together share a model call, the queue is bounded, a failing job
fails alone, and a departed caller's work never reaches the model."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from senti.serving.batcher import Batcher, QueueFull


def _run(coro):
    return asyncio.run(asyncio.wait_for(coro, timeout=30))


def test_jobs_that_arrive_together_share_one_call():
    calls = []

    def predict(texts):
        calls.append(list(texts))
        return [t.upper() for t in texts]

    async def main():
        batcher = Batcher(predict, max_batch_size=8, max_wait_ms=50)
        batcher.start()
        results = await asyncio.gather(*(batcher.submit([f"t{i}", f"u{i}"]) for i in range(3)))
        await batcher.stop()
        return results

    results = _run(main())
    assert results == [[f"T{i}", f"U{i}"] for i in range(3)]
    assert len(calls) == 1 and sorted(calls[0]) == sorted(t for i in range(3) for t in (f"t{i}", f"u{i}"))


def test_the_queue_is_bounded_by_cost_and_a_failing_job_fails_alone():
    def predict(texts):
        if "bad" in texts:
            raise ValueError("cannot score")
        return texts

    async def main():
        batcher = Batcher(predict, max_batch_size=4, max_wait_ms=50, max_queue=5)
        batcher.start()
        with pytest.raises(QueueFull):
            await batcher.submit(["x"], cost=6)  # one text scored in 6 windows is 6 inputs, not 1
        good = asyncio.ensure_future(batcher.submit(["a", "b"]))
        bad = asyncio.ensure_future(batcher.submit(["bad"]))
        done = await asyncio.gather(good, bad, return_exceptions=True)
        await batcher.stop()
        return done

    good, bad = _run(main())
    assert good == ["a", "b"] and isinstance(bad, ValueError)


def test_work_of_a_departed_caller_is_dropped_before_the_model():
    seen = []

    def predict(texts):
        seen.extend(texts)
        return texts

    async def main():
        batcher = Batcher(predict, max_batch_size=4, max_wait_ms=200)
        batcher.start()
        gone = asyncio.ensure_future(batcher.submit(["gone"]))
        await asyncio.sleep(0)
        gone.cancel()
        kept = await batcher.submit(["kept"])
        await batcher.stop()
        return kept

    assert _run(main()) == ["kept"] and "gone" not in seen


def test_under_load_a_batch_takes_what_is_already_queued_up_to_the_pool():
    """While the model is busy, requests queue up; the next batch takes them all (up to pool_batches x
    max_batch_size) so the predictor can group them by length, and a quiet moment waits no longer than before."""
    import threading

    gate, calls = threading.Event(), []

    def predict(texts):
        gate.wait(10)
        calls.append(list(texts))
        return texts

    async def main():
        batcher = Batcher(predict, max_batch_size=4, max_wait_ms=1, pool_batches=3)
        batcher.start()
        first = asyncio.ensure_future(batcher.submit(["a0"]))
        await asyncio.sleep(0.05)  # the first batch (one job) is in the model now
        queued = [asyncio.ensure_future(batcher.submit([f"q{i}", f"r{i}"])) for i in range(8)]
        await asyncio.sleep(0.05)
        gate.set()
        await asyncio.gather(first, *queued)
        started = time.perf_counter()
        await batcher.submit(["late"])  # nothing else waiting: a batch of one, after the 1-ms window
        waited = time.perf_counter() - started
        await batcher.stop()
        return waited

    waited = _run(main())
    assert [len(c) for c in calls] == [1, 12, 4, 1]  # 8 jobs of 2 waiting: 6 (12 texts, the pool) then 2
    assert waited < 1.0


def test_a_failing_batch_is_retried_job_by_job():
    """Whatever makes a model call fail, only the job that caused it fails."""
    from senti.serving.batcher import Batcher

    calls = []

    def predict(texts):
        calls.append(list(texts))
        if "boom" in texts:
            raise RuntimeError("boom")
        return [t.upper() for t in texts]

    async def main():
        batcher = Batcher(predict, max_batch_size=8, max_wait_ms=100)
        batcher.start()
        results = await asyncio.gather(batcher.submit(["a", "b"]), batcher.submit(["boom"]), batcher.submit(["c"]),
                                       return_exceptions=True)
        await batcher.stop()
        return results

    good, failed, other = asyncio.run(main())
    assert good == ["A", "B"] and other == ["C"] and isinstance(failed, RuntimeError)
    assert calls[0] == ["a", "b", "boom", "c"]  # they did share one call first


def test_cancelled_requests_are_dropped_from_the_queue():
    """A job whose client went away never reaches the model."""
    from senti.serving.batcher import Batcher

    release, calls = threading.Event(), []

    def predict(texts):
        calls.append(list(texts))
        release.wait(10)
        return texts

    async def main():
        batcher = Batcher(predict, max_batch_size=1, max_wait_ms=0)
        batcher.start()
        first = asyncio.ensure_future(batcher.submit(["first"]))
        await asyncio.sleep(0.1)  # "first" is in the model
        gone = asyncio.ensure_future(batcher.submit(["gone"]))
        later = asyncio.ensure_future(batcher.submit(["later"]))
        await asyncio.sleep(0.05)
        gone.cancel()
        release.set()
        results = await asyncio.gather(first, later)
        await batcher.stop()
        return results, batcher.pending

    (first, later), pending = asyncio.run(main())
    assert first == ["first"] and later == ["later"] and pending == 0
    assert ["gone"] not in calls


def test_a_native_panic_fails_its_request_and_the_batcher_answers_the_next():
    """`tokenizers` panics (pyo3_runtime.PanicException, a BaseException) on a hostile regex: the batcher caught only
    Exception, died, and no later request was answered."""
    from tokenizers import Regex, Tokenizer, models, normalizers

    hostile = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    hostile.normalizer = normalizers.Replace(Regex("(a+)+$"), "x")

    def predict(texts):
        return [len(e.ids) for e in hostile.encode_batch(texts)]

    async def main():
        batcher = Batcher(predict, max_batch_size=4, max_wait_ms=5)
        batcher.start()
        with pytest.raises(RuntimeError, match="PanicException"):
            await batcher.submit(["a" * 30 + "!"])
        after = await batcher.submit(["ok"])
        await batcher.stop()
        return after

    assert _run(main()) == [1]
