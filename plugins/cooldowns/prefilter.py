"""The PreToolUse hook's fast path, run as a plain script (standard library
only, no Claude Ops imports) before every Bash call of a session.

Starting ``claudeops`` costs about a second (the whole application is
imported); a session runs many shell commands and nearly none restart or
redeploy anything. So this script lets a call through at once when its
command cannot be one the full check recognises (no program name the
recogniser dispatches on appears in it, even with quotes and backslashes
taken out; ``oc`` as a word of its own), and hands every other call, stdin
and all, to ``claudeops cooldowns check-tool``.
tests/test_cooldowns_prefilter.py keeps PROGRAMS in step with the recogniser.
"""
import json
import os
import re
import sys
import tempfile

# Every program name plugins.cooldowns.commands.HANDLERS dispatches on
# contains one of these, or is one of WORD_PROGRAMS; and so does the path of
# an init script (init.d).
PROGRAMS = ("docker", "podman", "nerdctl", "systemctl", "service", "invoke-rc.d", "init.d", "supervisorctl",
            "kubectl", "k3s", "microk8s", "ansible-playbook", "helm")
# Names too short to look for inside other words (oc is in docker, /proc, …):
# only where a command word can be, after a space, an operator or a path's /,
# and before a space or an operator.
WORD_PROGRAMS = re.compile(r"(?<![^\s;&|()`/])oc(?![^\s;&|()`])")


def may_restart(raw: bytes) -> bool:
    try:
        call = json.loads(raw)   # not UTF-8 is a ValueError too
        command = call["tool_input"]["command"]
    except (ValueError, TypeError, KeyError):
        return True   # not what we expect: let the full check decide
    if not isinstance(command, str):
        return True
    return names_a_program(command)


def names_a_program(command: str) -> bool:
    # What bash joins (a backslash-newline) and what quoting hides, taken out.
    plain = command.lower().replace("\\\n", "").replace("\\", "").replace('"', "").replace("'", "")
    return any(program in plain for program in PROGRAMS) or WORD_PROGRAMS.search(plain) is not None


def main() -> int:
    raw = sys.stdin.buffer.read()
    if not may_restart(raw):
        return 0
    full_check = sys.argv[1:]
    # The call goes on to the full check as its stdin, from a file: a pipe
    # takes only so much (64 KiB) before a write to it waits for a reader.
    with tempfile.TemporaryFile() as spool:
        spool.write(raw)
        spool.flush()
        os.lseek(spool.fileno(), 0, os.SEEK_SET)
        os.dup2(spool.fileno(), 0)
    os.execv(full_check[0], full_check)


if __name__ == "__main__":
    sys.exit(main())
