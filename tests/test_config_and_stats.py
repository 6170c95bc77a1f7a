"""/config, /api/v1/config and /api/v1/stats."""
from __future__ import annotations

import json
import os
import re
import threading
import time
from datetime import timedelta
from html.parser import HTMLParser

import pytest

from app.extensions import db
from app.models import INTERRUPTED, STOPPED, SchedulerState, Session
from app import runtime
from app.runtime import change, setting
from app.sessions.scheduler import SessionScheduler
from app.timeutil import isoformat, utcnow
from tests import streamlines as sl
from tests.support.database import on_postgres
from tests.conftest import make_app
from tests.support.waiting import wait_for
from tests.support.database import explicit_database_url


def config_of(client) -> dict:
    return {s["name"]: s for s in client.get("/api/v1/config").get_json()["settings"]}


def test_the_state_directorys_default_is_the_services_own_wherever_it_is_started(tmp_path, monkeypatch):
    """Unset, it is `state` beside pyproject.toml: the Config page and the
    API said `./state` taken from the working directory (`/state` from /)."""
    from app.config import PROJECT_ROOT, load_settings
    monkeypatch.chdir(tmp_path)
    environ = {name: value for name, value in os.environ.items() if name != "CLAUDEOPS_STATE_DIR"}
    assert load_settings(environ=environ)["CLAUDEOPS_STATE_DIR"] == str(PROJECT_ROOT / "state")
    app = make_app(tmp_path, CLAUDEOPS_DATABASE_URL=explicit_database_url(tmp_path))
    assert config_of(app.test_client())["CLAUDEOPS_STATE_DIR"]["default"] == str(PROJECT_ROOT / "state")


def test_effective_configuration_with_secrets_masked(tmp_path):
    app = make_app(tmp_path, CLAUDEOPS_SECRET_KEY="s3cret-key",
                   CLAUDEOPS_DATABASE_URL=explicit_database_url(tmp_path))
    settings = config_of(app.test_client())
    assert settings["CLAUDEOPS_SECRET_KEY"]["value"] == "(set, hidden)"
    assert settings["CLAUDEOPS_TIER1_MODEL"] == {
        "name": "CLAUDEOPS_TIER1_MODEL", "value": "haiku", "json_value": "haiku", "default": "haiku",
        "source": "default", "runtime": True, "help": "Model for tier 1 (observe).", "ignored": None}
    assert settings["CLAUDEOPS_SECRET_KEY"]["json_value"] is None
    assert settings["CLAUDEOPS_STATE_DIR"]["runtime"] is False
    assert "CLAUDEOPS_MEMORY_BUDGET" in settings        # plugins' settings too
    page = app.test_client().get("/config").get_data(as_text=True)
    assert "s3cret-key" not in page and "(set, hidden)" in page


def test_every_runtime_value_the_api_lists_is_taken_back_by_put_unchanged(client):
    """A script may read a setting and write it back: json_value is of the
    type PUT takes (600, not "600"), for every runtime setting, the plugins' too."""
    before = config_of(client)
    assert before["CLAUDEOPS_INTERVAL"]["json_value"] == 3600 and before["CLAUDEOPS_DRY_RUN"]["json_value"] is False
    runtime_values = {name: s["json_value"] for name, s in before.items() if s["runtime"]}
    assert len(runtime_values) > 10
    response = client.put("/api/v1/config", json=runtime_values)
    assert response.status_code == 200, response.get_json()
    after = {s["name"]: s for s in response.get_json()["settings"]}
    assert {name: after[name]["value"] for name in runtime_values} == \
        {name: before[name]["value"] for name in runtime_values}


def test_database_password_is_never_shown(tmp_path):
    from app.config import SETTINGS
    from app.web.config_page import shown
    spec = next(s for s in SETTINGS if s.name == "CLAUDEOPS_DATABASE_URL")
    assert shown(spec, "postgresql://ops:hunter2@db.local/claudeops") == "postgresql://ops:***@db.local/claudeops"
    # libpq takes the password (and a client key's) as a parameter of the query too.
    assert shown(spec, "postgresql+psycopg://ops@db.local/claudeops?password=hunter2&sslmode=require") == \
        "postgresql+psycopg://ops@db.local/claudeops?password=***&sslmode=require"
    assert "hunter2" not in shown(spec, "postgresql+psycopg:///claudeops?host=db.local&sslpassword=hunter2")


def test_a_memory_budget_no_system_prompt_could_hold_is_refused(client):
    """Every session would fail with a system prompt over 128 KiB."""
    response = client.put("/api/v1/config", json={"CLAUDEOPS_MEMORY_BUDGET": 40000})
    assert response.status_code == 400
    assert "must be at most 24,000" in response.get_json()["error"]
    assert client.put("/api/v1/config", json={"CLAUDEOPS_MEMORY_BUDGET": 24000}).status_code == 200


