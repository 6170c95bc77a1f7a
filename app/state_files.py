"""Small files the service writes once into a directory of its own and reads
ever after (the cookie key, a results directory's id)."""
from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path
from typing import Callable


def created_once(path: Path, content: Callable[[], str]) -> str:
    """The text of ``path``, written first from ``content()`` if there is no
    such file, or only an empty one (readable by the service's user only).

    The service's processes (gunicorn's workers, the CLI) may all start at
    once, and must all read the same text: the first to find no file writes
    it while holding a lock on the directory, and the others wait for it.
    The text is on disk before the file takes its name, so a power cut
    leaves no file or a whole one; an empty one, from a file system that
    still lost it, is written again rather than read as a key of nothing."""
    text = read_kept(path)
    if text:
        return text
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        fcntl.flock(directory, fcntl.LOCK_EX)
        text = read_kept(path)   # written by another process while this one waited
        if not text:
            text = content()
            _write_durably(path, text, directory)
        return text
    finally:
        os.close(directory)   # and with it the lock


class NotText(OSError):
    """A file the service wrote as text holds something else (damaged, or replaced)."""


def read_kept(path: Path) -> str:
    """The text of a file written by ``created_once``, "" if there is none;
    ``NotText`` if it holds something else."""
    try:
        return path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return ""
    except UnicodeDecodeError:
        raise NotText(errno.EINVAL, "it is not UTF-8 text (remove it to have a new one made)", str(path)) from None


def _write_durably(path: Path, text: str, directory: int) -> None:
    draft = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(draft, path)
    except BaseException:
        draft.unlink(missing_ok=True)
        raise
    os.fsync(directory)   # the new name too
