"""Configuration: defaults, overridden by ``CLAUDEOPS_*`` environment variables.

Every setting is declared once in ``SETTINGS`` so that parsing, validation, the
README's configuration table (a test compares them) and ``claudeops config`` all
agree on names, defaults and meaning.
"""
from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from app.plain_numbers import decimal_number, whole_number

PROJECT_ROOT = Path(__file__).resolve().parent.parent


class ConfigError(ValueError):
    """A setting has a value the service cannot run with."""


def _int(raw: str) -> int:
    """A whole-number setting: spaces around it are an environment file's
    habit; "1_0" and other scripts' digits are refused (see plain_numbers)."""
    return whole_number(raw.strip())


# The longest interval the scheduler can arm (a date beyond it is a wait of
# no use, and a far larger one overflows the date arithmetic).
MAX_INTERVAL = 366 * 24 * 3600


def _interval(raw: str) -> int:
    value = _int(raw)
    if value < 0:
        raise ValueError("must be 0 or more")
    if value > MAX_INTERVAL:
        raise ValueError(f"must be at most {MAX_INTERVAL} (366 days)")
    return value


# A thousand dollars a session, ten thousand a day: beyond that a limit is
# no limit, and a larger number is more likely a mistyped one.
MAX_SESSION_COST_USD = 1000
MAX_DAILY_COST_USD = 10_000


def _cost_limit(most: int) -> Callable[[str], float]:
    """A parser of US dollars to the cent, from 0 (no limit) to ``most``."""
    def parse(raw: str) -> float:
        try:
            asked = decimal_number(raw.strip())
        except ValueError:
            raise ValueError("must be a number of US dollars (0 for no limit)") from None
        if not math.isfinite(asked) or not 0 <= asked <= most:
            raise ValueError(f"must be from 0 (no limit) to {most}")
        value = round(asked, 2) + 0.0   # "-0" is no limit as 0 is, and is shown so, not as -0.0
        if value == 0 and asked != 0:
            raise ValueError("must be at least 0.01 (a cent), or 0 for no limit")
        return value
    return parse


def _proxy_count(raw: str) -> int:
    value = _int(raw)
    if not 0 <= value <= 10:
        raise ValueError("must be from 0 to 10 (the proxies in front of the service)")
    return value


# The largest whole-number setting: within a 32-bit INTEGER column, and far
# beyond any count, size or limit this service keeps (a larger one would only
# overflow the arithmetic or the database driver where it is used).
MAX_POSITIVE_INT = 2**31 - 1
# A day more than a year: a longer login would be a login that never ends.
MAX_LOGIN_HOURS = 366 * 24


def positive_int(raw: str) -> int:
    value = _int(raw)
    if not 0 < value <= MAX_POSITIVE_INT:
        raise ValueError(f"must be from 1 to {MAX_POSITIVE_INT}")
    return value


# The shortest longest line: the CLI's own lines (its init line lists every
# tool and MCP server) run to several KiB, and a limit below them would skip
# every line, the result line too.
LEAST_MAX_LINE_BYTES = 64 * 1024


def _max_line_bytes(raw: str) -> int:
    value = _int(raw)
    if not LEAST_MAX_LINE_BYTES <= value <= MAX_POSITIVE_INT:
        raise ValueError(f"must be from {LEAST_MAX_LINE_BYTES} (64 KiB) to {MAX_POSITIVE_INT}")
    return value


# The schema (for the settings API's OpenAPI document) of what positive_int takes.
POSITIVE_INT_SCHEMA = {"type": "integer", "minimum": 1, "maximum": MAX_POSITIVE_INT}


# A retention period past which "keep forever" (0) is the honest setting; the
# bound also keeps the cutoff's date arithmetic far from overflowing.
MAX_RETENTION_DAYS = 36500


def retention_days(raw: str) -> int:
    """Days to keep something; 0 keeps it forever."""
    value = _int(raw)
    if not 0 <= value <= MAX_RETENTION_DAYS:
        raise ValueError(f"must be from 0 (keep forever) to {MAX_RETENTION_DAYS}")
    return value


# The schema (for the settings API's OpenAPI document) of what retention_days takes.
RETENTION_DAYS_SCHEMA = {"type": "integer", "minimum": 0, "maximum": MAX_RETENTION_DAYS}


def _login_hours(raw: str) -> int:
    value = _int(raw)
    if not 0 < value <= MAX_LOGIN_HOURS:
        raise ValueError(f"must be from 1 to {MAX_LOGIN_HOURS} (366 days)")
    return value