def test_runtime_change_is_in_force_at_once_and_after_a_restart(tmp_path, fake_cli):
    app = make_app(tmp_path)
    client = app.test_client()
    response = client.put("/api/v1/config", json={"CLAUDEOPS_TIER1_MODEL": "claude-haiku-4-5",
                                                   "CLAUDEOPS_INTERVAL": 600, "CLAUDEOPS_DRY_RUN": True})
    assert response.status_code == 200
    settings = {s["name"]: s for s in response.get_json()["settings"]}
    assert settings["CLAUDEOPS_INTERVAL"]["value"] == "600" and settings["CLAUDEOPS_INTERVAL"]["source"] == "runtime"
    assert settings["CLAUDEOPS_DRY_RUN"]["value"] == "true"

    argv_file = fake_cli(sl.steps(sl.init(), sl.result()))
    with app.app_context():
        from app.sessions import control
        from app.sessions.manager import run_session
        run_session(control.claim(control.enqueue().id))
    argv = json.loads(argv_file.read_text())["argv"]
    assert argv[argv.index("--model") + 1] == "claude-haiku-4-5"

    restarted = make_app(tmp_path)       # same state directory and database
    with restarted.app_context():
        assert setting("CLAUDEOPS_INTERVAL") == 600 and setting("CLAUDEOPS_DRY_RUN") is True
    # null removes the change: the environment's value holds again, in the
    # app that made the change at once, in another within a second.
    client.put("/api/v1/config", json={"CLAUDEOPS_INTERVAL": None})
    with app.app_context():
        assert setting("CLAUDEOPS_INTERVAL") == 3600
    with restarted.app_context():
        started = time.monotonic()
        wait_for(lambda: setting("CLAUDEOPS_INTERVAL") == 3600, timeout=5, interval=0.05)
        assert time.monotonic() - started <= runtime.CACHE_SECONDS + 0.5


def test_every_bad_change_is_named_in_one_answer(client):
    response = client.put("/api/v1/config", json={"CLAUDEOPS_INTERVAL": "600", "CLAUDEOPS_TIER1_MODEL": "other",
                                                  "CLAUDEOPS_MEMORY_BUDGET": 0, "CLAUDEOPS_STATE_DIR": "/tmp"})
    assert response.status_code == 400
    error = response.get_json()["error"]
    assert error.startswith("CLAUDEOPS_INTERVAL must be a whole number (a JSON integer)")
    assert error.index("; CLAUDEOPS_MEMORY_BUDGET='0': must be from 1") < error.index(
        "; CLAUDEOPS_STATE_DIR cannot be changed at run time")
    assert "CLAUDEOPS_TIER1_MODEL" not in error.split("these can be changed at run time:")[0]
    assert config_of(client)["CLAUDEOPS_TIER1_MODEL"]["value"] == "haiku"


@pytest.mark.parametrize("body, message", [
    ({"CLAUDEOPS_STATE_DIR": "/tmp"}, "CLAUDEOPS_STATE_DIR cannot be changed at run time; these can be changed"),
    ({"CLAUDEOPS_INTERVALL": 600}, "CLAUDEOPS_INTERVALL is no setting of this service (nor of its plugins); "
                                   "these can be changed at run time: "),
    # The value as the client wrote it, in JSON.
    ({"CLAUDEOPS_INTERVAL": True}, "must be a whole number (a JSON integer), or null to remove the change; not true"),
    ({"CLAUDEOPS_DRY_RUN": "yes"}, 'must be true or false (a JSON boolean), or null to remove the change; not "yes"'),
    ({"CLAUDEOPS_INTERVAL": "soon"}, "CLAUDEOPS_INTERVAL must be a whole number (a JSON integer)"),
    ({"CLAUDEOPS_INTERVAL": "600"}, "CLAUDEOPS_INTERVAL must be a whole number (a JSON integer), or null"),
    ({"CLAUDEOPS_INTERVAL": -1}, "CLAUDEOPS_INTERVAL='-1': must be 0 or more"),
    # Beyond 366 days the scheduler's date arithmetic would overflow.
    ({"CLAUDEOPS_INTERVAL": 10**12}, "must be at most 31622400 (366 days)"),
    ({"CLAUDEOPS_MAX_TIER": True}, "CLAUDEOPS_MAX_TIER must be a whole number"),
    ({"CLAUDEOPS_TIER3_MODEL": ["opus"]}, "CLAUDEOPS_TIER3_MODEL must be text (a JSON string)"),
    ({"CLAUDEOPS_DRY_RUN": 1}, "CLAUDEOPS_DRY_RUN must be true or false"),
    ({"CLAUDEOPS_MAX_TIER": 4}, "must be 1, 2 or 3"),
    ({"CLAUDEOPS_TIER2_MODEL": "two words"}, "without spaces"),
    # Shown as "haiku", it is no model: every session would fail.
    ({"CLAUDEOPS_TIER2_MODEL": "hai\u200bku"}, "without invisible characters (it holds U+200B)"),
    ({"CLAUDEOPS_TIER3_MODEL": "opus\u202e"}, "without invisible characters (it holds U+202E)"),
    # The CLI would take it for one of its options.
    ({"CLAUDEOPS_TIER3_MODEL": "--dangerously-skip-permissions"}, "not an option: no model name begins with -"),
    ({"CLAUDEOPS_DRY_RUN": "perhaps"}, "must be true or false"),
    ({"CLAUDEOPS_MEMORY_BUDGET": 0}, "must be from 1 to 2147483647"),
    # Larger, the context build's LIMIT would overflow the driver.
    ({"CLAUDEOPS_MEMORY_BUDGET": 10**30}, "CLAUDEOPS_MEMORY_BUDGET='1000000000000000000000000000000': must be from 1 to 2147483647"),
    ({"CLAUDEOPS_EVENTS_MAX_PER_SESSION": 2**31}, "must be from 1 to 2147483647"),
    ({}, "send the settings to change"),
])
def test_bad_changes_are_refused_and_nothing_is_stored(client, body, message):
    response = client.put("/api/v1/config", json={**body, "CLAUDEOPS_TIER1_MODEL": "other"} if body else body)
    assert response.status_code == 400 and message in response.get_json()["error"]
    assert config_of(client)["CLAUDEOPS_TIER1_MODEL"]["value"] == "haiku"


