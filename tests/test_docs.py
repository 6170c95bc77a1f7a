"""The README and --help texts stay true to the code."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from app.config import PROJECT_ROOT, SETTINGS, ConfigError, Setting, load_settings
from app.plugins import BUILTIN_PLUGINS, HOST_PLUGINS, call_at_startup

README = (PROJECT_ROOT / "README.md").read_text()


def test_readme_configuration_table_matches_the_settings(app):
    """The host's settings and those the built-in plugins declare, in the
    order the service lists them. A package installed beside the service
    (docs/plugins.md has its author run this suite) adds settings of its own
    to the list; they are not the README's to describe."""
    settings = app.extensions["claudeops.settings"]
    assert settings[:len(SETTINGS)] == SETTINGS
    pm = app.extensions["claudeops.plugins"]
    installed = {pm.get_name(plugin) for plugin, _ in pm.list_plugin_distinfo()}   # none in the service's own
    declared = call_at_startup(pm, "claudeops_settings", Setting)
    assert {plugin for plugin, _ in declared} <= set(HOST_PLUGINS + BUILTIN_PLUGINS) | installed
    theirs = [setting for plugin, setting in declared if plugin in installed]
    builtin = SETTINGS + tuple(setting for plugin, setting in declared if plugin not in installed)
    # The service lists each of them once: the built-ins' in this order, an
    # installed package's (well-formed, named apart) wherever it puts them.
    assert len(settings) == len(builtin) + len(theirs) and all(setting in settings for setting in theirs)
    assert tuple(setting for setting in settings if setting not in theirs) == builtin
    for setting in theirs:
        assert re.fullmatch(r"CLAUDEOPS_\w+", setting.name) and isinstance(setting.default, str), setting
        assert setting.help.strip() and setting.name not in {s.name for s in builtin}, setting
    rows = re.findall(r"^\| `(CLAUDEOPS_\w+)` \| (.+?) \| (.+?) \|$", README, re.M)
    assert [name for name, _, _ in rows] == [s.name for s in builtin]
    for (name, default, meaning), setting in zip(rows, builtin):
        expected = f"`{setting.default.replace(str(PROJECT_ROOT), '<checkout>')}`" if setting.default else "(empty)"
        assert default == expected, name
        assert meaning == setting.help, name


def test_readme_commands_exist_and_ci_runs_the_test_command():
    commands = re.search(r"## The two commands.*?```sh\n(.*?)```", README, re.S).group(1)
    serve, test = [line.split()[0] for line in commands.strip().splitlines()]
    assert (serve, test) == ("bin/serve", "bin/test")
    for script in (serve, test):
        assert (PROJECT_ROOT / script).stat().st_mode & 0o111
    # CI runs the whole suite on both backends, and neither run's failure is lost.
    ci = (PROJECT_ROOT / ".ci" / "run").read_text()
    assert re.search(r"^bin/test \|\| status=1$", ci, re.M) and re.search(r"^bin/test --postgres \|\| status=1$", ci, re.M)
    assert re.search(r'^exit "\$status"$', ci, re.M) and "bin/test --postgres" in commands


def test_readme_command_table_matches_the_cli():
    claudeops = Path(sys.executable).with_name("claudeops")
    help_text = subprocess.run([str(claudeops), "--help"], capture_output=True, text=True, check=True).stdout
    listed = set(re.findall(r"^\| `claudeops ([\w-]+)", README, re.M))
    offered = set(re.findall(r"^  ([\w-]+)\s", help_text.split("Commands:")[1], re.M))
    assert listed == offered
    serve_help = subprocess.run([str(claudeops), "serve", "--help"], capture_output=True, text=True, check=True).stdout
    for option, default in (("--host", "127.0.0.1"), ("--port", "8080"), ("--workers", "2")):
        assert option in serve_help and f"[{option} {default}]" in README


