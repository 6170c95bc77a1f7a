"""Hooks the memory plugin offers to other plugins."""
from __future__ import annotations

from app.hookspecs import hookspec


@hookspec(firstresult=True)
def claudeops_memory_match(category, service, observation, candidates):
    """Decide how a new observation relates to the memories it could match.

    Called once for every ``[MEMORY:...]`` marker the agent writes, while the
    session runs, with the active memories (approved or proposed) of the
    same service and category; and for a marker that would create a memory,
    once more with the rejected memories of the same service and category,
    if there are any (a ``"reinforce"`` there means the agent said again what
    the operator rejected, and nothing is stored). An import calls it too.

    :param str category: the marker's category.
    :param service: the marker's service, or ``None`` for a general memory.
    :param str observation: the new observation.
    :param candidates: a list of ``plugins.memory.matcher.Candidate``
        (``memory_id``, ``observation``); may be empty.
    :returns: a ``plugins.memory.matcher.Match``: ``relation`` is
        ``"reinforce"`` or ``"contradict"`` with the ``memory_id`` of one of
        the candidates, or ``"distinct"``; or ``None`` to let the next
        implementation decide.

    First result wins. The memory plugin's own deterministic matcher is
    registered ``trylast``, as the fallback.
    """