# Two years: what browsers' preload lists ask for, and past any use.
MAX_HSTS_SECONDS = 2 * 365 * 24 * 3600


def _hsts_seconds(raw: str) -> int:
    value = _int(raw)
    if not 0 <= value <= MAX_HSTS_SECONDS:
        raise ValueError(f"must be from 0 (not sent) to {MAX_HSTS_SECONDS} (two years)")
    return value


def _not_empty(parse: Callable[[str], Any], default_is: str) -> Callable[[str], Any]:
    """``parse`` for a setting that an empty value would turn into something
    else than its default: the working directory for a path, nothing at all
    for a list of secrets. An environment file's ``NAME=`` line, meant to
    leave it unset, is refused instead, saying what unset means."""
    def checked(raw: str) -> Any:
        if not raw.strip():
            raise ValueError(f"must not be empty; leave it unset for {default_is}")
        return parse(raw)
    return checked


def _credential(least: int) -> Callable[[str], str]:
    """A password or token: empty leaves it unset. One that begins or ends
    with whitespace (a stray space in an environment file, or nothing but
    spaces) is refused rather than taken for one nobody can type, as is one
    short enough to guess within the login limit, or one whose bytes are
    not UTF-8 (Python holds them as surrogate escapes, which no browser or
    script can send back: every login would fail on encoding it)."""
    def checked(raw: str) -> str:
        try:
            raw.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError("is not valid UTF-8; write it in UTF-8, or leave the variable unset") from None
        if raw and raw != raw.strip():
            raise ValueError("begins or ends with whitespace (a stray space in an environment file?); "
                             "remove it, or leave the variable unset")
        if raw and len(raw) < least:
            raise ValueError(f"is {len(raw)} characters long; use at least {least}")
        return raw
    return checked


def _path(raw: str) -> str:
    return str(Path(raw).expanduser().resolve())


def _path_or_derived(raw: str) -> str:
    """A directory whose empty value is derived from the state directory: one
    set is taken from the working directory at once, as the state directory
    is, so that every process (and every command run later, from anywhere)
    means the same one; sessions record the run logs' paths."""
    return _path(raw) if raw else ""


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def _log_level(raw: str) -> str:
    level = raw.strip().upper()
    if level not in LOG_LEVELS:
        raise ValueError(f"must be one of {', '.join(LOG_LEVELS)}")
    return level


def _model(raw: str) -> str:
    value = raw.strip()
    if not value or len(value) > 100 or any(c.isspace() for c in value):
        raise ValueError("must be a model name or alias, without spaces")
    # A zero-width space pasted with the name, or a direction control: the page
    # shows "haiku", and every session fails on a model no one has.
    unseen = next((c for c in value if not c.isprintable()), None)
    if unseen is not None:
        raise ValueError(f"must be a model name or alias, without invisible characters (it holds U+{ord(unseen):04X})")
    if value.startswith("-"):   # the CLI would read it as one of its options (--dangerously-…)
        raise ValueError("must be a model name or alias, not an option: no model name begins with -")
    return value


def _tool_list(raw: str) -> list[str]:
    return [item.strip() for item in raw.split(",") if item.strip()]


REDACT_ENV_DEFAULT = ("ANTHROPIC_API_KEY,ANTHROPIC_AUTH_TOKEN,CLAUDE_CODE_OAUTH_TOKEN,*_TOKEN,*_SECRET,*_SECRET_KEY,"
                      "*_PASSWORD,*_PASSWD,*_PASS,*_PASSPHRASE,PGPASSWORD,*_API_KEY,*_ACCESS_KEY,*_PRIVATE_KEY,*_CREDENTIALS")
ENV_NAME_PATTERN = re.compile(r"^[A-Za-z0-9_*?]+$")


def _env_names(raw: str) -> list[str]:
    """The names and patterns listed; a list that begins with ``+`` adds them
    to the default list instead of replacing it."""
    raw = raw.strip()
    if raw.startswith("+"):
        raw = REDACT_ENV_DEFAULT + "," + raw[1:]
    names = [item.strip() for item in raw.split(",") if item.strip()]
    if not names:   # commas alone: as empty, it would redact no variable by value
        raise ValueError("names no variable; leave it unset for the default list")
    for name in names:
        if not ENV_NAME_PATTERN.match(name):
            raise ValueError(f"{name!r} is not a variable name or pattern (letters, digits, _, * and ?)")
    return names


