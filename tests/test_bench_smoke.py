"""The benchmarks (bench/) run end to end at tiny sizes, so they cannot rot.
Nothing here is timed: the figures are for ``bench/run``, on purpose, by hand."""
from __future__ import annotations

import json

import pytest

from bench import recorded_stream
from bench.__main__ import main, options, run
from bench.ingest import bare_loop

TINY = ["--memories", "20,60", "--events", "20,300", "--start-memories", "12,40", "--stream-lines", "300",
        "--stream-markers", "60", "--memory-lines", "100,300", "--repeat", "1", "--ingest-repeat", "1"]

FIGURES = ["Memories page (GET /memories)", "Memories poll (HTMX table, every 5 s)", "Events page (GET /events)",
           "Events poll (HTMX rows, every 5 s)", "Events page halfway back (GET /events?before=…)",
           "GET /api/v1/memories", "GET /api/v1/memories?service=…&active=true",
           "GET /api/v1/events", "GET /api/v1/events?level=critical", "Memory context build",
           "Session start (decay + context)", "Ingest speed vs bare loop (300 lines, 60 markers)",
           "Ingest speed …, event markers only", "Ingest speed …, no markers",
           "Ingest at 60 memories vs 20 (same stream)", "Pipeline memory (tracemalloc peak)"]


def test_every_figure_is_measured(tmp_path):
    figures = run(options(TINY), tmp_path)
    assert [f.name for f in figures] == FIGURES
    for figure in figures:
        assert figure.baseline > 0 and figure.measured > 0, figure
        assert figure.ratio == pytest.approx(figure.baseline / figure.measured if figure.at_least
                                             else figure.measured / figure.baseline)


def test_the_command_prints_the_table_and_exits_0(tmp_path, capsys):
    assert main(TINY + ["--only", "reads", "--markdown", "--workdir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "GET /api/v1/events?level=critical" in out and "| Memory context build |" in out
    assert "Ingest" not in out   # --only reads


def test_the_recording_is_real_cli_lines_with_exactly_the_markers_asked(tmp_path):
    recording = recorded_stream.write(tmp_path / "s.ndjson", 1000, 250)
    lines = recorded_stream.read_lines(recording.path)
    assert len(lines) == 1000 and bare_loop(lines) == 250
    kinds = [json.loads(line)["type"] for line in lines]
    assert kinds[0] == "system" and kinds[-1] == "result" and {"assistant", "user"} <= set(kinds)
    tool_output = [json.loads(line) for line in lines if b'"tool_result"' in line]
    assert any("[MEMORY:" in line["message"]["content"][0]["content"] for line in tool_output)


@pytest.mark.parametrize("bad", [["--memories", "100"], ["--memories", "100,10"], ["--only", "writes"],
                                 ["--repeat", "0"], ["--stream-lines", "100", "--memory-lines", "50,200"]])
def test_bad_options_are_refused_with_a_message(bad, capsys):
    with pytest.raises(SystemExit) as exited:
        options(bad)
    assert exited.value.code == 2 and "error:" in capsys.readouterr().err
