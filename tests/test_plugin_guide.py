"""The complete plugin in docs/plugins.md works as the guide says, installed
as a real distribution with an entry point."""
from __future__ import annotations

import re

import jsonschema
import pytest

from app.config import PROJECT_ROOT
from app.plugins import ENTRY_POINT_GROUP
from tests import streamlines as sl
from tests.conftest import make_app

GUIDE = (PROJECT_ROOT / "docs" / "plugins.md").read_text()


def code_block(after: str, language: str) -> str:
    start = GUIDE.index(after)
    match = re.compile(rf"```{language}\n(.*?)```", re.S).search(GUIDE, start)
    return match.group(1)


def test_guide_plugin_end_to_end(tmp_path, monkeypatch, fake_cli):
    pyproject = code_block("`pyproject.toml`:", "toml")
    assert f'[project.entry-points."{ENTRY_POINT_GROUP}"]' in pyproject
    entry_name, module_name = re.search(r'^(\w+) = "(\w+)"$', pyproject, re.M).groups()

    site = tmp_path / "site"
    site.mkdir()
    (site / f"{module_name}.py").write_text(code_block("`claudeops_todo.py`:", "python"))
    dist_info = site / "claudeops_todo-0.1.0.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: claudeops-todo\nVersion: 0.1.0\n")
    (dist_info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{entry_name} = {module_name}\n")
    monkeypatch.syspath_prepend(str(site))

    app = make_app(tmp_path)
    assert app.extensions["claudeops.plugins"].get_plugin(entry_name) is not None
    fake_cli(sl.steps(sl.init(), sl.text("Backups look old.\n[TODO:nas] Check the <b>backup</b> job"),
                      sl.tool_use("echo '[TODO:evil] from a tool'"), sl.tool_result("[TODO:evil] from a tool"),
                      sl.text("[EVENT:warning:web] the cert expires in 9 days, [HTTP:495] seen [TODO:web] Renew the cert"),
                      sl.text("\n".join(f"[TODO:loop] task {n}" for n in range(25))),
                      sl.result()))
    with app.app_context():
        from app.sessions import control
        from app.sessions.manager import run_session
        session = run_session(control.claim(control.enqueue().id))
        assert session.status == "completed"
        assert "## Follow-up tasks" in session.system_prompt
        assert session.system_prompt.index("## Reporting events") < session.system_prompt.index("## Follow-up tasks")

    client = app.test_client()
    todos = client.get("/api/v1/todo").get_json()
    # The event's message ends where the plugin's marker begins, not at other
    # bracketed words; past the limit, no more tasks are stored.
    events = client.get("/api/v1/events").get_json()["events"]
    assert [event["message"] for event in events] == ["the cert expires in 9 days, [HTTP:495] seen"]
    assert todos["todos"][:2] == [{"service": "nas", "task": "Check the <b>backup</b> job", "session_id": 1},
                                  {"service": "web", "task": "Renew the cert", "session_id": 1}]
    assert [todo["task"] for todo in todos["todos"][2:]] == [f"task {n}" for n in range(18)]
    # Its documentation joins the API's, and the answer matches it.
    doc = client.get("/api/v1/openapi.json").get_json()
    answer = "#/paths/~1todo/get/responses/200/content/application~1json/schema"
    jsonschema.Draft202012Validator({**doc, "$ref": answer}).validate(todos)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator({**doc, "$ref": answer}).validate({"todos": [{"task": 5}]})
    page = client.get("/todo").get_data(as_text=True)
    assert "Check the &lt;b&gt;backup&lt;/b&gt; job" in page and "evil" not in page
    overview = client.get("/").get_data(as_text=True)
    assert "Open tasks" in overview and 'href="/todo"' in overview
    activity = client.get(f"/sessions/{session.id}").get_data(as_text=True)
    assert "todo:nas" in activity and activity.count("over 20 tasks") == 7