def test_a_number_of_thousands_of_digits_is_refused_naming_what_is_wrong(client):
    """Python reads no integer of more than 4,300 digits: its own message
    ("Exceeds the limit … use sys.set_int_max_str_digits()"), "not valid
    JSON" or "must be a whole number" said nothing true of what was sent."""
    huge = "9" * 5000
    response = client.put("/api/v1/config", data='{"CLAUDEOPS_INTERVAL": %s}' % huge, content_type="application/json")
    assert response.get_json() == {"error": "the body holds a number of more than 4,300 digits, beyond any field's "
                                            "bounds"}
    for limit, said in ((huge + "/4h", "the count must be at most 2147483647"), ("2/" + huge + "h",
                                                                                 "the window must be at most 366d")):
        response = client.put("/api/v1/config", json={"CLAUDEOPS_COOLDOWN_RESTART_LIMIT": limit})
        assert response.status_code == 400 and response.get_json()["error"].endswith(said + (
            " (0 forbids the action)" if "count" in said else "")), limit
    page = client.post("/config", data={"CLAUDEOPS_INTERVAL": huge})
    assert page.status_code == 400 and "must be at most 31622400 (366 days)" in page.get_data(as_text=True)
    assert config_of(client)["CLAUDEOPS_INTERVAL"]["value"] == "3600"
    # Leading zeros are no part of a number's size.
    assert client.post("/config", data={"CLAUDEOPS_INTERVAL": "0" * 5000 + "600"}).status_code == 302
    assert client.put("/api/v1/config", json={"CLAUDEOPS_COOLDOWN_RESTART_LIMIT": "3/" + "0" * 5000 + "2h"}).status_code == 200
    assert config_of(client)["CLAUDEOPS_INTERVAL"]["value"] == "600"
    assert config_of(client)["CLAUDEOPS_COOLDOWN_RESTART_LIMIT"]["json_value"] == "3/2h"


def test_config_needs_json(client):
    assert client.put("/api/v1/config", data="x=1", content_type="text/plain").status_code == 415


def test_config_page_shows_the_help_texts_code_as_code(app, client):
    page = client.get("/config").get_data(as_text=True)
    assert "empty means SQLite at <code>$CLAUDEOPS_STATE_DIR/claudeops.db</code>." in page
    assert "`" not in page[page.index("<table"):page.index("</table>")]
    render = app.jinja_env.filters["inline_code"]
    assert render("a `<b>` and <i>") == "a <code>&lt;b&gt;</code> and &lt;i&gt;"
    assert render("one ` alone <b>") == "one ` alone &lt;b&gt;"   # no spans to trust


