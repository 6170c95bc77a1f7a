"""What the agent's memory markers did, told to the operator's feed through
the ``claudeops_notice`` hook (the events plugin shows each notice on the
Events page, with the session and the service): a new memory, proposed or
not (info), a contradiction (warning), and a proposed memory approved because
a second session confirmed it (info).

Only markers that store something new send one: a reinforcement, a repeat, a
marker over a limit or one saying again what the operator rejected sends
none. So a session sends at most CLAUDEOPS_MEMORY_MAX_PER_SESSION notices for
the memories it creates, and as many for the earlier proposals it confirms
(the approvals past that are in the memories' history, not the feed). Like
every notice of the service, they are always stored and count towards the
session's CLAUDEOPS_EVENTS_MAX_PER_SESSION, leaving the agent's own event
markers that much less room (60 of the default 100 at the default 20). They
are sent when their markers are written, with the stream's batch
(plugins/memory/batch.py): event markers of the same batch were counted
before them.
"""
from __future__ import annotations

import logging

from app.plugin_types import RunInfo
from app.plugins import call_each
from app.redaction import redactor
from plugins.memory import store
from plugins.memory.context import format_confidence
from plugins.memory.models import PROPOSED, Memory
from plugins.memory.settings import max_new_per_session

log = logging.getLogger(__name__)

PREVIEW_CHARS = 300   # the memory's page has the whole text


def tell(recorded: store.Recorded, run: RunInfo) -> None:
    """The notice, if any, for what one marker did."""
    memory = recorded.memory
    if memory is None:
        return
    if recorded.relation == store.CREATED:
        _send("info", f"{_new(memory)}: {_preview(memory.observation)}", memory, run)
    elif recorded.relation == store.CONTRADICTED:
        _send("warning", _contradiction(memory, recorded.target), memory, run)
    elif recorded.approved:
        if recorded.confirmation > max_new_per_session():
            log.info("session %s: memory %s approved; no notice, past %s confirmations", run.session_id,
                     memory.id, max_new_per_session())
            return
        _send("info", f"Memory #{memory.id} {_tag(memory)} approved: confirmed by a second session: "
                      f"{_preview(memory.observation)}", memory, run)


def _new(memory: Memory) -> str:
    if memory.status == PROPOSED:
        return f"Proposed memory #{memory.id} {_tag(memory)}, awaiting review"
    return f"New memory #{memory.id} {_tag(memory)}"


def _contradiction(memory: Memory, target: Memory) -> str:
    confidence = format_confidence(target.confidence)
    if memory.status == PROPOSED:
        effect = f"which keeps {confidence} unless this one is approved"
    else:
        effect = f"now at {confidence}" + ("" if target.active else ", inactive")
    return (f"{_new(memory)}, contradicts memory #{target.id}, {effect}: {_preview(memory.observation)} "
            f"— against: {_preview(target.observation)}")


def _tag(memory: Memory) -> str:
    return f"[{memory.category}:{memory.service_label}]"


def _preview(text: str) -> str:
    # Redacted before it is cut: a memory written before a secret it holds
    # was configured, cut where the secret stands, would no longer hold the
    # value the event's redaction looks for, and its first half would be
    # stored and shown.
    text = redactor().redact(text)
    return text if len(text) <= PREVIEW_CHARS else text[:PREVIEW_CHARS - 1].rstrip() + "…"


def _send(level: str, message: str, memory: Memory, run: RunInfo) -> None:
    try:
        call_each("claudeops_notice", level=level, message=message, service=memory.service, run=run)
    except Exception:   # the feed is a courtesy; the memory and its history are what count
        log.exception("memory: could not send a notice for memory %s", memory.id)

