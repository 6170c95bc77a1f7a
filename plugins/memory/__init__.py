"""Memory: what the agent learned about the infrastructure, kept across
sessions (SPEC-0015). ``[MEMORY:category:service] observation`` markers
create, reinforce or contradict memories; each session is given the most
trusted ones in its system prompt; operators curate them in the dashboard,
the API and ``claudeops memories``."""
from __future__ import annotations

from sqlalchemy import func, select

from app.extensions import db
from app.hookspecs import hookimpl
from app.runtime import setting
from app.plugin_types import DashboardPage, MarkerRecord, OverviewCard, PromptSection, Setting
from plugins.memory import hookspecs, matcher, store
from plugins.memory.context import build_memory_context
from plugins.memory.markers import parse_memory_markers
from plugins.memory.models import Memory, MemoryInjection

BUDGET_SETTING = "CLAUDEOPS_MEMORY_BUDGET"


def _positive_int(raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise ValueError("must be a whole number") from None
    if value <= 0:
        raise ValueError("must be greater than 0")
    return value


@hookimpl
def claudeops_add_hookspecs(pluginmanager):
    pluginmanager.add_hookspecs(hookspecs)


@hookimpl
def claudeops_settings():
    return [Setting(BUDGET_SETTING, "2000",
                    "Most tokens (characters / 4) the memory section of a session's system prompt may take.",
                    _positive_int, runtime=True)]


@hookimpl(trylast=True)
def claudeops_memory_match(category, service, observation, candidates):
    return matcher.match(observation, candidates)


@hookimpl
def claudeops_markers(text, run):
    recorded = []
    for marker in parse_memory_markers(text):
        outcome = store.record_observation(marker.category, marker.service, marker.observation, run)
        label = f"{marker.category}:{marker.service or 'general'}"
        recorded.append(MarkerRecord("memory", f"{label} {outcome.relation}",
                                     f"#{outcome.memory.id} ({outcome.memory.confidence:g}) {marker.observation}"))
    return recorded or None


@hookimpl
def claudeops_session_starting(run):
    store.decay(run=run)


@hookimpl
def claudeops_prompt_context(run):
    context = build_memory_context(setting(BUDGET_SETTING))
    for position, memory in enumerate(context.included):
        db.session.add(MemoryInjection(session_id=run.session_id, memory_id=memory.id,
                                       confidence=memory.confidence, position=position))
    if not context.text:
        return None
    return PromptSection(name="memory", text=context.text, position=200)


@hookimpl
def claudeops_dashboard_pages():
    from plugins.memory.views import pages
    return [DashboardPage("Memories", "memory.index", pages, position=30)]


@hookimpl
def claudeops_api_blueprints():
    from plugins.memory.api import api
    return [api]


@hookimpl
def claudeops_cli_commands():
    from plugins.memory.cli import memories
    return [memories]


@hookimpl
def claudeops_mcp_tools():
    from plugins.memory.mcp_tools import TOOLS
    return TOOLS


@hookimpl
def claudeops_stats():
    return {"active_memories": db.session.scalar(
        select(func.count()).select_from(Memory).where(Memory.active.is_(True)))}


@hookimpl
def claudeops_overview_cards():
    active = db.session.scalar(select(func.count()).select_from(Memory).where(Memory.active.is_(True)))
    total = db.session.scalar(select(func.count()).select_from(Memory))
    return [OverviewCard("Memories", f"{active} active", f"{total} in all, inactive ones kept for audit",
                         "memory.index", position=30)]