PLUGIN_NAME_PATTERN = re.compile(r"^[A-Za-z0-9_.-]+$")


def plugin_names(raw: str) -> frozenset[str]:
    names = {item.strip() for item in raw.split(",") if item.strip()}
    for name in names:
        if not PLUGIN_NAME_PATTERN.match(name):
            raise ValueError(f"{name!r} is not a plugin's name (its entry point's: letters, digits, _, . and -)")
    return frozenset(names)


@dataclass(frozen=True)
class Setting:
    name: str
    default: str
    help: str
    parse: Callable[[str], Any] = str
    runtime: bool = False      # an operator may change it while the service runs (/config)
    secret: bool = False       # never shown, only whether it is set
    # A runtime setting's value in PUT /api/v1/config, as JSON Schema: its
    # "type" is enforced there, and the whole is published in the OpenAPI
    # document. Without one, any string, number or boolean is passed to parse.
    schema: dict | None = None


def boolean(raw: str) -> bool:
    value = raw.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off", ""):
        return False
    raise ValueError("must be true or false")


# What _model takes (surrounding whitespace aside), without the NUL the API refuses; the
# invisible characters it refuses are too many for a pattern to list, and are said instead.
MODEL_SCHEMA = {"type": "string", "pattern": "^\\s*[^\\s\\u0000-][^\\s\\u0000]{0,99}\\s*$",
                "description": "No invisible character: a control, format, private-use or unassigned one "
                               "(U+200B, U+202E, …) is refused."}


# A tier setting's value in PUT /api/v1/config.
TIER_SCHEMA = {"type": "integer", "enum": [1, 2, 3]}


def tier(raw: str) -> int:
    value = _int(raw)
    if value not in (1, 2, 3):
        raise ValueError("must be 1, 2 or 3")
    return value


