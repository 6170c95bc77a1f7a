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

from plugins.cooldowns.options import COMPOSE_GLOBAL, DOCKER_GLOBAL, KUBECTL_VALUE, Args, parse_args
from plugins.cooldowns.terminals import RunLine

DOCKERS = {"docker", "podman", "nerdctl"}
COMPOSES = {"docker-compose", "podman-compose"}
KUBECTLS = {"kubectl", "oc", "microk8s.kubectl"}
DOCKER_EXEC_VALUE = {"-e", "--env", "--env-file", "-u", "--user", "-w", "--workdir", "--detach-keys",
                     "--preserve-fds", "--preserve-fd"}
# podman exec's: the latest container, named by no word.
PODMAN_LATEST = ("-l", "--latest")
COMPOSE_EXEC_VALUE = {"-e", "--env", "--index", "-u", "--user", "-w", "--workdir"}
KUBECTL_EXEC_VALUE = KUBECTL_VALUE | {"-c", "--container", "--pod-running-timeout", "--image", "--target",
                                      "--profile", "--custom", "--env", "--copy-to", "--set-image"}
LXC_GLOBAL = {"--project"}
LXC_EXEC_VALUE = {"--env", "--cwd", "--user", "--group", "--mode", "--project"}
CRICTL_GLOBAL = {"-r", "--runtime-endpoint", "-i", "--image-endpoint", "-c", "--config", "-t", "--timeout"}
CRICTL_EXEC_VALUE = {"-e", "--env", "-w", "--workdir", "-u", "--user", "--timeout", "--transport"}
MACHINECTL_VALUE = {"--uid", "-E", "--setenv", "-M", "--machine", "-H", "--host", "-p", "--property", "-P", "-s",
                    "--signal", "--kill-whom", "-n", "--lines", "-o", "--output", "--format", "--verify",
                    "--max-addresses"}
HELP = ("-h", "--help")


def run_elsewhere(name: str, args: list[str]) -> Optional[list[RunLine]]:
    """The command ``name ARGS`` runs inside a container, a pod or a guest,
    if it is one that does (``docker exec``, ``docker compose exec``,
    ``kubectl exec`` and ``debug … --``, ``oc rsh``, ``crictl exec``,
    ``lxc``/``incus exec``, ``lxc-attach``, Proxmox's ``pct exec`` and
    ``qm guest exec``, ``machinectl shell``, ``multipass exec``,
    ``distrobox enter``, ``vagrant ssh -c``); None for any other, which is
    read as itself. A help or a dry run runs nothing."""
    if name in DOCKERS:
        top = parse_args(args, DOCKER_GLOBAL, stop_at_positional=True)
        rest = top.positionals[1:] if top.positionals[:1] == ["container"] else top.positionals
        if rest[:1] == ["exec"]:
            return None if top.has(*HELP) else _docker_exec(name, rest[1:])
        return _compose_exec(rest[1:], top) if rest[:1] == ["compose"] else None
    if name in COMPOSES:
        return _compose_exec(args, Args())
    if name in KUBECTLS:
        return _kubectl(name, args)
    if name in ("k3s", "microk8s") and args[:1] == ["kubectl"]:
        return _kubectl(name, args[1:])
    if name == "minikube" and args[:2] == ["kubectl", "--"]:   # minikube kubectl -- ARGS
        return _kubectl(name, args[2:])
    if name == "crictl" or (name == "k3s" and args[:1] == ["crictl"]):
        rest = parse_args(args[1:] if name == "k3s" else args, CRICTL_GLOBAL, stop_at_positional=True).positionals
        return _command(_after_options(rest[1:], CRICTL_EXEC_VALUE)[1:]) if rest[:1] == ["exec"] else None
    if name in ("lxc", "incus"):
        top = parse_args(args, LXC_GLOBAL, stop_at_positional=True)
        if top.positionals[:1] != ["exec"]:
            return None
        return _after_the_name(top.positionals[1:], LXC_EXEC_VALUE, options_anywhere=True)
    if name == "lxc-attach":
        return _after_dashes(args)
    if name == "pct" and args[:1] == ["exec"]:
        return _after_the_name(args[1:], set())
    if name == "qm" and args[:2] == ["guest", "exec"]:
        return _after_the_name(args[2:], {"--timeout", "--pass-stdin", "--synchronous"})
    if name == "machinectl":
        rest = parse_args(args, MACHINECTL_VALUE, stop_at_positional=True).positionals
        return _command(_after_options(rest[1:], MACHINECTL_VALUE)[1:]) if rest[:1] == ["shell"] else None
    if name == "multipass" and args[:1] == ["exec"]:
        return _after_the_name(args[1:], {"-d", "--working-directory"})
    if name == "distrobox" and args[:1] == ["enter"]:
        return _after_dashes(args[1:])
    if name == "vagrant" and args[:1] == ["ssh"]:
        line = parse_args(args[1:], {"-c", "--command"}).value("-c", "--command")
        return [RunLine(line, False)] if line else None
    return None


