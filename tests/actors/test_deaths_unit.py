"""The pool's death book: a call sent after its worker was known dead never ran."""

from __future__ import annotations

from toolray_actors.execution._deaths import CLOCK_SKEW_S, DeathBook, SentAt


def test_a_send_after_the_death_was_recorded_never_ran_one_before_may_have() -> None:
    book = DeathBook("node-a")
    before = SentAt.now("node-a")
    book.record("w1")
    after = SentAt.now("node-a")
    assert book.before("w1", after)
    assert not book.before("w1", before)
    assert not book.before("w2", after)  # not known dead: it may have run


def test_the_first_record_counts() -> None:
    book = DeathBook("node-a")
    book.record("w1")
    between = SentAt.now("node-a")
    book.record("w1")  # a later report of the same death
    assert book.before("w1", between)


def test_across_nodes_only_a_death_older_than_the_clock_skew_counts() -> None:
    book = DeathBook("node-a")
    book.record("w1")
    learned = SentAt.now("node-b")
    assert not book.before("w1", SentAt("node-b", 0.0, learned.wall))  # clocks may differ
    assert not book.before("w1", SentAt("node-b", 0.0, learned.wall + CLOCK_SKEW_S / 2))
    assert book.before("w1", SentAt("node-b", 0.0, learned.wall + CLOCK_SKEW_S + 0.5))


def test_the_book_keeps_the_latest_deaths_only() -> None:
    book = DeathBook("node-a", keep=2)
    for wid in ("w1", "w2", "w3"):
        book.record(wid)
    after = SentAt.now("node-a")
    assert "w1" not in book
    assert not book.before("w1", after)  # forgotten: the safe answer
    assert book.before("w3", after)
