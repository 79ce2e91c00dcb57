"""An executor's reservations (``toolray_actors.execution._reservations``), unit by unit."""

from __future__ import annotations

from toolray import AbortController
from toolray_actors.execution._reservations import Reservations


def test_a_reservation_holds_a_controller_until_its_batch_starts() -> None:
    book = Reservations({})
    book.reserve(["a", "b"], now=10.0)
    assert set(book.batches) == {"a", "b"}
    assert len(book) == 2
    book.batches["a"].abort("early")  # an abort that came before its batch is kept
    claimed = book.claim("a")
    assert len(book) == 1
    assert claimed is book.batches["a"]
    assert claimed.signal.aborted
    assert book.drop_expired(now=10.0 + 5.0, ttl_s=5.0) == ["b"]  # never came
    assert set(book.batches) == {"a"}
    assert len(book) == 0


def test_only_reservations_past_the_ttl_go_and_a_second_reserve_keeps_the_first_time() -> None:
    running = AbortController()
    book = Reservations({"running": running})
    book.reserve(["old"], now=0.0)
    book.reserve(["old", "new"], now=4.0)
    assert book.drop_expired(now=5.0, ttl_s=5.0) == ["old"]
    assert book.drop_expired(now=8.9, ttl_s=5.0) == []
    assert set(book.batches) == {"running", "new"}
    assert book.batches["running"] is running
    assert book.claim("running") is running  # a batch that was never reserved keeps its own
    assert book.claim("unknown") is book.batches["unknown"]