SETTINGS: tuple[Setting, ...] = (
    Setting("CLAUDEOPS_STATE_DIR", str(PROJECT_ROOT / "state"),
            "Directory for the SQLite database, run logs and the generated secret key. Unset, `state` in the "
            "service's own directory (the one holding `pyproject.toml`); a relative path you set is taken from "
            "the working directory.", _not_empty(_path, "`state` in the service's own directory")),
    Setting("CLAUDEOPS_DATABASE_URL", "",
            "The database: a SQLite or PostgreSQL URL (see PostgreSQL in the README); empty means SQLite at "
            "`$CLAUDEOPS_STATE_DIR/claudeops.db`. A relative SQLite path (`sqlite:///ops.db`) is taken from the "
            "working directory, for every process of the service (a database an earlier version kept for it in the "
            "checkout's `instance/` folder stops the start, naming both places); a database in memory is refused."),
    Setting("CLAUDEOPS_RESULTS_DIR", "",
            "Where each session's raw run log is written; empty means `$CLAUDEOPS_STATE_DIR/results`. A relative "
            "path is taken from the working directory.", _path_or_derived),
    Setting("CLAUDEOPS_CLAUDE_BIN", "claude",
            "The Claude Code CLI to run (a name on `PATH` or a path).", _not_empty(str, "`claude` on `PATH`")),
    Setting("CLAUDEOPS_WORKDIR", "",
            "Working directory of the CLI; empty means `$CLAUDEOPS_STATE_DIR/work`. A relative path is taken "
            "from the working directory.", _path_or_derived),
    Setting("CLAUDEOPS_PROMPTS_DIR", str(PROJECT_ROOT / "prompts"),
            "Directory holding tier1-observe.md, tier2-investigate.md and tier3-remediate.md.",
            _not_empty(str, "the service's own `prompts`")),
    Setting("CLAUDEOPS_INTERVAL", "3600",
            "Seconds from the end of one scheduled tier-1 session to the start of the next; 0 runs only ad-hoc sessions.",
            _interval, runtime=True, schema={"type": "integer", "minimum": 0, "maximum": MAX_INTERVAL}),
    Setting("CLAUDEOPS_SESSION_TIMEOUT", "1800",
            "Seconds a session may run before its whole process group is ended (status `timed_out`).",
            positive_int),
    Setting("CLAUDEOPS_SESSION_MAX_COST_USD", "0",
            "Most US dollars (to the cent) one session may spend on the API, as the CLI counts it "
            "(`--max-budget-usd`): the CLI ends the session once it is reached, status `failed`, and as it checks "
            "after each API call, the last call may take the session past it. 0: no limit.",
            _cost_limit(MAX_SESSION_COST_USD), runtime=True,
            schema={"type": "number", "minimum": 0, "maximum": MAX_SESSION_COST_USD}),
    Setting("CLAUDEOPS_DAILY_MAX_COST_USD", "0",
            "Most US dollars (to the cent) the sessions that ended in the last 24 hours may spend together, as the "
            "CLI counts them. A session is not run while they have spent it (status `stopped`, saying when the "
            "next can run): the schedule still queues one each interval, ended so, and runs again by itself once "
            "the day has room; one that runs may spend what is left (its `--max-budget-usd`, or "
            "`CLAUDEOPS_SESSION_MAX_COST_USD` if lower). A session stopped or timed out before its result line "
            "has no cost to count. 0: no limit.",
            _cost_limit(MAX_DAILY_COST_USD), runtime=True,
            schema={"type": "number", "minimum": 0, "maximum": MAX_DAILY_COST_USD}),
    Setting("CLAUDEOPS_TIER1_MODEL", "haiku", "Model for tier 1 (observe).", _model, runtime=True,
            schema=MODEL_SCHEMA),
    Setting("CLAUDEOPS_TIER2_MODEL", "sonnet", "Model for tier 2 (investigate).", _model, runtime=True,
            schema=MODEL_SCHEMA),
    Setting("CLAUDEOPS_TIER3_MODEL", "opus", "Model for tier 3 (remediate).", _model, runtime=True,
            schema=MODEL_SCHEMA),
    Setting("CLAUDEOPS_MAX_TIER", "3",
            "Highest tier a session may escalate to (1 turns escalation off); lowered, escalations queued "
            "above it are not run.", tier, runtime=True, schema=TIER_SCHEMA),
    Setting("CLAUDEOPS_DRY_RUN", "false",
            "true: sessions are told to change nothing and escalation is suppressed (an event says so).",
            boolean, runtime=True, schema={"type": "boolean"}),
    Setting("CLAUDEOPS_TIER1_ALLOWED_TOOLS", "Bash,Read,Grep,Glob",
            "Comma-separated `--allowedTools` for tier 1. Every tier is also allowed `mcp__claudeops`, "
            "the service's own read-only MCP tools: empty allows only those.", _tool_list),
    Setting("CLAUDEOPS_TIER2_ALLOWED_TOOLS", "Bash,Read,Grep,Glob,WebFetch",
            "Comma-separated `--allowedTools` for tier 2 (and `mcp__claudeops`).", _tool_list),
    Setting("CLAUDEOPS_TIER3_ALLOWED_TOOLS", "Bash,Read,Grep,Glob,WebFetch,Edit,Write",
            "Comma-separated `--allowedTools` for tier 3 (and `mcp__claudeops`).", _tool_list),
    Setting("CLAUDEOPS_TIER1_DISALLOWED_TOOLS", "Edit,Write",
            "Comma-separated `--disallowedTools` for tier 1.", _tool_list),
    Setting("CLAUDEOPS_TIER2_DISALLOWED_TOOLS", "Edit,Write",
            "Comma-separated `--disallowedTools` for tier 2.", _tool_list),
    Setting("CLAUDEOPS_TIER3_DISALLOWED_TOOLS", "",
            "Comma-separated `--disallowedTools` for tier 3.", _tool_list),
    Setting("CLAUDEOPS_MAX_LINE_BYTES", str(8 * 1024 * 1024),
            "Longest stream-json line parsed (at least 65536); a longer one is kept in the run log, logged and "
            "skipped.", _max_line_bytes),
    Setting("CLAUDEOPS_LOG_RETENTION_DAYS", "90",
            "Days a finished session keeps its activity log, run log files, system prompt and the record of "
            "which memories it was given; older ones are removed daily (the session itself, its cost and "
            "response are kept). 0 keeps them forever.",
            retention_days, runtime=True, schema=RETENTION_DAYS_SCHEMA),
    Setting("CLAUDEOPS_SECRET_KEY", "",
            "Key that signs dashboard cookies and CSRF tokens; empty means one generated once into the state directory.",
            secret=True),
    Setting("CLAUDEOPS_PASSWORD", "",
            "The operator's dashboard password (at least 8 characters, no whitespace at either end). Setting it "
            "or CLAUDEOPS_API_TOKEN turns authentication on; `serve` refuses a non-loopback address without one.",
            _credential(8), secret=True),
    Setting("CLAUDEOPS_API_TOKEN", "",
            "Bearer token for /api/v1 (`Authorization: Bearer …`; at least 16 characters, no whitespace at either "
            "end); with authentication on and no token, the API is closed.", _credential(16), secret=True),
    Setting("CLAUDEOPS_LOGIN_HOURS", "12", "Hours a dashboard login lasts (at most 366 days).",
            _login_hours),
    Setting("CLAUDEOPS_TRUSTED_PROXIES", "0",
            "Reverse proxies in front of the service whose X-Forwarded-For/-Proto/-Host headers are believed "
            "(client address, TLS for Secure cookies); 0 believes none, 10 at most.", _proxy_count),
    Setting("CLAUDEOPS_HSTS_SECONDS", "0",
            "Over TLS (or from a trusted proxy that says so), tell browsers to reach this host name only over "
            "https for that many seconds (Strict-Transport-Security), two years at most; 0 sends nothing. It "
            "holds for every port of the host name: a plain-http service beside this one on the same name would "
            "be unreachable.",
            _hsts_seconds),
    Setting("CLAUDEOPS_LOG_LEVEL", "INFO", "Log level of the service (DEBUG, INFO, WARNING, ERROR, CRITICAL), "
            "gunicorn's included. The service's lines are stamped in UTC (2026-12-01T06:40:00.123Z), gunicorn's "
            "own in local time with its offset.", _log_level),
    Setting("CLAUDEOPS_ACCESS_LOG", "true",
            "Log a line for every dashboard and API request (gunicorn's access log; an open dashboard tab's polls "
            "write some 2,000 lines an hour). Logged only at DEBUG and INFO; false turns it off there too.",
            boolean),
    Setting("CLAUDEOPS_DISABLE_PLUGINS", "",
            "Comma-separated names of installed plugins (their entry points' names) not to load: one that keeps "
            "the service from starting is set aside without uninstalling it. Its tables and rows stay, and its "
            "schema revision is left as it is; an upgrade with revisions of its own to run needs it loaded again. "
            "The built-in plugins are always loaded.", plugin_names),
    Setting("CLAUDEOPS_REDACT_ENV", REDACT_ENV_DEFAULT,
            "Comma-separated names or glob patterns of environment variables whose values (8 characters or more) "
            "are redacted everywhere; see docs/security.md. The list replaces the default; one that begins with "
            "`+` (`+DB_ROOT_PW,BACKUP_*`) adds to it.", _not_empty(_env_names, "the default list")),
)

