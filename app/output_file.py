"""A file a command writes for the operator (``claudeops memories export
-o FILE``). Written aside and renamed into place, so that a failure (a full
disk) leaves what was at the name before, and never half a file that would
pass for an export of fewer memories; an existing file is replaced only when
asked; the database and the files SQLite keeps beside it never, nor any
file in the state directory itself (the cookie's key, a lock, a copy kept
before a restore) or in the results directory (run logs). A name that is
not a regular file (``/dev/stdout``, a pipe) is written as it is."""
from __future__ import annotations

import os
from pathlib import Path

from flask import current_app

from app.backup import database_files, link_into_place
from app.extensions import db


class OutputRefused(Exception):
    """The file is not written; the message says why and what to do."""


def write_text(path: Path, text: str, replace: bool = False) -> None:
    """``text`` into ``path``; ``OutputRefused``, or the ``OSError`` of the write."""
    if path.exists() and not path.is_file():
        with path.open("w", encoding="utf-8") as stream:
            stream.write(text)
        return
    target = path.expanduser().resolve()
    if target in database_files(db.engine):
        raise OutputRefused(f"{path} is the service's database or a file SQLite keeps beside it: name another file")
    if target.exists() and _services_own(target):
        raise OutputRefused(f"{path} is in the service's state directory (beside its database, cookie key and "
                            "locks) or its results directory, where no file is replaced: write it elsewhere")
    if target.exists() and not replace:
        raise OutputRefused(f"{path} already exists: name a new file, or pass --force to replace it")
    partial = target.with_name(f".{target.name}.partial-{os.getpid()}")
    try:
        # The owner's alone, whatever the umask (a root shell's 022): it holds what the agent learned.
        with os.fdopen(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w", encoding="utf-8") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        if replace:
            os.replace(partial, target)
        elif not link_into_place(partial, target):
            raise OutputRefused(f"{path} was made while this was written: name a new file, or pass --force")
    finally:
        partial.unlink(missing_ok=True)


def _services_own(target: Path) -> bool:
    state, results = (Path(current_app.config[name]).expanduser().resolve()
                      for name in ("CLAUDEOPS_STATE_DIR", "CLAUDEOPS_RESULTS_DIR"))
    return target.parent == state or target.is_relative_to(results)
