"""The hook specifications of Claude Ops, and the one ``hookimpl`` marker.

A plugin is any module or object with functions decorated by ``hookimpl`` whose
names match the specs below (``pm.check_pending()`` rejects a misspelt name at
start-up). ``docs/plugins.md`` walks through a complete plugin; a test keeps it
and this file in step.
"""
from __future__ import annotations

import pluggy

PROJECT_NAME = "claudeops"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


@hookspec(historic=True)
def claudeops_add_hookspecs(pluginmanager):
    """Declare a plugin's own hooks, for other plugins to implement.

    Called once for every plugin as it is registered, before the service
    starts (historic: a plugin registered later is still called).

    :param pluginmanager: the ``pluggy.PluginManager``; call
        ``pluginmanager.add_hookspecs(module_or_class)``.
    :returns: ``None``.

    All implementations are called.
    """


@hookspec
def claudeops_settings():
    """Declare a plugin's settings (``CLAUDEOPS_*`` environment variables).

    Called once, when the application is created, before any other hook
    reads configuration.

    :returns: a list of :class:`~app.plugin_types.Setting`. The host parses
        each from the environment into ``app.config`` (a bad value stops the
        service with a message naming the variable) and lists it in
        ``claudeops config``.

    All implementations are called (results collected). One that raises
    stops the service from starting, with a message naming the plugin and
    the hook.
    """


@hookspec
def claudeops_cli_commands():
    """Add subcommands to the ``claudeops`` command.

    Called once, when the application is created.

    :returns: a list of ``click`` commands or groups; each runs inside an
        application context.

    All implementations are called (results collected). One that raises
    stops the service from starting, with a message naming the plugin and
    the hook.
    """


@hookspec
def claudeops_markers(text, run):
    """Find and record this plugin's markers in one block of the agent's text.

    Called once for every assistant ``text`` block of the stream-json output, in
    stream order, while the session runs, inside an application context. Never
    called with tool input, tool output, user or system lines: markers come only
    from what the agent itself wrote.

    :param str text: the complete text of one assistant text block, with
        secrets already replaced by ``[redacted]`` (docs/security.md).
    :param RunInfo run: the running session.
    :returns: a list of :class:`~app.plugin_types.MarkerRecord` for what was
        recorded (shown as badges in the activity log; one with
        ``stored=False`` reports a marker not stored, shown as a warning), or
        ``None``. Anything else in the list is logged and left out.

    All implementations are called (results collected). Each is called on its
    own: one that raises is logged, its own database rows are rolled back (a
    savepoint), and the others still run, and so does the session. What an
    implementation adds to ``db.session`` is committed with the stream's next
    batch, within a second; do not commit here.
    """


@hookspec
def claudeops_markers_flush(run):
    """Write what ``claudeops_markers`` deferred, before the stream's batch is committed.

    Called before every commit of the stream's batch (about every half
    second while lines arrive, sooner for a burst, and when the stream
    ends), inside an
    application context. A plugin whose markers each cost a database round
    trip can collect them in ``claudeops_markers`` and write them here all
    at once, then ``fill`` the ``PendingRecords`` it returned for them.

    :param RunInfo run: the running session.
    :returns: ``None``.

    All implementations are called, each on its own: one that raises is
    logged, its own rows written here are rolled back (a savepoint), and the
    others and the session go on; records it did not fill are shown as lost.
    Do not commit here.
    """


@hookspec
def claudeops_marker_tags():
    """Name the text that opens a plugin's markers, so that its
    ``claudeops_markers`` is given only the text blocks that may hold one.

    Called once as each session starts: its ``RunInfo`` holds every
    plugin's tags, and its stream handler learns each plugin's own; also
    wherever a ``RunInfo`` is made outside a session's start (a cooldown
    denial's notice, a preview of the memory section).

    :returns: a list of strings, one of which every marker the plugin reads
        begins with (``["[TODO:"]``), matched case-sensitively as written. Its
        ``claudeops_markers`` is then called only for text blocks containing
        one of them: most of a stream holds no marker of any one plugin, and
        calling every plugin for every block costs more than the markers. A
        plugin that does not implement this hook (or returns ``None``) is
        called for every text block. A tag that begins with ``[``, a capital
        letter, capital letters, digits or ``_``, and ``:`` (``[TODO:``,
        ``[TODO:HIGH:``) also ends every plugin's marker text where the whole
        tag is (``RunInfo.marker_tags``, ``app.marker_text``):
        ``[EVENT:info:web] checked [TODO:web] renew`` gives the event
        "checked" once a plugin declares ``[TODO:``. Any other
        (``[ESCALATE]``, ``TODO:``, ``[``) only chooses blocks.

    All implementations are called; each answers for its own plugin only.
    """


