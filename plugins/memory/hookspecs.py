"""Hooks the memory plugin offers to other plugins."""
from __future__ import annotations

from app.hookspecs import hookspec


@hookspec(firstresult=True)
def claudeops_memory_match(category, service, observation, candidates):
    """Decide how a new observation relates to the memories it could match.

    Called once for every ``[MEMORY:...]`` marker the agent writes, while the
    session runs, with the active memories (approved or proposed) of the
    same service and category, the most trusted first, at most
    ``plugins.memory.candidates.MAX_CANDIDATES``; and for a marker that would
    create a memory, once more with the rejected memories of the same service
    and category, if there are any (a ``"reinforce"`` there means the agent
    said again what the operator rejected, and nothing is stored). An import
    calls it too.

    :param str category: the marker's category.
    :param service: the marker's service, or ``None`` for a general memory.
    :param str observation: the new observation.
    :param candidates: a list of ``plugins.memory.matcher.Candidate``
        (``memory_id``, ``observation``); may be empty.
    :returns: a ``plugins.memory.matcher.Match``: ``relation`` is
        ``"reinforce"`` or ``"contradict"`` with the ``memory_id`` of one of
        the candidates, or ``"distinct"``; or ``None`` to let the next
        implementation decide.

    First result wins. Each implementation is asked on its own, in pluggy's
    order: one that raises is logged and the next one is asked. The memory
    plugin's own deterministic matcher is registered ``trylast``, as the
    fallback.
    """


@hookspec
def claudeops_memory_relevant_services(run, since):
    """Name the services whose memories this session should be given first.

    Called once per session, while its memory section is built (after
    ``claudeops_session_starting``, before the CLI starts), inside an
    application context; also when the next session's section is previewed
    (``run`` then stands for a scheduled tier-1 session starting now, with
    ``session_id`` 0).

    :param RunInfo run: the session about to start.
    :param datetime since: the start of the recent window, now minus
        ``CLAUDEOPS_MEMORY_RELEVANT_HOURS`` (UTC): trouble older than this
        is no longer news. Equal to now when the operator set it to 0.
    :returns: a dict mapping service names to why each matters to this
        session (a few words, e.g. ``"critical event 2 h ago"``; kept with
        the record of which memories the session was given), or ``None``.
        Names are matched to the services memories name regardless of case;
        a name no memory has is ignored.

    All implementations are called (results collected); one that raises is
    logged and left out. The memory plugin itself adds the services named in
    the operator's request and the escalation reason, ahead of the hook's.
    """