def test_config_page_form_changes_and_resets(client):
    page = client.get("/config").get_data(as_text=True)
    assert '<input name="CLAUDEOPS_INTERVAL" value="3600"' in page
    assert '<code>CLAUDEOPS_<wbr>STATE_<wbr>DIR</code></td>' in page and 'name="CLAUDEOPS_STATE_DIR"' not in page
    response = client.post("/config", data={"CLAUDEOPS_INTERVAL": "900", "CLAUDEOPS_DRY_RUN": "false",
                                            "CLAUDEOPS_TIER1_MODEL": "haiku"}, follow_redirects=True)
    assert "Saved: CLAUDEOPS_INTERVAL." in response.get_data(as_text=True)
    assert config_of(client)["CLAUDEOPS_INTERVAL"]["value"] == "900"
    response = client.post("/config", data={"CLAUDEOPS_INTERVAL": "abc", "CLAUDEOPS_TIER1_MODEL": "sonnet"})
    assert response.status_code == 400
    page = response.get_data(as_text=True)
    assert "Nothing saved: 1 value is not valid." in page
    assert ('aria-invalid="true" aria-describedby="problem-CLAUDEOPS_INTERVAL">' in page and
            '<p class="field-error" id="problem-CLAUDEOPS_INTERVAL">CLAUDEOPS_INTERVAL=&#39;abc&#39;: '
            'must be a whole number' in page)
    # The form keeps what was typed, the valid change too, to correct and save again.
    assert '<input name="CLAUDEOPS_INTERVAL" value="abc"' in page and '<input name="CLAUDEOPS_TIER1_MODEL" value="sonnet"' in page
    assert config_of(client)["CLAUDEOPS_TIER1_MODEL"]["value"] == "haiku"
    # Every value it cannot take is marked at once, not one per attempt.
    page = client.post("/config", data={"CLAUDEOPS_INTERVAL": "soon", "CLAUDEOPS_MEMORY_BUDGET": "-3",
                                        "CLAUDEOPS_TIER1_MODEL": "opus"}).get_data(as_text=True)
    assert "Nothing saved: 2 values are not valid." in page
    assert re.findall(r'<p class="field-error" id="problem-(\w+)">', page) == ["CLAUDEOPS_INTERVAL",
                                                                             "CLAUDEOPS_MEMORY_BUDGET"]
    assert page.count('aria-invalid="true"') == 2 and config_of(client)["CLAUDEOPS_TIER1_MODEL"]["value"] == "haiku"
    # A number typed as "false" stays a text field to correct, not a true/false choice.
    page = client.post("/config", data={"CLAUDEOPS_INTERVAL": "false"}).get_data(as_text=True)
    assert '<input name="CLAUDEOPS_INTERVAL" value="false"' in page and '<select name="CLAUDEOPS_DRY_RUN"' in page
    client.post("/config", data={"reset": "CLAUDEOPS_INTERVAL", "CLAUDEOPS_INTERVAL": "900"})
    assert config_of(client)["CLAUDEOPS_INTERVAL"]["source"] == "default"
    # A model name reaches the CLI's argv, which cannot hold a NUL.
    response = client.post("/config", data={"CLAUDEOPS_TIER1_MODEL": "hai\x00ku"}, follow_redirects=True)
    assert "CLAUDEOPS_TIER1_MODEL must not contain NUL characters</p>" in response.get_data(as_text=True)
    assert config_of(client)["CLAUDEOPS_TIER1_MODEL"]["value"] == "haiku"


class _FormFields(HTMLParser):
    """What a browser sends for the page's settings form: every named input
    (a checkbox only when ticked) and each select's selected option."""

    def __init__(self, page: str):
        super().__init__()
        self.fields: dict[str, str] = {}
        self._select = None
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "input" and "name" in attrs and (attrs.get("type") != "checkbox" or "checked" in attrs):
            self.fields[attrs["name"]] = attrs.get("value", "")
        elif tag == "select":
            self._select = attrs["name"]
        elif tag == "option" and self._select and "selected" in attrs:
            self.fields[self._select] = attrs["value"]

    def handle_endtag(self, tag):
        if tag == "select":
            self._select = None