@hookspec
def claudeops_prompt_context(run):
    """Contribute a section to the session's system prompt.

    Called once per session, after ``claudeops_session_starting`` and before
    the CLI starts, inside an application context.

    :param RunInfo run: the session about to start.
    :returns: a :class:`~app.plugin_types.PromptSection`, a plain string
        (position 500), or ``None`` for nothing.

    All implementations are called; the host puts the environment section first
    and then joins the sections by ascending ``position``, then ``name``, into
    ``--append-system-prompt``. One that raises is logged and left out. One
    that meets a database server gone away is rolled back and called again
    once it is back.
    """


@hookspec
def claudeops_dashboard_pages():
    """Declare dashboard pages.

    Called once, when the application is created.

    :returns: a list of :class:`~app.plugin_types.DashboardPage`. The host
        registers each page's blueprint and builds the sidebar from the pages
        by ascending ``position`` (Overview 0, Sessions 10, Events 20,
        Memories 30, Cooldowns 40).

    All implementations are called (results collected). One that raises
    stops the service from starting, with a message naming the plugin and
    the hook. So does a page whose ``endpoint`` has no URL (no such view,
    or one that needs arguments), and a blueprint named like one the host
    or another plugin registers.
    """


@hookspec
def claudeops_api_blueprints():
    """Add endpoints to the JSON API.

    Called once, when the application is created.

    :returns: a list of Flask blueprints; the host mounts each under
        ``/api/v1`` (and a blueprint's own ``url_prefix`` under that),
        exempts it from CSRF (API clients send JSON, not forms)
        and renders its errors as JSON ``{"error": "..."}``.

    All implementations are called (results collected). One that raises
    stops the service from starting, with a message naming the plugin and
    the hook. So does a blueprint named like one the host or another plugin
    registers.
    """


@hookspec
def claudeops_openapi_paths():
    """Describe a plugin's API endpoints in the OpenAPI document.

    Called once per process (each gunicorn worker), inside the first
    request that needs the document: ``GET /api/v1/openapi.json``, or any
    ``/api/v1`` request with a query string, which is checked against it.

    :returns: an :class:`~app.plugin_types.OpenApiPaths` (path items keyed by
        the path under ``/api/v1``, such as ``"/widgets/{widget_id}"``, and
        any named schemas they reference as ``#/components/schemas/<name>``),
        a plain dict of path items, or ``None``. ``app.web.apidoc`` has the
        building blocks the built-in plugins use (the error body, pagination,
        ids, JSON bodies).

    All implementations are called (results collected). One that raises, or
    that declares a path or schema name another plugin already declared, is
    logged and left out of the document.
    """


@hookspec
def claudeops_session_starting(run):
    """Prepare for a session (for instance, decay stale knowledge).

    Called once per session, after it is marked running and before its prompt
    is assembled, inside an application context.

    :param RunInfo run: the session about to start.
    :returns: ``None``.

    All implementations are called. One that raises is logged; the session
    still runs. One that meets a database server gone away is rolled back
    and called again once it is back.
    """


@hookspec
def claudeops_session_finished(run, result):
    """React to the end of a session.

    Called once per session that ran, after its final status is stored,
    inside an application context. For a session whose end the database
    refused (a full disk), that is when the scheduler records it later.

    :param RunInfo run: the session that ended.
    :param SessionResult result: its status, reason, response and costs.
    :returns: ``None``.

    All implementations are called. One that raises is logged. One that
    meets a database server gone away is rolled back and called again once
    it is back: keep what it does outside the database idempotent.
    """


@hookspec
def claudeops_overview_cards():
    """Contribute cards to the Overview page.

    Called on every render of the Overview page, inside a request.

    :returns: a list of :class:`~app.plugin_types.OverviewCard`, shown by
        ascending ``position``.

    All implementations are called (results collected). One that raises is
    logged and its cards are left out; the page still renders. A card whose
    ``link_endpoint`` has no URL is logged and shown without its link.
    """


@hookspec
def claudeops_cli_settings(run):
    """Contribute to the Claude Code settings the session's CLI is started with.

    Called once per session, after the system prompt is built and before the
    CLI starts, inside an application context.

    :param RunInfo run: the session about to start.
    :returns: a dict in the format of a Claude Code settings file (for
        instance ``{"hooks": {"PreToolUse": [...]}}``), or ``None``. The host
        merges every plugin's dict (nested dicts merged, lists concatenated)
        and passes the result with ``--settings``.

    All implementations are called (results collected). One that raises is
    logged and left out.
    """


