"""Small files the service writes once into a directory of its own and reads
ever after (the cookie key, a results directory's id)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable


def created_once(path: Path, content: Callable[[], str]) -> str:
    """The text of ``path``, written first from ``content()`` if there is no
    such file (readable by the service's user only). Written aside, then
    linked into place: a process racing this one reads either no file or a
    complete one, and the first link wins."""
    if not path.exists():
        draft = path.with_name(f".{path.name}.{os.getpid()}")
        fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(content())
        try:
            os.link(draft, path)
        except FileExistsError:
            pass
        finally:
            draft.unlink()
    return path.read_text().strip()
