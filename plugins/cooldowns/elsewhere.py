"""The commands that container and guest tools run inside what they manage.

``docker exec web supervisorctl restart app``, ``kubectl exec deploy/web --
supervisorctl restart app`` and Proxmox's ``pct exec 101 -- systemctl
restart nginx`` restart a service as ``ssh host …`` does: ``shell.py`` reads
the command found here as it reads ssh's, in a directory it cannot know.
Pure, and unit tested with the rest of the recognition.
"""
from __future__ import annotations

import shlex
from typing import Optional

from plugins.cooldowns.options import COMPOSE_GLOBAL, DOCKER_GLOBAL, KUBECTL_VALUE, parse_args
from plugins.cooldowns.terminals import RunLine

DOCKERS = {"docker", "podman", "nerdctl"}
COMPOSES = {"docker-compose", "podman-compose"}
DOCKER_EXEC_VALUE = {"-e", "--env", "--env-file", "-u", "--user", "-w", "--workdir", "--detach-keys"}
COMPOSE_EXEC_VALUE = {"-e", "--env", "--index", "-u", "--user", "-w", "--workdir"}
KUBECTL_EXEC_VALUE = KUBECTL_VALUE | {"-c", "--container", "--pod-running-timeout"}
LXC_EXEC_VALUE = {"--env", "--cwd", "--user", "--group", "--mode", "--project", "--remote"}
MACHINECTL_VALUE = {"--uid", "-E", "--setenv", "-M", "--machine", "-H", "--host"}


def run_elsewhere(name: str, args: list[str]) -> Optional[list[RunLine]]:
    """The command ``name ARGS`` runs inside a container, a pod or a guest,
    if it is one that does (``docker exec``, ``docker compose exec``,
    ``kubectl exec``, ``lxc``/``incus exec``, ``pct exec``, ``machinectl
    shell``); None for any other, which is read as itself."""
    if name in DOCKERS:
        rest = parse_args(args, DOCKER_GLOBAL, stop_at_positional=True).positionals
        if rest[:1] == ["container"]:
            rest = rest[1:]
        if rest[:1] == ["exec"]:
            return _command(parse_args(rest[1:], DOCKER_EXEC_VALUE, stop_at_positional=True).positionals[1:])
        if rest[:1] == ["compose"]:
            return _compose_exec(rest[1:])
        return None
    if name in COMPOSES:
        return _compose_exec(args)
    if name in ("kubectl", "oc"):
        return _kubectl_exec(args)
    if name in ("k3s", "microk8s") and args[:1] == ["kubectl"]:
        return _kubectl_exec(args[1:])
    if name in ("lxc", "incus") and args[:1] == ["exec"]:
        return _after_the_name(args[1:], LXC_EXEC_VALUE)
    if name == "pct" and args[:1] == ["exec"]:
        return _after_the_name(args[1:], set())
    if name == "machinectl":
        rest = parse_args(args, MACHINECTL_VALUE, stop_at_positional=True).positionals
        return _command(rest[2:]) if rest[:1] == ["shell"] else None
    return None


def _compose_exec(args: list[str]) -> Optional[list[RunLine]]:
    rest = parse_args(args, COMPOSE_GLOBAL, stop_at_positional=True).positionals
    if rest[:1] != ["exec"]:
        return None
    return _command(parse_args(rest[1:], COMPOSE_EXEC_VALUE, stop_at_positional=True).positionals[1:])


def _kubectl_exec(args: list[str]) -> Optional[list[RunLine]]:
    """``kubectl [options] exec [options] POD [options] -- COMMAND …`` (its
    options anywhere before ``--``), or the old form without ``--``."""
    before, dashes, after = _split_at_dashes(args)
    if parse_args(before, KUBECTL_EXEC_VALUE).positionals[:1] != ["exec"]:
        return None
    if dashes:
        return _command(after)
    after_exec = before[before.index("exec") + 1:]
    return _command(parse_args(after_exec, KUBECTL_EXEC_VALUE, stop_at_positional=True).positionals[1:])


def _after_the_name(args: list[str], with_value: set[str]) -> list[RunLine]:
    """``lxc exec NAME [options] -- COMMAND …`` and ``pct exec ID -- COMMAND …``."""
    before, dashes, after = _split_at_dashes(args)
    if dashes:
        return _command(after)
    return _command(parse_args(before, with_value, stop_at_positional=True).positionals[1:])


def _split_at_dashes(args: list[str]) -> tuple[list[str], bool, list[str]]:
    if "--" not in args:
        return args, False, []
    at = args.index("--")
    return args[:at], True, args[at + 1:]


def _command(words: list[str]) -> list[RunLine]:
    """A command given as its words (exec's, not a shell's line), run where the caller's directory means nothing."""
    return [RunLine(shlex.join(words), False)] if words else []
