"""``python -m app``: the ``claudeops`` command, where its script is not on the PATH."""
from app.cli import main

main(prog_name="claudeops")
