"""The small files written once into the state directory (the cookie key, a
results directory's id): every process reads the same text, and no file is
ever read as empty."""
from __future__ import annotations

import multiprocessing
import secrets
import stat

from app.state_files import created_once


def test_the_first_call_writes_the_file_for_its_owner_only_and_later_ones_read_it(tmp_path):
    path = tmp_path / "secret_key"
    first = created_once(path, lambda: "one")
    again = created_once(path, lambda: "two")
    assert (first, again, path.read_text()) == ("one", "one", "one")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["secret_key"]   # no draft left behind


def test_an_empty_file_left_by_a_power_cut_is_written_again(tmp_path):
    """Read as it was, an empty cookie key would sign nothing: no login could work."""
    path = tmp_path / "secret_key"
    path.write_text("")
    assert created_once(path, lambda: "fresh") == "fresh"
    assert path.read_text() == "fresh"


def _created(path, barrier, answers):
    barrier.wait()
    answers.put(created_once(path, lambda: secrets.token_hex(8)))


def test_processes_starting_together_all_read_the_same_text(tmp_path):
    """Gunicorn's workers start at once; each must sign cookies with the one
    key, or a login made by one would be refused by the next."""
    for start in ("missing", "empty"):
        path = tmp_path / start / "secret_key"
        path.parent.mkdir()
        if start == "empty":
            path.write_text("\n")
        context = multiprocessing.get_context("fork")
        barrier, answers = context.Barrier(6), context.Queue()
        workers = [context.Process(target=_created, args=(path, barrier, answers)) for _ in range(6)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(30)
        texts = {answers.get(timeout=5) for _ in workers}
        assert len(texts) == 1 and texts == {path.read_text()}, start
        assert all(worker.exitcode == 0 for worker in workers)