def _docker_exec(name: str, args: list[str]) -> list[RunLine]:
    """``docker exec [options] CONTAINER COMMAND …``: its options end at the container."""
    options = parse_args(args, DOCKER_EXEC_VALUE, stop_at_positional=True)
    if options.has(*HELP):
        return []
    latest = name == "podman" and options.has(*PODMAN_LATEST)
    return _command(options.positionals if latest else options.positionals[1:])


def _compose_exec(args: list[str], docker_options: Args) -> Optional[list[RunLine]]:
    top = parse_args(args, COMPOSE_GLOBAL, stop_at_positional=True)
    if top.positionals[:1] != ["exec"]:
        return None
    if top.has("--dry-run", *HELP) or docker_options.has(*HELP):
        return []
    options = parse_args(top.positionals[1:], COMPOSE_EXEC_VALUE, stop_at_positional=True)
    return [] if options.has(*HELP) else _command(options.positionals[1:])


def _kubectl(name: str, args: list[str]) -> Optional[list[RunLine]]:
    """``kubectl [options] exec [options] POD [options] -- COMMAND …`` (its
    options anywhere before ``--``; in the old form, without ``--``, on
    through the command), ``kubectl debug … -- COMMAND …``, ``oc rsh POD
    COMMAND …``."""
    before, dashes, after = _split_at_dashes(args)
    at = _subcommand_at(before)
    sub = before[at] if at is not None else None
    if sub not in ("exec", "debug", "rsh") or (sub == "rsh" and name != "oc"):
        return None
    if parse_args(before, KUBECTL_EXEC_VALUE).has(*HELP):
        return []
    if sub == "rsh":   # oc rsh [options] POD [COMMAND …]: its options end at the pod
        return _command(parse_args(before[at + 1:] + (["--"] + after if dashes else []), KUBECTL_EXEC_VALUE,
                                   stop_at_positional=True).positionals[1:])
    if dashes:
        return _command(after)
    return _command(parse_args(before[at + 1:], KUBECTL_EXEC_VALUE).positionals[1:]) if sub == "exec" else []


def _subcommand_at(words: list[str]) -> Optional[int]:
    """Where kubectl's subcommand is: its first word that is no option nor an option's value."""
    i = 0
    while i < len(words):
        if not words[i].startswith("-") or words[i] == "-":
            return i
        i += 2 if words[i] in KUBECTL_EXEC_VALUE else 1   # --namespace prod; --namespace=prod is one word
    return None


def _after_the_name(args: list[str], with_value: set[str], options_anywhere: bool = False) -> list[RunLine]:
    """``lxc exec NAME [options] -- COMMAND …``, ``pct exec ID -- COMMAND …``:
    the command after ``--``, else after the name (and, where the tool
    reads options anywhere, after its options)."""
    before, dashes, after = _split_at_dashes(args)
    if dashes:
        return _command(after)
    if options_anywhere:
        return _command(parse_args(before, with_value).positionals[1:])
    return _command(parse_args(before, with_value, stop_at_positional=True).positionals[1:])


def _after_dashes(args: list[str]) -> list[RunLine]:
    _, dashes, after = _split_at_dashes(args)
    return _command(after) if dashes else []


def _after_options(args: list[str], with_value: set[str]) -> list[str]:
    return parse_args(args, with_value, stop_at_positional=True).positionals


def _split_at_dashes(args: list[str]) -> tuple[list[str], bool, list[str]]:
    if "--" not in args:
        return args, False, []
    at = args.index("--")
    return args[:at], True, args[at + 1:]


def _command(words: list[str]) -> list[RunLine]:
    """A command given as its words (exec's, not a shell's line), run where the caller's directory means nothing."""
    return [RunLine(shlex.join(words), False)] if words else []
