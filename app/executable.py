"""How to start this installation's ``claudeops`` from a subprocess (a CLI
hook, the MCP server), so that it runs the same code against the same
database as the service."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path


def claudeops_command() -> list[str]:
    """The ``claudeops`` beside the running Python (this virtual
    environment's), else the one on PATH, else this Python importing it."""
    beside = Path(sys.executable).with_name("claudeops")
    if beside.exists():
        return [str(beside)]
    found = shutil.which("claudeops")
    if found:
        return [found]
    return [sys.executable, "-c", "import sys; from app.cli import main; sys.exit(main())"]