def test_a_page_loaded_before_a_change_elsewhere_does_not_undo_it(client):
    """Only what the operator edited on the page is saved: a stale page's
    other fields hold old values, and saving them would undo what another
    tab or the API changed meanwhile (dry run turned on, say)."""
    stale = _FormFields(client.get("/config").get_data(as_text=True)).fields
    assert stale["CLAUDEOPS_DRY_RUN"] == "false" and stale["shown-as.CLAUDEOPS_DRY_RUN"] == "false"
    assert client.put("/api/v1/config", json={"CLAUDEOPS_DRY_RUN": True, "CLAUDEOPS_MAX_TIER": 1}).status_code == 200
    response = client.post("/config", data=dict(stale, CLAUDEOPS_MEMORY_BUDGET="2500"), follow_redirects=True)
    assert "Saved: CLAUDEOPS_MEMORY_BUDGET. In force" in response.get_data(as_text=True)
    settings = config_of(client)
    assert settings["CLAUDEOPS_DRY_RUN"]["value"] == "true" and settings["CLAUDEOPS_MAX_TIER"]["value"] == "1"
    assert settings["CLAUDEOPS_MEMORY_BUDGET"]["value"] == "2500"

    # Edited here and changed elsewhere too: not saved until the operator has seen the other change.
    stale = _FormFields(client.get("/config").get_data(as_text=True)).fields
    client.put("/api/v1/config", json={"CLAUDEOPS_INTERVAL": 900})
    response = client.post("/config", data=dict(stale, CLAUDEOPS_INTERVAL="1200", CLAUDEOPS_MEMORY_BUDGET="3000"))
    page = response.get_data(as_text=True)
    assert response.status_code == 409 and "Nothing saved: 1 setting was changed elsewhere meanwhile." in page
    assert ("<p class=\"field-error\" id=\"problem-CLAUDEOPS_INTERVAL\">changed to &#39;900&#39; elsewhere since "
            "this page was loaded" in page)
    assert config_of(client)["CLAUDEOPS_INTERVAL"]["value"] == "900"
    assert config_of(client)["CLAUDEOPS_MEMORY_BUDGET"]["value"] == "2500"
    again = _FormFields(page).fields
    assert again["CLAUDEOPS_INTERVAL"] == "1200" and again["CLAUDEOPS_MEMORY_BUDGET"] == "3000"
    assert again["CLAUDEOPS_DRY_RUN"] == "true"   # the fields not edited show what is in force now
    response = client.post("/config", data=again, follow_redirects=True)
    assert "Saved: CLAUDEOPS_INTERVAL, CLAUDEOPS_MEMORY_BUDGET." in response.get_data(as_text=True)
    settings = config_of(client)
    assert settings["CLAUDEOPS_INTERVAL"]["value"] == "1200" and settings["CLAUDEOPS_DRY_RUN"]["value"] == "true"


def test_a_reset_on_a_page_loaded_before_a_change_elsewhere_does_not_undo_it_unseen(client):
    """A reset replaces the value in force as a value typed does: one
    changed elsewhere since the page was loaded is not reset until the
    operator has seen the change."""
    assert client.put("/api/v1/config", json={"CLAUDEOPS_MEMORY_BUDGET": 3000}).status_code == 200
    stale = _FormFields(client.get("/config").get_data(as_text=True)).fields
    assert client.put("/api/v1/config", json={"CLAUDEOPS_MEMORY_BUDGET": 5000}).status_code == 200
    response = client.post("/config", data=dict(stale, reset="CLAUDEOPS_MEMORY_BUDGET"))
    page = response.get_data(as_text=True)
    assert response.status_code == 409 and "Nothing saved: 1 setting was changed elsewhere meanwhile." in page
    assert ("<p class=\"field-error\" id=\"problem-CLAUDEOPS_MEMORY_BUDGET\">changed to &#39;5000&#39; elsewhere "
            "since this page was loaded; reset it again to replace that with its default</p>") in page
    assert config_of(client)["CLAUDEOPS_MEMORY_BUDGET"]["value"] == "5000"
    again = _FormFields(page).fields
    assert again["shown-as.CLAUDEOPS_MEMORY_BUDGET"] == "5000"
    response = client.post("/config", data=dict(again, reset="CLAUDEOPS_MEMORY_BUDGET"), follow_redirects=True)
    assert "Saved: CLAUDEOPS_MEMORY_BUDGET." in response.get_data(as_text=True)
    assert config_of(client)["CLAUDEOPS_MEMORY_BUDGET"]["value"] == "2000"


def test_a_reset_of_a_setting_reset_already_is_no_conflict(client):
    """Two tabs reset one setting, or one form is sent twice: the second
    finds the default in force, which is what it asked for."""
    assert client.put("/api/v1/config", json={"CLAUDEOPS_MEMORY_BUDGET": 3000, "CLAUDEOPS_INTERVAL": 900}
                      ).status_code == 200
    form = dict(_FormFields(client.get("/config").get_data(as_text=True)).fields, reset="CLAUDEOPS_MEMORY_BUDGET")
    first = client.post("/config", data=form, follow_redirects=True)
    assert "Saved: CLAUDEOPS_MEMORY_BUDGET." in first.get_data(as_text=True)
    second = client.post("/config", data=form, follow_redirects=True)
    assert second.status_code == 200 and "Nothing changed." in second.get_data(as_text=True)
    # With a field edited beside it, that is saved.
    third = client.post("/config", data=dict(form, CLAUDEOPS_INTERVAL="1200"), follow_redirects=True)
    assert "Saved: CLAUDEOPS_INTERVAL." in third.get_data(as_text=True)
    settings = config_of(client)
    assert (settings["CLAUDEOPS_MEMORY_BUDGET"]["value"], settings["CLAUDEOPS_MEMORY_BUDGET"]["source"]) == (
        "2000", "default")
    assert settings["CLAUDEOPS_INTERVAL"]["value"] == "1200"