TIERS = {1: "observe", 2: "investigate", 3: "remediate"}


def load_settings(environ: dict[str, str] | None = None,
                  settings: tuple[Setting, ...] | list[Setting] = SETTINGS) -> dict[str, Any]:
    """Read ``settings`` (default: the host's) from ``environ`` (default: the
    process environment)."""
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    for setting in settings:
        raw = environ.get(setting.name, setting.default)
        try:
            values[setting.name] = setting.parse(raw)
        except ValueError as exc:
            shown = "(set, hidden)" if setting.secret else repr(raw)   # a secret is never echoed, nor logged
            raise ConfigError(f"{setting.name}={shown}: {exc}") from None
    return values


def disabled_plugins(overrides: dict[str, Any]) -> frozenset[str]:
    """CLAUDEOPS_DISABLE_PLUGINS, read before the other settings: the
    plugins it lets load declare settings of their own."""
    name = "CLAUDEOPS_DISABLE_PLUGINS"
    raw = overrides.get(name, os.environ.get(name, ""))
    if isinstance(raw, frozenset):   # read already: an app's own settings, passed on (claudeops copy-to)
        return raw
    (setting,) = [s for s in SETTINGS if s.name == name]
    return load_settings({name: raw}, (setting,))[name]


def derive_paths(config: dict[str, Any]) -> None:
    """Fill the settings whose empty default is derived from the state directory."""
    state = Path(config["CLAUDEOPS_STATE_DIR"])
    if not config.get("CLAUDEOPS_RESULTS_DIR"):
        config["CLAUDEOPS_RESULTS_DIR"] = str(state / "results")
    if not config.get("CLAUDEOPS_WORKDIR"):
        config["CLAUDEOPS_WORKDIR"] = str(state / "work")
    if not config.get("CLAUDEOPS_DATABASE_URL"):
        config["CLAUDEOPS_DATABASE_URL"] = f"sqlite:///{state / 'claudeops.db'}"
