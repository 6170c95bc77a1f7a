"""What the plugins are told of a session (``RunInfo``), whoever tells them:
the session as it runs, or a hook command the CLI runs within it (the
cooldowns check's denial notice)."""
from __future__ import annotations

from typing import Optional

from app.config import TIERS
from app.models import Session
from app.plugin_types import RunInfo
from app.runtime import setting
from app.sessions.marker_tags import installed_tags


def run_info(session: Session, marker_tags: Optional[dict[str, tuple[str, ...]]] = None) -> RunInfo:
    """``marker_tags`` are each plugin's (``tags_by_plugin``), asked for
    here unless given."""
    return RunInfo(session_id=session.id, tier=session.tier, tier_name=TIERS.get(session.tier, ""),
                   model=session.model or "", trigger=session.trigger,
                   operator_prompt=session.prompt, started_at=session.started_at,
                   parent_session_id=session.parent_id, escalation_reason=session.escalation_reason,
                   dry_run=bool(setting("CLAUDEOPS_DRY_RUN")), marker_tags=installed_tags(marker_tags))
