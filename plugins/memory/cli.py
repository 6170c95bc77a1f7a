"""``claudeops memories``: list, add, edit, delete, review (approve,
reject), and show the context the next session will be given."""
from __future__ import annotations

from pathlib import Path

import click
import orjson
from sqlalchemy import select

from app.extensions import db
from app.models import RUNNING, Session
from app.output_file import OutputRefused, write_text
from app.plain_numbers import BEYOND_EVERY_BOUND, is_whole_number, whole_number
from app.runtime import setting
from app.standard_output import echo
from app.write_lock import lock_for_writing
from plugins.memory import queries, review, store
from plugins.memory.context import format_confidence
from plugins.memory.models import APPROVED, CATEGORIES, Memory
from plugins.memory.settings import REVIEW, review_on


def _fail(exc: Exception):
    raise click.ClickException(str(exc))


def _get(memory_id: int) -> Memory:
    """The memory, to change: read once no session can change it before
    this command commits (app/write_lock.py)."""
    lock_for_writing()
    # No row has an id beyond 32 bits (PostgreSQL would refuse the query).
    memory = db.session.get(Memory, memory_id) if -2**31 <= memory_id < 2**31 else None
    if memory is None:
        raise click.ClickException(f"memory {memory_id} not found")
    return memory


def _line(memory: Memory) -> str:
    status = memory.status if memory.status != APPROVED else "active" if memory.active else "inactive"
    pinned = ", pinned" if memory.pinned else ""
    record = f", {memory.outcomes_label}" if memory.outcomes_label else ""
    return (f"#{memory.id:<5} {memory.service or 'general':<14} {memory.category:<12} "
            f"{format_confidence(memory.confidence):>4} {status}{pinned}{record}  {memory.observation}")


class MemoryId(click.ParamType):
    """A memory's id as ``#12`` lists it: ASCII digits. Python's int() also
    reads "1_2" and other scripts' digits ("١٢"), which would make a typo
    delete memory 12."""

    name = "id"

    def convert(self, value, param, ctx):
        if isinstance(value, int):
            return value
        text = str(value).removeprefix("#")
        # Digits alone, no sign. One past any row's id is looked for, and not found, as the API's is;
        # only one of more digits than any bound is refused here, not read as the bound (plain_numbers).
        number = whole_number(text) if is_whole_number(text) and text[0] not in "+-" else None
        if number is None or number == BEYOND_EVERY_BOUND:
            self.fail(f"{value!r} is not a memory id (the number `memories list` shows)", param, ctx)
        return number


MEMORY_ID = MemoryId()


@click.group()
def memories():
    """Review and curate what the agent has learned."""


@memories.command("list")
@click.option("--service", help='A service, or "general" for general memories.')
@click.option("--category", type=click.Choice(CATEGORIES, case_sensitive=False))
@click.option("--status", type=click.Choice(queries.STATUSES, case_sensitive=False),
              help="active and inactive are among approved memories; proposed ones await review.")
@click.option("-q", "--query", "q", help="Full-text search: words of the observation, service or category, best match first.")
@click.option("--limit", default=100, show_default=True, type=click.IntRange(1, 10000))
def list_memories(service, category, status, q, limit):
    """List memories, most recently updated first."""
    query = queries.memory_query(service, category, q=q, **queries.status_filter(status))
    rows = db.session.scalars(queries.newest_first(query).limit(limit)).all()
    _echo(rows, queries.count(query))


def _echo(rows: list[Memory], total) -> None:
    for memory in rows:
        echo(_line(memory))
    click.echo(f"{len(rows)} of {total} memor{'y' if total.count == 1 and total.exact else 'ies'}", err=True)


@memories.command("add")
@click.option("--category", required=True, type=click.Choice(CATEGORIES, case_sensitive=False))
@click.option("--service", default=None, help="Leave out for a general memory.")
@click.option("--confidence", default=0.7, show_default=True, type=float, help="Clamped to 0..1.")
@click.argument("observation")
def add(category, service, confidence, observation):
    """Add an operator's memory."""
    try:
        memory = store.create(category, service, observation, confidence)
    except store.MemoryInputError as exc:
        _fail(exc)
    db.session.commit()
    echo(_line(memory))


