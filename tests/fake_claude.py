#!/usr/bin/env python3
"""A stand-in for the Claude Code CLI, for session tests.

It speaks the real stream-json format (lines built by tests/streamlines.py
from the shapes in tests/fixtures/) and follows a script named by
``FAKE_CLAUDE_SCRIPT``: a JSON list of steps, each one of

    {"line": {...}}          print one JSON object as a line
    {"raw": "text"}          print text as is (a newline is added)
    {"big_line": N}          print one line of N bytes (not JSON)
    {"sleep": seconds}
    {"orphan": seconds}      start a grandchild that keeps stdout open that long
                             (its pid goes to ``FAKE_CLAUDE_ORPHAN_PID`` when set)
    {"orphan": seconds, "leaves_group": true}
                             the same, in a session (and process group) of its own
    {"stderr": "text"}
    {"touch": "path"}        create a file once what came before is written
    {"exit": code}
    {"trap_signals": true}   from here on end on SIGTERM, SIGINT and SIGHUP as
                             the real CLI does: exit 143, 0 and 129
    {"ignore_sigterm": true} from here on ignore SIGTERM, as a CLI stuck in a
                             tool call may (only SIGKILL ends it)

It reads its arguments as the real CLI does (a commander program): an
option it does not know, a prompt that begins with "-" among them, is
refused with the real CLI's message and status 1; "--" ends the options,
and the tool lists take every value up to the next option.

It records its argv and the prompt it read (JSON) to ``FAKE_CLAUDE_ARGV``
when that is set, its pid and process group ("<pid> <pgid>") to
``FAKE_CLAUDE_PID`` when that is set, and appends one line per run (session
id, parent pid, grandparent pid, start and end time) to ``FAKE_CLAUDE_RUNS``
when that is set.
"""
import json
import os
import signal
import subprocess
import sys
import time

# What the real CLI (2.1.197) exits with when its process group is sent each signal.
REAL_CLI_SIGNAL_EXITS = {signal.SIGTERM: 143, signal.SIGINT: 0, signal.SIGHUP: 129}
FLAGS = {"-p", "--print", "--verbose", "--strict-mcp-config"}
ONE_VALUE = {"--output-format", "--model", "--append-system-prompt", "--setting-sources", "--settings", "--mcp-config",
             "--max-budget-usd"}
MANY_VALUES = {"--allowedTools", "--disallowedTools"}


class UnknownOption(Exception):
    pass


def read_prompt(args: list[str]) -> str | None:
    """The positional prompt, found as the real CLI finds it."""
    positional = []
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "--":
            positional += args[i:]
            break
        if arg in ONE_VALUE:
            i += 1   # its value, whatever it begins with
        elif arg in MANY_VALUES:
            while i < len(args) and not is_option(args[i]):
                i += 1
        elif is_option(arg):
            if arg not in FLAGS:
                raise UnknownOption(arg)
        else:
            positional.append(arg)
    return positional[0] if positional else None


def is_option(arg: str) -> bool:
    return len(arg) > 1 and arg.startswith("-")


def main() -> int:
    try:
        prompt = read_prompt(sys.argv[1:])
    except UnknownOption as exc:
        sys.stderr.write(f"error: unknown option '{exc}'\n")
        return 1
    if os.environ.get("FAKE_CLAUDE_PID"):
        with open(os.environ["FAKE_CLAUDE_PID"], "w") as handle:
            handle.write(f"{os.getpid()} {os.getpgrp()}")
    if os.environ.get("FAKE_CLAUDE_ARGV"):
        with open(os.environ["FAKE_CLAUDE_ARGV"], "w") as handle:
            json.dump({"argv": sys.argv[1:], "prompt": prompt,
                       "env": {k: v for k, v in os.environ.items() if k.startswith(("CLAUDEOPS_", "ANTHROPIC_"))}},
                      handle)
    started = time.time()
    with open(os.environ["FAKE_CLAUDE_SCRIPT"]) as handle:
        steps = json.load(handle)
    try:
        return play(steps)
    finally:
        if os.environ.get("FAKE_CLAUDE_RUNS"):
            with open(os.environ["FAKE_CLAUDE_RUNS"], "a") as handle:
                handle.write(json.dumps({"session": os.environ.get("CLAUDEOPS_SESSION_ID"), "ppid": os.getppid(),
                                         "grandparent": parent_of(os.getppid()),
                                         "started": started, "ended": time.time()}) + "\n")


def parent_of(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as handle:
        return int(handle.read().rsplit(")", 1)[1].split()[1])


def play(steps: list) -> int:
    out = sys.stdout.buffer
    for step in steps:
        if "line" in step:
            out.write(json.dumps(step["line"]).encode() + b"\n")
        elif "raw" in step:
            out.write(step["raw"].encode("utf-8", "surrogateescape") + b"\n")
        elif "big_line" in step:
            chunk = b"x" * (1024 * 1024)
            remaining = step["big_line"]
            while remaining > 0:
                out.write(chunk[:remaining])
                remaining -= len(chunk)
            out.write(b"\n")
        elif "sleep" in step:
            out.flush()
            time.sleep(step["sleep"])
        elif "orphan" in step:
            out.flush()
            # Inherits stdout, so the pipe stays open after this process exits.
            child = subprocess.Popen([sys.executable, "-c", f"import time; time.sleep({step['orphan']})"],
                                     start_new_session=step.get("leaves_group", False))
            if os.environ.get("FAKE_CLAUDE_ORPHAN_PID"):
                with open(os.environ["FAKE_CLAUDE_ORPHAN_PID"], "w") as handle:
                    handle.write(str(child.pid))
        elif "touch" in step:
            out.flush()
            open(step["touch"], "a").close()
        elif "stderr" in step:
            sys.stderr.write(step["stderr"] + "\n")
            sys.stderr.flush()
        elif "exit" in step:
            out.flush()
            return step["exit"]
        elif "ignore_sigterm" in step:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        elif "trap_signals" in step:
            for signum, code in REAL_CLI_SIGNAL_EXITS.items():
                signal.signal(signum, lambda _signum, _frame, code=code: os._exit(code))
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
