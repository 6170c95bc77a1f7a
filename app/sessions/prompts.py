"""What the CLI is told: the tier prompt (its one argument, after the
options) and the system prompt (``--append-system-prompt``).

The system prompt is the environment section first, then every plugin's
``claudeops_prompt_context`` section in ascending ``position``, then ``name``
(events 100, memory 200, cooldowns 300; a plain string counts as 500).
"""
from __future__ import annotations

import logging
import platform
import threading
from pathlib import Path
from typing import Optional

from app.config import TIERS
from app.plugin_fault_log import log_fault
from app.plugin_types import PromptSection, RunInfo
from app.plugins import results_by_plugin
from app.timeutil import isoformat, utcnow

log = logging.getLogger(__name__)

TIER_PROMPT_FILES = {1: "tier1-observe.md", 2: "tier2-investigate.md", 3: "tier3-remediate.md"}
DEFAULT_SECTION_POSITION = 500


class PromptError(RuntimeError):
    """The tier prompt file is missing or unreadable."""


def tier_prompt(prompts_dir: str | Path, tier: int, operator_prompt: str | None) -> str:
    """The prompt: the tier's instructions, with an operator's ad-hoc
    request added after them, never in their place."""
    path = Path(prompts_dir) / TIER_PROMPT_FILES[tier]
    try:
        instructions = path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise PromptError(f"cannot read tier {tier} prompt {path}: {exc.strerror or exc}") from None
    if operator_prompt and operator_prompt.strip():
        instructions += ("\n\n## Operator's request\n\n"
                         "The operator asked for this in addition to the instructions above:\n\n"
                         + operator_prompt.strip())
    return instructions


def environment_section(run: RunInfo, workdir: str) -> str:
    now = run.started_at or utcnow()
    lines = [
        "## Environment",
        "",
        f"- Claude Ops session: #{run.session_id} ({run.trigger})",
        f"- Tier: {run.tier} ({TIERS[run.tier]}), model {run.model}",
        f"- Started (UTC): {isoformat(now)}",
        f"- Host: {platform.node() or 'unknown'}",
        f"- Working directory: {workdir}",
    ]
    if run.parent_session_id:
        lines.append(f"- Escalated from session #{run.parent_session_id}")
    if run.dry_run:
        lines.append("- DRY RUN: change nothing. Investigate and report what you would do, and how.")
    return "\n".join(lines)


def system_prompt(run: RunInfo, workdir: str, shutdown: Optional[threading.Event] = None) -> str:
    """The text of ``--append-system-prompt``. Each plugin's rows are
    committed after its section; with ``shutdown``, a database server gone
    away meanwhile is waited for and that plugin asked again
    (``app.plugins.call_each``)."""
    sections = [_as_section(plugin, result)
                for plugin, result in results_by_plugin("claudeops_prompt_context", commit_each=True,
                                                        shutdown=shutdown, run=run)]
    ordered = sorted((s for s in sections if s and s.text.strip()), key=lambda s: (s.position, s.name))
    return "\n\n".join([environment_section(run, workdir)] + [s.text.strip() for s in ordered])


def _as_section(plugin: str, result) -> PromptSection | None:
    if isinstance(result, str):
        return PromptSection(name="", text=result, position=DEFAULT_SECTION_POSITION)
    if not isinstance(result, PromptSection):
        log_fault(log, plugin, "claudeops_prompt_context", "wrong type",
                  "plugin %s returned prompt context of type %s; return a PromptSection or a str",
                  plugin, type(result).__name__)
        return None
    try:
        # Checked when it was made; checked again in case it was changed since
        # (frozen is no guarantee): one bad section must not fail the session.
        result.validate()
    except (TypeError, ValueError) as exc:
        log_fault(log, plugin, "claudeops_prompt_context", "invalid section",
                  "plugin %s returned a prompt section that is left out: %s", plugin, exc)
        return None
    return result
