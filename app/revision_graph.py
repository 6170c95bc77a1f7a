"""The schema revisions of the host and its plugins, read once at start.

Alembic reads every revision file whenever a command needs the schema's
history, and a plugin's broken one (a ``down_revision`` with a typo, an id
the host's or another plugin's revisions have, a file that does not import)
would otherwise make every command end in a traceback that names neither
the plugin nor the file. Read here, it stops the start with a
``PluginError`` that names both (and so says how to start without it).
"""
from __future__ import annotations

import re
import warnings
from pathlib import Path

from alembic.script import ScriptDirectory
from flask import Flask

from app.plugins import PluginError

# How Alembic warns of two revision files with one id (it keeps one of them).
DUPLICATE_REVISION = re.compile(r"Revision (\S+) is present more than once")
# `revision = "x"` or `revision: str = "x"` in a revision file.
REVISION_ID = re.compile(r"""^revision\s*(?::[^=\n]*)?=\s*["']([^"'\n]+)["']""", re.MULTILINE)
# The graphs read fine so far, by their files and when each was last changed.
_READ: set[tuple] = set()


def check_revision_graph(app: Flask, host_dir: Path, plugin_dirs: list[tuple[str, str]]) -> None:
    """Read the whole graph of revisions (the host's in ``host_dir``, each
    plugin's of ``plugin_dirs``: its name and a directory), or raise a
    ``PluginError`` naming the plugin whose revision breaks it."""
    fingerprint = _fingerprint([host_dir, *(Path(directory) for _, directory in plugin_dirs)])
    if fingerprint in _READ:
        return
    with app.app_context(), warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        try:
            ScriptDirectory.from_config(app.extensions["migrate"].migrate.get_config()).revision_map.heads
        except Exception as exc:
            raise PluginError(_why(exc, host_dir, plugin_dirs)) from None
    for warning in said:
        duplicate = DUPLICATE_REVISION.search(str(warning.message))
        if duplicate:
            raise PluginError(_shared_id(duplicate.group(1), host_dir, plugin_dirs))
        warnings.showwarning(warning.message, warning.category, warning.filename, warning.lineno)
    _READ.add(fingerprint)


def _fingerprint(directories: list[Path]) -> tuple:
    return tuple(sorted((str(path), path.stat().st_mtime_ns)
                        for directory in directories if directory.is_dir() for path in directory.glob("*.py")))


def _why(exc: Exception, host_dir: Path, plugin_dirs: list[tuple[str, str]]) -> str:
    raised_in = _file_of(exc, plugin_dirs)   # a revision file that does not import, or raised
    if raised_in is None and isinstance(exc, KeyError) and exc.args:   # a parent no revision has
        missing = str(exc.args[0])
        for plugin, path in _files_naming(missing, plugin_dirs):
            return (f"plugin {plugin}'s schema revision {path} names a revision {missing!r} that no installed "
                    "revision has (a typo in its down_revision or depends_on?)")
    detail = f"{type(exc).__name__}: {_first_line(exc)}"
    named = [raised_in] if raised_in else _named(str(exc), plugin_dirs)
    if not named:
        return f"the schema revisions cannot be read ({detail})"
    if len(named) > 1:   # a branch name two plugins give: which one took it first is Alembic's order
        files = " and ".join(f"plugin {plugin}'s {path}" for plugin, path in named)
        return f"the schema revisions {files} cannot be read together ({detail})"
    (plugin, path), = named
    why = f"plugin {plugin}'s schema revision {path} cannot be read with the rest ({detail})"
    clash = [revision for revision in REVISION_ID.findall(_text(path)) if _files_with_id(revision, host_dir)]
    if clash:
        why += f": its id {clash[0]} is one of the host's; revision ids are one namespace, give yours a prefix of your own"
    return why


def _named(message: str, plugin_dirs: list[tuple[str, str]]) -> list[tuple[str, Path]]:
    """The plugins' revision files an error's message names, by revision id
    ("Branch name 'x' in revision backups_0001 already used by revision
    incidents_0001") or by file name ("Could not determine revision id from
    filename helpers.py"), in the order it names them."""
    files = [(plugin, path, set(REVISION_ID.findall(_text(path))))
             for plugin, directory in plugin_dirs for path in sorted(Path(directory).glob("*.py"))]
    named: list[tuple[str, Path]] = []
    for word in (word.rstrip(".") for word in re.findall(r"[\w.@-]+", message)):   # not a sentence's full stop
        named += [(plugin, path) for plugin, path, ids in files
                  if (word == path.name or word in ids) and (plugin, path) not in named]
    return named


def _first_line(exc: Exception) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else ""


def _shared_id(revision: str, host_dir: Path, plugin_dirs: list[tuple[str, str]]) -> str:
    holders = [f"the host's {path}" for path in _files_with_id(revision, host_dir)]
    holders += [f"plugin {plugin}'s {path}" for plugin, directory in sorted(plugin_dirs)
                for path in _files_with_id(revision, Path(directory))]
    return (f"two schema revisions have the id {revision} ({'; '.join(holders) or 'files not found'}), and "
            "Alembic would keep only one of them: revision ids are one namespace, give each plugin's its own prefix")


def _files_naming(revision: str, plugin_dirs: list[tuple[str, str]]):
    """The plugins' revision files that hold ``revision`` as a quoted word."""
    quoted = re.compile(rf"""["']{re.escape(revision)}["']""")
    for plugin, directory in plugin_dirs:
        for path in sorted(Path(directory).glob("*.py")):
            if quoted.search(_text(path)):
                yield plugin, path


def _files_with_id(revision: str, directory: Path) -> list[Path]:
    return [path for path in sorted(directory.glob("*.py")) if revision in REVISION_ID.findall(_text(path))]


def _file_of(exc: BaseException, plugin_dirs: list[tuple[str, str]]) -> tuple[str, Path] | None:
    """The plugin's revision file the error arose in (a syntax error, an
    import that fails), from the error or its traceback."""
    places = [getattr(exc, "filename", None) or ""]
    traceback = exc.__traceback__
    while traceback is not None:
        places.append(traceback.tb_frame.f_code.co_filename)
        traceback = traceback.tb_next
    for plugin, directory in plugin_dirs:
        for place in places:
            if place and Path(place).parent == Path(directory):
                return plugin, Path(place)
    return None


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
