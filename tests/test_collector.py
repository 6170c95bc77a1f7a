"""The garbage collector kept to a session's own objects while its stream is read."""
from __future__ import annotations

import gc
import weakref

import pytest

from app.sessions import manager
from app.sessions.activity import StreamHandler
from app.sessions.collector import YOUNG_THRESHOLD, earlier_objects_set_apart
from tests import streamlines as sl


@pytest.fixture(autouse=True)
def nothing_frozen_before_or_after():
    gc.unfreeze()
    yield
    assert gc.get_freeze_count() == 0, "a test left objects set apart from the collector"


def tracked(value) -> bool:
    """Whether a collection would go through ``value`` (set apart, it is in none of the generations)."""
    return any(found is value for found in gc.get_objects())


def test_what_the_process_held_before_is_set_apart_and_handed_back_after():
    kept = [object()]
    with earlier_objects_set_apart():
        assert not tracked(kept)
        made_during = [object()]
        assert tracked(made_during)
    assert tracked(kept)


class Cycle:
    pass


def test_garbage_held_before_is_collected_once_handed_back():
    cycle = Cycle()
    cycle.me = cycle
    gone = weakref.ref(cycle)
    del cycle
    with earlier_objects_set_apart():
        gc.collect()
        assert gone() is not None
    gc.collect()
    assert gone() is None


def test_garbage_made_while_set_apart_is_collected_then():
    with earlier_objects_set_apart():
        cycle = Cycle()
        cycle.me = cycle
        gone = weakref.ref(cycle)
        del cycle
        gc.collect()
        assert gone() is None


def test_only_the_last_of_overlapping_streams_hands_the_objects_back():
    with earlier_objects_set_apart():
        with earlier_objects_set_apart():
            pass
        assert gc.get_freeze_count() > 0
    assert gc.get_freeze_count() == 0


def test_a_stream_that_raises_still_hands_the_objects_back():
    with pytest.raises(RuntimeError):
        with earlier_objects_set_apart():
            raise RuntimeError("the stream broke off")
    assert gc.get_freeze_count() == 0


def test_a_session_reads_its_stream_with_the_earlier_objects_set_apart(app, fake_cli, run_session_now, monkeypatch):
    frozen_while_reading = []

    class Watched(StreamHandler):
        def handle_line(self, line):
            frozen_while_reading.append(gc.get_freeze_count())
            super().handle_line(line)

    monkeypatch.setattr(manager, "StreamHandler", Watched)
    fake_cli(sl.steps(sl.init(), sl.text("[EVENT:info:jellyfin] Up"), sl.result("Up")))
    session = run_session_now()
    assert session.status == "completed", session.status_reason
    assert len(frozen_while_reading) == 3 and all(count > 0 for count in frozen_while_reading)
    assert gc.get_freeze_count() == 0


def test_the_youngest_generation_is_collected_less_often_meanwhile_and_as_before_after():
    before = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)
        with earlier_objects_set_apart():
            assert gc.get_threshold() == (YOUNG_THRESHOLD, 10, 10)
            with earlier_objects_set_apart():
                pass
            assert gc.get_threshold() == (YOUNG_THRESHOLD, 10, 10)
        assert gc.get_threshold() == (700, 10, 10)
        gc.set_threshold(0)   # collection turned off: left off
        with earlier_objects_set_apart():
            assert gc.get_threshold()[0] == 0
        assert gc.get_threshold()[0] == 0
    finally:
        gc.set_threshold(*before)
