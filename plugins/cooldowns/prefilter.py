"""The PreToolUse hook's fast path, run as a plain script (standard library
only, no Claude Ops imports) before every Bash call of a session.

Starting ``claudeops`` costs about a second (the whole application is
imported); a session runs many shell commands and nearly none restart or
redeploy anything. So this script lets a call through at once when its
command cannot be one the full check recognises (no program name the
recogniser dispatches on appears in it, even with quotes and backslashes
taken out; ``oc`` and ``qm`` as words of their own), and hands every other call, stdin
and all, to ``claudeops cooldowns check-tool``, whose answer it passes on;
if that fails or does not answer in time, a call with a restart's words
is denied.
tests/test_cooldowns_prefilter.py keeps PROGRAMS in step with the recogniser.
"""
import json
import re
import subprocess
import sys
import tempfile

# Every program name plugins.cooldowns.commands.HANDLERS dispatches on
# contains one of these, or is one of WORD_PROGRAMS; and so does the path of
# an init script (init.d).
PROGRAMS = ("docker", "podman", "nerdctl", "systemctl", "service", "invoke-rc.d", "init.d", "supervisorctl",
            "kubectl", "k3s", "microk8s", "minikube", "ansible-playbook", "helm", "pct", "virsh",
            "lxc", "incus", "multipass", "vagrant")
# The words of a restart (plugins.cooldowns.commands.SUSPECT, kept in step by
# tests/test_cooldowns_prefilter.py): a call holding one is denied when the
# full check cannot answer.
SUSPECT = re.compile(r"restart|\bstart\b|\bup\b|force-reload|condreload|--now\b|upgrade|install|rollback|rollout"
                     r"|ansible-playbook|reboot|\breset\b|\breload\b")
# What the agent is told with a denial (plugins.cooldowns.gate.ADVICE, likewise).
ADVICE = ("Do not try another way to do it. Report what you found with an [EVENT:…] marker instead, "
          "so that the operator can decide.")
# The full check answers within 24 s of its start (plugins/cooldowns/gate.py);
# this bounds its start too, inside the CLI's 30 s for the hook.
FULL_CHECK_SECONDS = 27
# Names too short to look for inside other words (oc is in docker, /proc, …;
# qm in a checksum): only where a command word can be, after a space, an
# operator or a path's /, and before a space or an operator.
WORD_PROGRAMS = re.compile(r"(?<![^\s;&|()`/<>])(?:oc|qm)(?![^\s;&|()`<>])")


def may_restart(raw: bytes) -> bool:
    try:
        call = json.loads(raw)   # not UTF-8 is a ValueError too
        command = call["tool_input"]["command"]
    except (ValueError, TypeError, KeyError):
        return True   # not what we expect: let the full check decide
    if not isinstance(command, str):
        return True
    cwd = call.get("cwd")
    if isinstance(cwd, str) and "init.d" in cwd and "/" in command:
        return True   # `./nginx restart` where the session works is an init script
    return names_a_program(command)


def names_a_program(command: str) -> bool:
    if "$'" in command:
        return True   # bash's $'…' may spell any word with escapes (d\x6fcker): the full check reads them
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
        spool.seek(0)
        try:
            checked = subprocess.run(full_check, stdin=spool, stdout=subprocess.PIPE, timeout=FULL_CHECK_SECONDS)
        except subprocess.TimeoutExpired:
            return _failed(raw, f"it took over {FULL_CHECK_SECONDS} s")
        except OSError as exc:
            return _failed(raw, f"it could not be started: {exc.strerror or exc}")
    if checked.returncode != 0:
        return _failed(raw, f"it exited with status {checked.returncode}; its error is in the CLI's log")
    sys.stdout.buffer.write(checked.stdout)
    return 0


def _failed(raw: bytes, why: str) -> int:
    """The full check did not answer: a call that may restart something is
    denied (the CLI would let it run unchecked: the agent can make the
    check fail, say by spoiling the state directory's key, as it runs as
    the service's user); one with no word of a restart is let be, so that
    a broken installation does not wedge every session."""
    sys.stderr.write(f"claudeops cooldowns check-tool failed: {why}\n")
    try:
        command = json.loads(raw)["tool_input"]["command"]
    except (ValueError, TypeError, KeyError):
        command = raw.decode("utf-8", "replace")
    if isinstance(command, str) and SUSPECT.search(command):
        print(deny_output(f"Claude Ops could not check this command against the cooldowns ({why}), so it was not "
                          f"run. {ADVICE}"))
    return 0


def deny_output(reason: str) -> str:
    """As plugins.cooldowns.gate.deny_output writes it (the tests hold them to one another)."""
    return json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                              "permissionDecisionReason": reason}})


if __name__ == "__main__":
    sys.exit(main())
