"""examples/systemd/claudeops.service: valid for systemd, and true to the
service it starts (its settings exist, its command and options do, and it
gives a shutdown the time the service takes)."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from app.cli import EX_CONFIG, main
from app.config import PROJECT_ROOT
from app.serve import GUNICORN_STOP_SECONDS
from app.sessions.manager import SHUTDOWN_GRACE_SECONDS
from app.sessions.runner import KILL_GRACE_SECONDS

UNIT = PROJECT_ROOT / "examples" / "systemd" / "claudeops.service"
INSTALLED_AT = "/opt/claude-ops"


def directives() -> dict[str, list[str]]:
    """Each key of the unit with its values, in order (systemd allows a key more than once)."""
    found: dict[str, list[str]] = {}
    for line in UNIT.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith(("#", "[")):
            key, _, value = line.partition("=")
            found.setdefault(key.strip(), []).append(value.strip())
    return found


def test_systemd_finds_nothing_wrong_with_the_unit(tmp_path):
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed")
    # As installed: the checkout where the unit says, with its .venv.
    unit = tmp_path / "claudeops.service"
    unit.write_text(UNIT.read_text().replace(INSTALLED_AT, str(PROJECT_ROOT)))
    checked = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0 and not checked.stderr.strip(), checked.stderr


def test_the_unit_starts_claudeops_serve_with_options_it_has(app):
    [command] = directives()["ExecStart"]
    program, subcommand, *options = command.split()
    assert program == f"{INSTALLED_AT}/.venv/bin/claudeops" and subcommand == "serve"
    serve = main.get_command(None, "serve")
    known = {name for param in serve.params for name in param.opts}
    assert {option for option in options if option.startswith("--")} <= known
    assert directives()["WorkingDirectory"] == [INSTALLED_AT]


def test_the_units_settings_are_settings_of_the_service(app):
    declared = {setting.name for setting in app.extensions["claudeops.settings"]}
    named = [value.partition("=")[0] for value in directives()["Environment"]]
    assert named and set(named) <= declared
    named_in_comments = set(re.findall(r"\bCLAUDEOPS_[A-Z_]+", UNIT.read_text()))
    assert named_in_comments <= declared
    assert directives()["StateDirectory"] == ["claudeops"]
    assert "CLAUDEOPS_STATE_DIR=/var/lib/claudeops" in directives()["Environment"]


def test_the_unit_gives_a_shutdown_the_time_the_service_takes():
    """SIGTERM to the whole group: a session ends as stopped (its CLI given
    its grace, then killed), then gunicorn; systemd must not kill first."""
    assert directives()["KillMode"] == ["control-group"]
    [timeout] = directives()["TimeoutStopSec"]
    needed = SHUTDOWN_GRACE_SECONDS + KILL_GRACE_SECONDS + GUNICORN_STOP_SECONDS
    assert int(timeout) >= needed + 10


def test_the_readme_installs_the_unit_it_names():
    readme = (PROJECT_ROOT / "README.md").read_text()
    section = readme[readme.index("## Running under systemd"):readme.index("## Retention and disk use")]
    assert "examples/systemd/claudeops.service" in section and INSTALLED_AT in section
    assert Path(UNIT).is_file()



def test_the_readmes_upgrade_takes_over_what_changed_in_the_unit():
    """A pull changes the checkout's unit, not the copy systemd runs: the
    upgrade compares them and reloads, or a unit from before
    RestartPreventExitStatus restarts a refused start every RestartSec."""
    readme = (PROJECT_ROOT / "README.md").read_text()
    section = readme[readme.index("To upgrade, take a backup"):readme.index("To go back, check out")]
    steps = section[section.index("```sh"):section.index("```", section.index("```sh") + 5)]
    assert f"diff /etc/systemd/system/{UNIT.name} {INSTALLED_AT}/{UNIT.relative_to(PROJECT_ROOT)}" in steps
    assert steps.index("diff ") < steps.index("systemctl daemon-reload") < steps.index("systemctl restart")

@pytest.mark.parametrize("options", [["--port", "99999"], ["--host", "0.0.0.0:8080"], ["--hots", "::1"]])
def test_a_start_refused_for_its_settings_or_options_is_not_retried(tmp_path, monkeypatch, options):
    """Restart=on-failure would otherwise start a unit whose ExecStart has a
    bad option again every RestartSec, forever, with the same error."""
    [statuses] = directives()["RestartPreventExitStatus"]
    kept_down = {int(status) for status in statuses.split()}
    assert EX_CONFIG in kept_down
    monkeypatch.setenv("CLAUDEOPS_STATE_DIR", str(tmp_path / "state"))
    refused = CliRunner().invoke(main, ["serve", *options])
    assert refused.exit_code != 0 and refused.exit_code in kept_down, refused.output