@memories.command("edit")
@click.argument("memory_id", type=MEMORY_ID)
@click.option("--observation", help="New text.")
@click.option("--category", type=click.Choice(CATEGORIES, case_sensitive=False), help="New category.")
@click.option("--service", help='New service ("general" for none).')
@click.option("--confidence", type=float, help="Clamped to 0..1; at or above 0.3 reactivates, below deactivates.")
@click.option("--pin/--unpin", default=None, help="A pinned memory never decays.")
@click.option("--activate/--deactivate", default=None)
def edit(memory_id, observation, category, service, confidence, pin, activate):
    """Change a memory's text, category, service, confidence, pin or status."""
    if all(value is None for value in (observation, category, service, confidence, pin, activate)):
        raise click.UsageError("nothing to change: give --observation, --category, --service, --confidence, "
                               "--pin/--unpin or --activate/--deactivate")
    memory = _get(memory_id)
    try:
        store.update(memory, observation=observation, category=category, service=service, confidence=confidence,
                     active=activate, pinned=pin)
    except store.MemoryInputError as exc:
        _fail(exc)
    db.session.commit()
    echo(_line(memory))


SHOWN_BEFORE_DELETING = 20


@memories.command("delete")
@click.argument("memory_ids", type=MEMORY_ID, nargs=-1, required=True)
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
def delete(memory_ids, yes):
    """Delete memories for good (their history is kept)."""
    try:
        found = store.find_many(list(memory_ids))
        if not yes:
            # Asked with the database's lock let go: the answer may take minutes,
            # and a session, the dashboard or the cooldowns hook writes meanwhile.
            # What "y" deletes, not only how many
            shown = [_line(memory) for memory in sorted(found, key=lambda memory: memory.id)]
            db.session.rollback()
            for line in shown[:SHOWN_BEFORE_DELETING]:
                echo(line)
            if len(shown) > SHOWN_BEFORE_DELETING:
                click.echo(f"… and {len(shown) - SHOWN_BEFORE_DELETING} more")
            click.confirm(f"Delete {len(found)} memor{'y' if len(found) == 1 else 'ies'}?", abort=True)
            found = store.find_many(list(memory_ids))   # under the lock again, what is deleted
    except (LookupError, store.MemoryInputError) as exc:
        _fail(exc)
    deleted = sorted(memory.id for memory in found)   # an id given twice is one memory
    for memory in found:
        store.delete(memory)
    db.session.commit()
    click.echo(f"deleted {', '.join(f'#{memory_id}' for memory_id in deleted)}")


@memories.command("review")
@click.option("--limit", default=100, show_default=True, type=click.IntRange(1, 10000))
def review_inbox(limit):
    """List the proposed memories awaiting review, newest first."""
    _echo(review.proposed(limit), review.proposed_count())
    if not review_on():
        click.echo(f"({REVIEW} is off: the agent's new memories are approved at once)", err=True)


@memories.command("approve")
@click.argument("memory_id", type=MEMORY_ID)
@click.option("--observation", help="New text, before approving.")
@click.option("--category", type=click.Choice(CATEGORIES, case_sensitive=False), help="New category, before approving.")
@click.option("--service", help='New service ("general" for none), before approving.')
@click.option("--confidence", type=float, help="New confidence (clamped to 0..1), before approving.")
def approve(memory_id, observation, category, service, confidence):
    """Approve a proposed (or rejected) memory, edited first with the options given."""
    _decide(memory_id, lambda memory: review.approve(memory, observation=observation, category=category,
                                                     service=service, confidence=confidence))


@memories.command("reject")
@click.argument("memory_id", type=MEMORY_ID)
@click.option("--reason", help="Why, kept in the memory's history.")
def reject(memory_id, reason):
    """Reject a proposed memory: kept for audit, never given to a session."""
    _decide(memory_id, lambda memory: review.reject(memory, reason))


def _decide(memory_id: int, decision) -> None:
    memory = _get(memory_id)
    try:
        decision(memory)
    except (store.MemoryInputError, review.ReviewStateError) as exc:
        _fail(exc)
    db.session.commit()
    echo(_line(memory))


@memories.command("context")
def context():
    """Print the memory section the next session will be given."""
    result = store.preview_next_context(setting("CLAUDEOPS_MEMORY_BUDGET"))
    if result.text:
        echo(result.text)
    else:
        click.echo("(no memory section: no active memory with confidence of at least 0.3)", err=True)