def test_stats(app, client, fake_cli, run_session_now):
    fake_cli(sl.steps(sl.init(), sl.text("[EVENT:critical:nas] disk\n[MEMORY:timing:nas] scrub takes 6h\n"
                                         "[ESCALATE] disk failing"), sl.result(cost=0.5)))
    run_session_now()
    fake_cli(sl.steps(sl.init()) + [{"exit": 1}])
    from app.sessions import control
    from app.sessions.manager import run_session
    run_session(control.claim_next())      # the escalation, which fails
    stats = client.get("/api/v1/stats").get_json()
    assert stats["runs"] == 2 and stats["runs_24h"] == 2 and stats["escalations"] == 1
    assert stats["success_rate"] == 0.5 and stats["cost_usd"] == 0.5
    assert stats["critical_events_24h"] == 1 and stats["active_memories"] == 1
    assert stats["next_scheduled_run"] is None and stats["scheduler"]["running"] is False
    # A session stopped (even before it began) or interrupted says nothing of how the agent does.
    for status in (STOPPED, INTERRUPTED):
        db.session.add(Session(tier=1, trigger="api", status=status))
    db.session.commit()
    stats = client.get("/api/v1/stats").get_json()
    assert stats["runs"] == 4 and stats["success_rate"] == 0.5


def test_stats_next_scheduled_run_comes_from_the_running_scheduler(app, client):
    change({"CLAUDEOPS_INTERVAL": 3600})
    scheduler = SessionScheduler(app)
    app.config["CLAUDEOPS_CLAUDE_BIN"] = "/nonexistent/claude"   # the first scheduled run fails fast
    scheduler.start()
    try:
        deadline = time.monotonic() + 20
        stats = {}
        while time.monotonic() < deadline:   # the first run (at once) ends; the next is an interval later
            stats = client.get("/api/v1/stats").get_json()
            if stats["runs_by_status"].get("failed") and stats["next_scheduled_run"] and \
                    stats["next_scheduled_run"] > isoformat(utcnow() + timedelta(minutes=50)):
                break
            time.sleep(0.2)
        assert stats["scheduler"]["running"] is True
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", stats["next_scheduled_run"])
        db.session.expire_all()
        next_run = db.session.get(SchedulerState, 1).next_run_at
        assert 3500 < (next_run - utcnow()).total_seconds() <= 3600
    finally:
        scheduler.shutdown()
    assert client.get("/api/v1/stats").get_json()["scheduler"]["running"] is False


def test_a_stored_value_that_no_longer_parses_falls_back_with_a_warning(app, client, caplog):
    from app.models import RuntimeSetting
    db.session.add(RuntimeSetting(name="CLAUDEOPS_MAX_TIER", value="7", updated_at=utcnow()))
    db.session.commit()
    assert setting("CLAUDEOPS_MAX_TIER") == 3
    assert "ignoring stored CLAUDEOPS_MAX_TIER='7'" in caplog.text
    row = config_of(client)["CLAUDEOPS_MAX_TIER"]
    # Not "runtime": the stored change is not what is in force, and the API says why.
    assert (row["value"], row["source"]) == ("3", "default")
    assert row["ignored"].startswith("the stored change '7' is ignored (")
    assert row["ignored"].endswith("); the default is in force. Save a value, or reset, to replace it")
    assert config_of(client)["CLAUDEOPS_INTERVAL"]["ignored"] is None
    # Logged once, however often it is read.
    runtime.forget_cached()
    setting("CLAUDEOPS_MAX_TIER")
    client.get("/config")
    assert caplog.text.count("ignoring stored CLAUDEOPS_MAX_TIER") == 1
    page = client.get("/config").get_data(as_text=True)
    assert "The stored change &#39;7&#39; is ignored (" in page
    assert '<input type="checkbox" name="reset" value="CLAUDEOPS_MAX_TIER">' in page
    response = client.post("/config", data={"reset": "CLAUDEOPS_MAX_TIER"})
    assert response.status_code == 302
    assert config_of(client)["CLAUDEOPS_MAX_TIER"]["ignored"] is None
    assert db.session.get(RuntimeSetting, "CLAUDEOPS_MAX_TIER") is None


def test_a_long_stored_value_that_no_longer_parses_is_logged_and_shown_by_its_start(app, client, caplog):
    """One a version took (leading zeros count for nothing) and a later one
    refuses: the warning and the page repeat its first characters, not a
    megabyte of them."""
    from app.models import RuntimeSetting
    stored = "0" * (1_048_576 - 8) + "99999999"   # over 366 days
    db.session.add(RuntimeSetting(name="CLAUDEOPS_INTERVAL", value=stored, updated_at=utcnow()))
    db.session.commit()
    assert setting("CLAUDEOPS_INTERVAL") == 3600
    cut = f"'{'0' * 80}…' (1,048,576 characters)"
    assert f"ignoring stored CLAUDEOPS_INTERVAL={cut} (must be at most" in caplog.text and "0" * 81 not in caplog.text
    assert config_of(client)["CLAUDEOPS_INTERVAL"]["ignored"].startswith(f"the stored change {cut} is ignored (")