def test_invalid_setting_names_the_variable():
    with pytest.raises(ConfigError, match="CLAUDEOPS_INTERVAL='soon'"):
        load_settings(environ={"CLAUDEOPS_INTERVAL": "soon"})
    with pytest.raises(ConfigError, match="CLAUDEOPS_SESSION_TIMEOUT='0': must be from 1 to 2147483647"):
        load_settings(environ={"CLAUDEOPS_SESSION_TIMEOUT": "0"})
    for hours in ("9000", "0", "99999999999999999999"):   # the bound said is the setting's own
        with pytest.raises(ConfigError, match=f"CLAUDEOPS_LOGIN_HOURS='{hours}': must be from 1 to 8784 "):
            load_settings(environ={"CLAUDEOPS_LOGIN_HOURS": hours})
    # Below the CLI's own lines, every line would be skipped, its result line too.
    with pytest.raises(ConfigError, match="CLAUDEOPS_MAX_LINE_BYTES='10': must be from 65536 \\(64 KiB\\) to "):
        load_settings(environ={"CLAUDEOPS_MAX_LINE_BYTES": "10"})
    assert load_settings(environ={"CLAUDEOPS_MAX_LINE_BYTES": "65536"})["CLAUDEOPS_MAX_LINE_BYTES"] == 65536
    with pytest.raises(ConfigError, match="CLAUDEOPS_LOG_LEVEL='verbose': must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL"):
        load_settings(environ={"CLAUDEOPS_LOG_LEVEL": "verbose"})
    assert load_settings(environ={"CLAUDEOPS_LOG_LEVEL": " debug "})["CLAUDEOPS_LOG_LEVEL"] == "DEBUG"
    claudeops = Path(sys.executable).with_name("claudeops")
    result = subprocess.run([str(claudeops), "config"], capture_output=True, text=True,
                            env=dict(os.environ, CLAUDEOPS_INTERVAL="soon"))
    assert result.returncode == 78   # EX_CONFIG: an init system does not start it again
    assert result.stderr.strip() == "Error: invalid configuration: CLAUDEOPS_INTERVAL='soon': must be a whole number"
    assert load_settings(environ={"CLAUDEOPS_TIER1_ALLOWED_TOOLS": " Bash , Read ,"})["CLAUDEOPS_TIER1_ALLOWED_TOOLS"] == ["Bash", "Read"]


@pytest.mark.parametrize("name, unset", [
    ("CLAUDEOPS_STATE_DIR", "`state` in the service's own directory"),   # else the working directory
    ("CLAUDEOPS_CLAUDE_BIN", "`claude` on `PATH`"),
    ("CLAUDEOPS_PROMPTS_DIR", "the service's own `prompts`"),
    ("CLAUDEOPS_REDACT_ENV", "the default list"),   # else no secret variable redacted by value
])
def test_an_empty_value_that_would_not_mean_the_default_is_refused(name, unset):
    """An environment file's ``NAME=`` line reads as unset to its writer."""
    for empty in ("", "  "):
        with pytest.raises(ConfigError, match=re.escape(f"{name}={empty!r}: must not be empty; leave it unset for {unset}")):
            load_settings(environ={name: empty})


def test_a_redaction_list_beginning_with_a_plus_adds_to_the_default():
    from app.config import REDACT_ENV_DEFAULT
    default = REDACT_ENV_DEFAULT.split(",")
    assert load_settings(environ={})["CLAUDEOPS_REDACT_ENV"] == default
    assert load_settings(environ={"CLAUDEOPS_REDACT_ENV": " +MY_DB_PASS, BACKUP_*"})["CLAUDEOPS_REDACT_ENV"] == (
        default + ["MY_DB_PASS", "BACKUP_*"])
    assert load_settings(environ={"CLAUDEOPS_REDACT_ENV": "MY_DB_PASS"})["CLAUDEOPS_REDACT_ENV"] == ["MY_DB_PASS"]
    with pytest.raises(ConfigError, match="'MY-PASS' is not a variable name"):
        load_settings(environ={"CLAUDEOPS_REDACT_ENV": "+MY-PASS"})


def test_the_wait_for_a_database_server_that_went_away_is_the_one_the_docs_state():
    from app import dbfaults
    wait = f"{dbfaults.OUTAGE_SECONDS:g} s"
    readme = " ".join(README.split())
    guide = " ".join((PROJECT_ROOT / "docs" / "plugins.md").read_text().split())
    assert f"the session waits for it (up to {wait})" in readme and f"past {wait} it ends as `failed`" in readme
    assert f"the database is still unreachable after {wait}" in readme
    assert f"is waited for instead, up to {wait}" in guide
    assert f"or in steps 7 and 8, is waited for too (up to {wait})" in readme
    assert f"goes away in steps 2 and 3 is waited for (up to {wait})" in readme


def test_the_request_body_limit_is_the_one_the_readme_states():
    from app.web import MAX_REQUEST_BYTES
    readme = " ".join(README.split())
    assert f"A request body over {MAX_REQUEST_BYTES // (1024 * 1024)} MiB, on the API or a dashboard form, is a 413" \
        in readme
