"""Which results directory holds a session's run logs.

Every results directory is named by an id kept in it, written with its first
run log; a session records the id of the one its run log went to. With one
PostgreSQL database behind several hosts, only the scheduler's host holds
the run logs: retention run on another host (``claudeops prune``) leaves
such a session whole to the scheduler's, instead of finding no file, taking
the logs for gone and marking them removed, which would leave the files
for ever. A session from before the id was recorded has none, and is pruned
wherever retention runs, as before.
"""
from __future__ import annotations

import logging
import uuid
from pathlib import Path
from typing import Optional

from app.state_files import created_once, read_kept

log = logging.getLogger(__name__)

ID_FILE = ".claudeops-results-id"


def results_dir_id(results_dir: Path) -> Optional[str]:
    """The directory's id, made now if it has none; None if it cannot be
    written (the session's run log cannot be either, and says so). The
    directory is made first: removed while the service runs, it is made
    again for the run log, which would otherwise be a run log of no id."""
    try:
        results_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        return created_once(results_dir / ID_FILE, lambda: uuid.uuid4().hex)
    except OSError as exc:
        log.warning("cannot record the id of the results directory %s (%s)", results_dir, exc.strerror or exc)
        return None


def existing_id(results_dir: Path) -> Optional[str]:
    """The directory's id if it has one: one that never held a run log has
    none. ``NotText``, an ``OSError``, if the file holds no text (the agent,
    as the service's user, could have written it)."""
    return read_kept(results_dir / ID_FILE) or None


def held_elsewhere(recorded_id: Optional[str], results_dir: Path) -> bool:
    """Whether a run log recorded in the directory with id ``recorded_id``
    is in another host's results directory, not in ``results_dir``: its path
    means nothing here. A session from before ids were recorded, or a
    directory this host cannot read, is not said to be elsewhere."""
    if not recorded_id:
        return False
    try:
        return recorded_id != existing_id(results_dir)
    except OSError:
        return False
