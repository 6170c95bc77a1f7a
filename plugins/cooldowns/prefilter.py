"""The PreToolUse hook's fast path, run as a plain script (standard library
only, no Claude Ops imports) before every Bash call of a session.

Starting ``claudeops`` costs about a second (the whole application is
imported); a session runs many shell commands and nearly none restart or
redeploy anything. So this script lets a call through at once when its
command cannot be one the full check recognises (no program name the
recogniser dispatches on appears in it, even with quotes and backslashes
taken out), and hands every other call, stdin and all, to ``claudeops
cooldowns check-tool``. tests/test_cooldowns_prefilter.py keeps PROGRAMS in
step with the recogniser.
"""
import json
import os
import sys

# Every program name plugins.cooldowns.commands.HANDLERS dispatches on
# contains one of these.
PROGRAMS = ("docker", "podman", "systemctl", "service", "kubectl", "ansible-playbook", "helm")


def may_restart(raw: str) -> bool:
    try:
        call = json.loads(raw)
        command = call["tool_input"]["command"]
    except (ValueError, TypeError, KeyError):
        return True   # not what we expect: let the full check decide
    if not isinstance(command, str):
        return True
    plain = command.lower().replace("\\", "").replace('"', "").replace("'", "")
    return any(program in plain for program in PROGRAMS)


def main() -> int:
    raw = sys.stdin.read()
    if not may_restart(raw):
        return 0
    full_check = sys.argv[1:]
    read_end, write_end = os.pipe()
    os.write(write_end, raw.encode())   # a hook's input is small; fits the pipe buffer
    os.close(write_end)
    os.dup2(read_end, 0)
    os.execv(full_check[0], full_check)


if __name__ == "__main__":
    sys.exit(main())