def test_a_stored_change_is_read_and_parsed_once_per_cache_period_and_the_configuration_at_once(app):
    """Plugins ask for their limits on every marker of a stream: within
    CACHE_SECONDS the stored change is neither read nor parsed again. Without
    one, the configuration is what holds, read each time."""
    from dataclasses import replace
    from sqlalchemy import event as sa_event
    name = "CLAUDEOPS_EVENTS_MAX_PER_SESSION"
    reads, parsed = [], []
    sa_event.listen(db.engine, "before_cursor_execute",
                    lambda _c, _cur, statement, *_: reads.append(statement) if "runtime_settings" in statement else None)
    spec = runtime._runtime(name)
    app.extensions[runtime.RUNTIME_BY_NAME][name] = replace(spec, parse=lambda raw: parsed.append(raw) or spec.parse(raw))
    change({name: 7})
    parsed.clear()
    reads.clear()
    assert [setting(name) for _ in range(50)] == [7] * 50
    assert len(reads) == 1 and parsed == ["7"]

    change({name: None})
    assert setting(name) == 100
    app.config[name] = 5
    assert setting(name) == 5


def test_workers_get_the_paths_the_operator_set_resolved_and_no_others(app, monkeypatch, tmp_path):
    """gunicorn works from the checkout: a relative path the operator set is
    passed as `serve` resolved it; one left unset stays unset for the workers,
    so their Config page says it is the default."""
    from app.serve import gunicorn_command, worker_environment
    for name in ("CLAUDEOPS_STATE_DIR", "CLAUDEOPS_RESULTS_DIR", "CLAUDEOPS_DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    env = worker_environment(app)
    assert not {"CLAUDEOPS_STATE_DIR", "CLAUDEOPS_RESULTS_DIR", "CLAUDEOPS_DATABASE_URL"} & set(env)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CLAUDEOPS_RESULTS_DIR", "runs")
    app.config["CLAUDEOPS_RESULTS_DIR"] = "runs"
    assert worker_environment(app)["CLAUDEOPS_RESULTS_DIR"] == str(tmp_path / "runs")
    monkeypatch.setenv("CLAUDEOPS_DATABASE_URL", "sqlite:///ops.db")   # a file in the working directory
    app.config["CLAUDEOPS_DATABASE_URL"] = "sqlite:///ops.db"
    assert worker_environment(app)["CLAUDEOPS_DATABASE_URL"] == f"sqlite:///{tmp_path}/ops.db"
    app.config["CLAUDEOPS_DATABASE_URL"] = "postgresql+psycopg://ops:pw@db/claudeops"
    assert worker_environment(app)["CLAUDEOPS_DATABASE_URL"] == "postgresql+psycopg://ops:pw@db/claudeops"
    assert "--no-control-socket" in gunicorn_command("127.0.0.1", 8080, 2)   # none in $HOME, shared by all


def test_the_state_directory_is_made_for_the_services_user_only(tmp_path, caplog):
    from app.serve import check_writable_dirs
    app = make_app(tmp_path / "fresh")
    for key in ("CLAUDEOPS_STATE_DIR", "CLAUDEOPS_RESULTS_DIR"):
        assert os.stat(app.config[key]).st_mode & 0o777 == 0o700, key
    check_writable_dirs(app)
    assert "can be read by other users" not in caplog.text
    os.chmod(app.config["CLAUDEOPS_STATE_DIR"], 0o755)   # one an older version, or the operator, made
    check_writable_dirs(app)
    # On PostgreSQL the database is elsewhere: the directory holds the cookie key alone.
    holds = "the cookie key" if on_postgres() else "the database and the cookie key"
    assert (f"the state directory {app.config['CLAUDEOPS_STATE_DIR']} can be read by other users (mode 755); "
            f"it holds {holds}: chmod 700 it") in caplog.text
    os.chmod(app.config["CLAUDEOPS_RESULTS_DIR"], 0o750)
    check_writable_dirs(app)
    assert (f"the results directory {app.config['CLAUDEOPS_RESULTS_DIR']} can be read by other users (mode 750); "
            "it holds the run logs") in caplog.text


def test_a_missing_claude_cli_or_tier_prompt_is_said_at_start(tmp_path, caplog):
    from app.serve import warn_of_what_sessions_lack
    app = make_app(tmp_path / "ready")
    warn_of_what_sessions_lack(app)
    assert "every session fails" not in caplog.text and "is not there" not in caplog.text
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    (prompts / "tier1-observe.md").write_text("Look around.")
    lacking = make_app(tmp_path / "lacking", CLAUDEOPS_CLAUDE_BIN="/nonexistent/claude", CLAUDEOPS_PROMPTS_DIR=str(prompts))
    warn_of_what_sessions_lack(lacking)
    assert ("the Claude CLI '/nonexistent/claude' is not an executable file, nor found on PATH: every session "
            "fails until it is installed (or CLAUDEOPS_CLAUDE_BIN names it)") in caplog.text
    assert f"the tier 2 prompt {prompts / 'tier2-investigate.md'} is not there" in caplog.text
    assert "tier 3 sessions fail until it is (CLAUDEOPS_PROMPTS_DIR)" in caplog.text
    assert "tier 1 prompt" not in caplog.text


def test_a_config_page_change_holding_over_the_environment_is_said_at_start(tmp_path, caplog, monkeypatch):
    from app.serve import say_what_the_config_page_holds_over
    monkeypatch.setenv("CLAUDEOPS_INTERVAL", "60")
    monkeypatch.setenv("CLAUDEOPS_MAX_TIER", "2")
    app = make_app(tmp_path, CLAUDEOPS_INTERVAL=60, CLAUDEOPS_MAX_TIER=2)
    with app.app_context():
        runtime.change({"CLAUDEOPS_INTERVAL": 0, "CLAUDEOPS_MAX_TIER": 2})
    say_what_the_config_page_holds_over(app)
    assert ("CLAUDEOPS_INTERVAL is 0, as changed on the Config page; the environment's 60 holds once that change "
            "is reset") in caplog.text
    assert "CLAUDEOPS_MAX_TIER is" not in caplog.text   # changed to what the environment says anyway


def test_the_schedulers_heartbeat_stays_out_of_the_log_below_debug(tmp_path):
    import logging
    make_app(tmp_path / "info")
    assert logging.getLogger("apscheduler").getEffectiveLevel() == logging.WARNING
    make_app(tmp_path / "debug", CLAUDEOPS_LOG_LEVEL="DEBUG")
    assert logging.getLogger("apscheduler").level == logging.NOTSET   # as the service's own level says


def test_two_saves_of_one_setting_at_the_same_moment_both_succeed(app, monkeypatch):
    """Each save reads the stored change, then writes it: the other's, saved
    in between, was once not seen, and the second insert of the row failed
    (a 500 for one of two operators or API clients)."""
    other = threading.Thread(target=lambda: _in_context(app, change, {"CLAUDEOPS_MEMORY_BUDGET": 3000}))
    stamp = runtime.utcnow

    def the_other_save_between_read_and_write():
        if other.ident is None:
            other.start()
            other.join(timeout=1)   # done at once, unless this save holds the lock: then after its commit
        return stamp()

    monkeypatch.setattr(runtime, "utcnow", the_other_save_between_read_and_write)
    change({"CLAUDEOPS_MEMORY_BUDGET": 2500})
    other.join(timeout=30)
    assert not other.is_alive() and not getattr(other, "failed", None)
    db.session.remove()
    assert runtime.overrides()["CLAUDEOPS_MEMORY_BUDGET"] == "3000"   # the later save's


def test_two_config_pages_saved_at_the_same_moment_do_not_both_hear_saved(app, monkeypatch):
    """Two tabs loaded alike save different values at once: the page's check
    (changed elsewhere since it was loaded?) and the save are one step, so
    the second is told of the first's change and saves nothing, as it would
    a moment later, instead of replacing it while both are told "Saved"."""
    from app.web import config_page
    first, second = app.test_client(), app.test_client()
    loaded = _FormFields(first.get("/config").get_data(as_text=True)).fields
    answers = {}

    def post(name, client, budget):
        answers[name] = client.post("/config", data=dict(loaded, CLAUDEOPS_MEMORY_BUDGET=budget))
    other = threading.Thread(target=post, args=("second", second, "3000"))
    save = config_page.change

    def the_other_tab_between_check_and_save(values):
        if other.ident is None:
            other.start()
            other.join(timeout=1)
        return save(values)

    monkeypatch.setattr(config_page, "change", the_other_tab_between_check_and_save)
    post("first", first, "2500")
    other.join(timeout=30)
    assert answers["first"].status_code == 302
    assert answers["second"].status_code == 409
    assert "changed to &#39;2500&#39; elsewhere" in answers["second"].get_data(as_text=True)
    db.session.remove()
    assert runtime.overrides()["CLAUDEOPS_MEMORY_BUDGET"] == "2500"


def _in_context(app, function, *args):
    with app.app_context():
        try:
            function(*args)
        except Exception as exc:
            threading.current_thread().failed = exc
            raise