@hookspec
def claudeops_notice(level, message, service, run):
    """Something the service itself wants the operator to see in the feed.

    Called by the host (and by plugins, through
    ``app.plugins.call_each("claudeops_notice", level=..., message=...,
    service=..., run=...)``) when something happens that is not the agent's
    own report: an escalation suppressed by dry run, a new memory, and so on.

    :param str level: ``info``, ``warning`` or ``critical``.
    :param str message: what happened.
    :param service: the service it concerns, or ``None``.
    :param run: the session it happened in (a ``RunInfo``), or ``None``.
    :returns: ``None``. (The events plugin records it as an event.)

    All implementations are called, each on its own: one that raises is
    logged, and the others still get the notice.
    """


@hookspec
def claudeops_migration_dirs():
    """Bring Alembic revisions for a plugin's own tables.

    Called once, when the application is created.

    :returns: a list of directory paths holding Alembic revision files. The
        host adds them to Alembic's version locations, so ``claudeops serve``
        (and ``claudeops db upgrade heads``) apply them with the host's. Give
        the first revision a ``branch_labels`` of its own and
        ``depends_on`` the host revision whose tables it references.

    All implementations are called (results collected). One that raises
    stops the service from starting, with a message naming the plugin and
    the hook.
    """


@hookspec(firstresult=True)
def claudeops_escalation(run, result):
    """Does this session ask for the next tier, and why?

    Called once per session that ran, after ``claudeops_session_finished``,
    inside an application context.

    :param RunInfo run: the session that ended.
    :param SessionResult result: how it ended.
    :returns: the reason for escalating (a non-empty string), or ``None``.
        The host validates the request (not beyond ``CLAUDEOPS_MAX_TIER``, not
        in dry run, only for a session that completed: not one that failed,
        timed out or was stopped) and queues the next tier as a child session.

    First result wins. Each implementation is asked on its own, in pluggy's
    order: one that raises is logged and the next one is asked.
    """


@hookspec
def claudeops_stats():
    """Contribute figures to ``GET /api/v1/stats``.

    Called on every request of the stats endpoint, inside a request.

    :returns: a dict of figure names to JSON values, or ``None``; merged with
        the host's own (runs, escalations, success rate, cost, next run).

    All implementations are called (results collected). One that raises, or
    returns something other than a dict, is logged and left out. A figure
    named like the host's, or like one a plugin called before gave, is
    logged and left out: the host's stand, then each plugin's in pluggy's
    order (``tryfirst`` first; else the plugin registered last, and installed
    plugins are registered in the order Python lists their entry points,
    which nothing you set decides). Prefix your figures with your plugin's
    name.
    """


@hookspec
def claudeops_mcp_tools():
    """Offer tools the agent can call while a session runs (over MCP).

    Called when ``claudeops mcp`` starts (the CLI starts it for every session,
    through ``--mcp-config``) and when a session's command line is built, to
    know whether there are any.

    :returns: a list of :class:`~app.plugin_types.McpTool`. Names must be
        unique across plugins; the agent sees them as
        ``mcp__claudeops__<name>``. Tools read, never write: their database
        connection is read-only.

    All implementations are called (results collected). One that raises is
    logged and left out.
    """


@hookspec
def claudeops_prune(now, dry_run, batch_size):
    """Delete this plugin's rows that are past its retention.

    Called once when the scheduler starts and then daily, and by
    ``claudeops prune``, inside an application context, after the host has
    removed the logs of old sessions (CLAUDEOPS_LOG_RETENTION_DAYS). Read
    your retention from a setting of your own (``retention_days`` and
    ``RETENTION_DAYS_SCHEMA`` in ``app.plugin_types``; 0 keeps everything).

    :param datetime now: the time (UTC, aware) ages are counted from.
    :param bool dry_run: count what would be deleted, and delete nothing.
    :param int batch_size: the most rows to delete in one transaction.
        Commit between batches, so that SQLite's write lock is never held
        long and a running session's writes go on:
        ``app.batched_delete.prune_rows(Model, criteria, dry_run, batch_size)``
        does both, the count and the batched delete.
        Rows kept for each session can go with its logs instead of by a
        retention of their own: ``app.sessions.log_pruning.sessions_pruned(
        now, dry_run)`` selects the ids of the sessions whose logs are
        removed (in a dry run, also those about to be); a session whose run
        logs another host keeps is left to that host, for up to a week past
        its retention (the memory plugin prunes what it gave each session so).
    :returns: a dict of what was deleted (a few words, such as ``"events"``)
        to how many rows (in a dry run: would be), or ``None`` when your
        retention is off.

    All implementations are called, each on its own: one that raises is
    logged, its uncommitted rows are rolled back, and the others still run.
    """
