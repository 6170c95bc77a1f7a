"""The hook's fast path: lets a call through at once when it cannot be a
restart or redeployment, and hands everything else to the full check."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from plugins.cooldowns import PREFILTER
from plugins.cooldowns.commands import HANDLERS, recognise
from plugins.cooldowns.prefilter import PROGRAMS, WORD_PROGRAMS, may_restart


def call(command) -> str:
    return json.dumps({"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": command}})


def test_every_program_the_recogniser_knows_passes_the_prefilter():
    for program in HANDLERS:
        assert any(name in program for name in PROGRAMS) or WORD_PROGRAMS.fullmatch(program), program
        assert may_restart(call(f"sudo {program} restart x")), program


@pytest.mark.parametrize("command", [
    "docker restart jellyfin", "sudo systemctl restart caddy", 'd"ock"er restart jellyfin', "d\\ocker restart x",
    "bash -c 'docker compose up -d --force-recreate web'", "HELM upgrade web chart/", "rc-service nginx restart",
    "oc rollout restart deployment/web", "/usr/local/bin/oc -n media rollout restart dc/web", "o\\c rollout undo dc/web",
    "bash -c 'oc rollout restart deployment/web'", "x=$(oc rollout restart deployment/web)", "true&&oc rollout undo",
    "qm reboot 100", "/usr/sbin/qm start 100", "ssh pve 'q\\m reset 100'", "pct reboot 101", "virsh start db",
    "lxc restart web", "incus start web", "multipass restart", "vagrant reload web",
    # a redirection glued to the name; bash's $'…', whose escapes may spell any name
    "oc</dev/null rollout restart deployment/web", "oc>&2 rollout restart dc/web", "qm>/dev/null reboot 101",
    "qm<&- reboot 101", "dock$''er restart web", "$'\\x64ocker' restart web",
])
def test_possible_restarts_go_to_the_full_check(command):
    assert may_restart(call(command))


@pytest.mark.parametrize("command", ["ls -la", "df -h", "curl -s localhost:8096/health", "cat /etc/hosts", "ls /proc",
                                     "grep -c MHz /proc/cpuinfo", "ls -l /srv/oc/data", "curl -s localhost/oc-status"])
def test_everyday_commands_are_let_through(command):
    assert not may_restart(call(command))
    assert recognise(command) == []


@pytest.mark.parametrize("command", ["docker ps", "cat /etc/hosts", "ls /proc", "podman logs -f oc-web", "echo doc",
                                     "sha256sum qmk.bin", "ls /srv/qm-data"])
def test_oc_and_qm_are_looked_for_only_as_words_of_their_own(command):
    assert WORD_PROGRAMS.search(command) is None


def test_a_script_run_by_its_path_where_init_scripts_are_goes_to_the_full_check():
    from_init_d = json.loads(call("./nginx restart")) | {"cwd": "/etc/init.d"}
    assert may_restart(json.dumps(from_init_d))
    assert recognise("./nginx restart", from_init_d["cwd"])
    assert not may_restart(json.dumps(json.loads(call("./nginx restart")) | {"cwd": "/opt/app"}))
    assert not may_restart(json.dumps(json.loads(call("ls -la")) | {"cwd": "/etc/init.d"}))


@pytest.mark.parametrize("raw", ["not json", "{}", json.dumps({"tool_input": {"command": 5}})])
def test_unexpected_input_goes_to_the_full_check(raw):
    assert may_restart(raw)


def test_the_script_runs_the_full_check_only_when_needed(tmp_path):
    ran = tmp_path / "full-check-ran"
    full_check = tmp_path / "full_check.py"
    full_check.write_text(f"#!{sys.executable}\nimport sys\nopen({str(ran)!r}, 'wb').write(sys.stdin.buffer.read())\n"
                          "print('decision')\n")
    full_check.chmod(0o755)

    def run(command):
        return subprocess.run([sys.executable, "-S", str(PREFILTER), str(full_check)], input=call(command),
                              capture_output=True, text=True, timeout=30)
    quiet = run("uptime")
    assert (quiet.returncode, quiet.stdout, ran.exists()) == (0, "", False)
    loud = run("docker restart jellyfin")
    assert loud.stdout == "decision\n"
    assert json.loads(ran.read_text())["tool_input"]["command"] == "docker restart jellyfin"   # stdin handed on
    # More than a pipe holds (64 KiB): handed on whole, not stuck.
    long = "cat > /etc/app.conf <<'END'\n" + "setting = value\n" * 6_000 + "END\ndocker restart jellyfin"
    assert run(long).stdout == "decision\n"
    assert json.loads(ran.read_text())["tool_input"]["command"] == long
    # Not UTF-8: the full check decides (it refuses such a call), the prefilter does not fail.
    broken = subprocess.run([sys.executable, "-S", str(PREFILTER), str(full_check)],
                            input=b'{"tool_input": {"command": "docker restart \xff"}}', capture_output=True, timeout=30)
    assert (broken.returncode, broken.stdout) == (0, b"decision\n")


def test_the_prefilter_knows_a_restarts_words_and_denies_as_the_full_check_does():
    from plugins.cooldowns import commands, gate, prefilter
    assert prefilter.SUSPECT.pattern == commands.SUSPECT.pattern
    assert prefilter.ADVICE == gate.ADVICE
    assert prefilter.deny_output("over the limit") == gate.deny_output("over the limit")


def test_a_full_check_that_fails_denies_a_restart_and_lets_anything_else_be(tmp_path):
    """The CLI runs a call whose hook fails: the agent, the service's user,
    could make the check fail (spoil the state directory's key) and restart
    at will. So a failed check denies what has a restart's words."""
    failing = tmp_path / "failing_check.py"
    failing.write_text(f"#!{sys.executable}\nimport sys\nsys.stderr.write('Traceback: broken\\n')\nsys.exit(1)\n")
    failing.chmod(0o755)

    def run(command):
        return subprocess.run([sys.executable, "-S", str(PREFILTER), str(failing)], input=call(command),
                              capture_output=True, text=True, timeout=30)
    denied = run("docker restart jellyfin")
    assert denied.returncode == 0
    output = json.loads(denied.stdout)["hookSpecificOutput"]
    assert output["permissionDecision"] == "deny"
    assert output["permissionDecisionReason"].startswith(
        "Claude Ops could not check this command against the cooldowns (it exited with status 1; its error is in "
        "the CLI's log), so it was not run.")
    assert "Traceback: broken" in denied.stderr and "check-tool failed" in denied.stderr
    let_be = run("docker ps")
    assert (let_be.returncode, let_be.stdout) == (0, "")
    for guest_restart in ("qm reboot 101", "virsh reset web", "vagrant reload web",
                          # every word of a restart, those of systemctl's rarer actions too
                          "C='systemctl enable --now nginx'; eval \"$C\"",
                          "python3 -c 'import os; os.system(\"systemctl condreload nginx\")'"):
        assert json.loads(run(guest_restart).stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert run("qm status 101").stdout == ""
    missing = subprocess.run([sys.executable, "-S", str(PREFILTER), str(tmp_path / "no-such-check")],
                             input=call("systemctl restart nginx"), capture_output=True, text=True, timeout=30)
    assert "it could not be started" in json.loads(missing.stdout)["hookSpecificOutput"]["permissionDecisionReason"]


def test_a_full_check_that_does_not_answer_in_time_denies_a_restart(tmp_path, monkeypatch, capsys):
    import io

    from plugins.cooldowns import prefilter
    stuck = tmp_path / "stuck_check.py"
    stuck.write_text(f"#!{sys.executable}\nimport time\ntime.sleep(60)\n")
    stuck.chmod(0o755)
    monkeypatch.setattr(prefilter, "FULL_CHECK_SECONDS", 0.5)
    monkeypatch.setattr(sys, "argv", ["prefilter.py", str(stuck)])
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(call("docker restart jellyfin").encode())))
    assert prefilter.main() == 0
    reason = json.loads(capsys.readouterr().out)["hookSpecificOutput"]["permissionDecisionReason"]
    assert reason.startswith("Claude Ops could not check this command against the cooldowns (it took over 0.5 s)")
