"""What a runaway agent repeats in one text block, counted rather than
listed in the session's activity log: a row for each refusal or repeat of a
marker written thousands of times would store many times the text it came in."""
from __future__ import annotations

from typing import TypeVar

from app.plugin_types import MarkerRecord

T = TypeVar("T")

# Shown of a plugin's refusals of each kind in one block, and of each record
# the same as another; then one record counts the rest.
SHOWN_REFUSALS = 10
SHOWN_SAME_RECORDS = 3


def repeats_counted(records: list[T]) -> list[T]:
    """The ``records`` one plugin gave for one text block, with its refusals
    (``stored=False``) of each kind after the first ``SHOWN_REFUSALS``, and
    each record the same as an earlier one (kind, label and summary: a
    memory said again and again) after the first ``SHOWN_SAME_RECORDS``,
    counted: each count is one more record at the end. Anything else passes
    as it is, in its order."""
    refused: dict[str, int] = {}
    same: dict[tuple[str, str, str], int] = {}
    kept = []
    for record in records:
        if isinstance(record, MarkerRecord) and not record.stored:
            refused[record.kind] = refused.get(record.kind, 0) + 1
            if refused[record.kind] > SHOWN_REFUSALS:
                continue
        elif isinstance(record, MarkerRecord):
            alike = (record.kind, record.label, record.summary)
            same[alike] = same.get(alike, 0) + 1
            if same[alike] > SHOWN_SAME_RECORDS:
                continue
        kept.append(record)
    for (kind, label, _), count in same.items():
        if count > SHOWN_SAME_RECORDS:
            kept.append(MarkerRecord(kind, label, f"{count - SHOWN_SAME_RECORDS} more the same in this text block, "
                                                  "not shown one by one"))
    for kind, count in refused.items():
        if count > SHOWN_REFUSALS:
            kept.append(MarkerRecord(kind, "not stored", f"{count - SHOWN_REFUSALS} more {kind} markers not "
                                                         "stored in this text block, not shown one by one; "
                                                         "the service log has the first of each reason",
                                     stored=False))
    return kept