@memories.command("export")
@click.option("--format", "fmt", type=click.Choice(["json", "markdown"]), default="json", show_default=True,
              help="json keeps everything, history included; markdown is the prompt's line format, for people.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, allow_dash=True), default="-",
              help="File to write, which must not exist yet unless --force (a device or a pipe is written as it "
                   "is); default standard output.")
@click.option("--force", is_flag=True, help="Replace the file if it exists (never the database).")
def export(fmt, output, force):
    """Write every memory, active or not, to a file. The file takes its name
    only once it is whole: a failure leaves what was there."""
    from plugins.memory import portability
    if fmt == "json":
        text = "".join(portability.export_json_chunks())
    else:
        text = portability.export_markdown()
    if output == "-":
        echo(text, nl=False)
        return
    try:
        write_text(Path(output), text, replace=force)
    except OutputRefused as exc:
        _fail(exc)
    except OSError as exc:   # told with the file's name, not as a traceback
        raise click.ClickException(f"cannot write {click.format_filename(output)}: {exc.strerror or exc}") from None
    # As backup and import say what they did: counted in what was written
    # (a count read again could differ, on PostgreSQL, by a change meanwhile).
    count = len(orjson.loads(text)["memories"]) if fmt == "json" else sum(
        1 for line in text.splitlines() if line.startswith("- ["))   # one line a memory
    click.echo(f"Exported {count} memor{'y' if count == 1 else 'ies'} to {click.format_filename(output)} ({fmt}).")


# History rows go in one statement, some 40,000 a second (README,
# Portability): this many keep well within the 15 s a session waits.
HISTORY_ROWS_WHILE_A_SESSION_RUNS = 100_000


@memories.command("import")
@click.argument("source", type=click.File("r"))
@click.option("--format", "fmt", type=click.Choice(["auto", "json", "markdown"]), default="auto", show_default=True)
@click.option("--while-a-session-runs", "anyway", is_flag=True,
              help="Import a file of more than 1,000 memories or 100,000 history rows even while a session "
                   "runs, which it may fail.")
def import_(source, fmt, anyway):
    """Read memories from an export (JSON or Markdown). One whose text is
    here already is left unchanged (importing a file again changes nothing);
    each other goes through the matcher: one that says what a memory here
    says reinforces it, one that contradicts it is stored as its
    contradiction, any other is stored as new. One bad entry refuses the
    whole file.

    The import holds the database's write lock until it ends; a session that
    writes meanwhile waits 15 s at most, then fails. So a file of more than
    1,000 memories, or 100,000 history rows, is refused while a session
    runs, unless asked for."""
    from plugins.memory import portability
    name = click.format_filename(source.name)
    try:
        text = source.read()
    except UnicodeDecodeError as exc:
        raise click.ClickException(f"{name} is not UTF-8 text (byte {exc.start} is not), so not an export") from None
    except OSError as exc:   # a failing disk, a file that cannot be read once opened
        raise click.ClickException(f"cannot read {name}: {exc.strerror or exc}") from None
    try:
        entries = portability.parse(text, fmt)
        history = sum(len(entry.history) for entry in entries)
        if (len(entries) > portability.MAX_WEB_IMPORT or history > HISTORY_ROWS_WHILE_A_SESSION_RUNS) and not anyway:
            # Looked for under the lock the import holds: on SQLite the scheduler
            # cannot claim a session between this look and the import's end.
            lock_for_writing()
            _refuse_while_a_session_runs(len(entries), history)
        report = portability.import_entries(entries, source=name)
    except portability.ImportRefused as exc:
        _fail(exc)
    db.session.commit()
    click.echo(", ".join(f"{count} {what}" for what, count in report.to_dict().items()))


def _refuse_while_a_session_runs(count: int, history: int) -> None:
    running = db.session.scalar(select(Session.id).where(Session.status == RUNNING).limit(1))
    if running is not None:
        rows = f" with {history:,} history rows" if history > HISTORY_ROWS_WHILE_A_SESSION_RUNS else ""
        raise click.ClickException(
            f"session #{running} is running, and an import of {count:,} memories{rows} may hold the database longer "
            "than it waits to write (15 s), which would end it: import when no session runs, or pass "
            "--while-a-session-runs")
