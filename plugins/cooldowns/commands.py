"""Which restarts and redeployments a Bash command line would do.

``recognise("sudo docker restart jellyfin && systemctl restart smbd")`` gives
a restart of jellyfin and one of smbd. The list of what is recognised is in
docs/cooldowns.md; a test holds each case. A target that cannot be read
from the text (``docker restart $name``) is recognised with ``service=None``
so that the hook can refuse it instead of letting it pass uncounted.
"""
from __future__ import annotations

import posixpath
import re
import shlex
from dataclasses import dataclass, field, replace
from typing import Callable, Optional

from plugins.cooldowns.limits import REDEPLOYMENT, RESTART
from plugins.cooldowns.options import COMPOSE_GLOBAL, DOCKER_GLOBAL, KUBECTL_VALUE, Args, parse_args
from plugins.cooldowns.prefilter import names_a_program
from plugins.cooldowns.shell import (FROM_OTHER_LANGUAGE, FROM_RUN_TIME_LINE, FROM_SHELL_INPUT, HEREDOC_CODE,
                                     PROCESS_SUBSTITUTED, RUN_TIME_PARTS,
                                     SimpleCommand, TooDeep, is_literal, simple_commands, wholly_at_run_time)

SERVICE_NAME = re.compile(r"[a-z0-9][a-z0-9_.@-]{0,99}")
# Words of a command that may restart or redeploy something: where the text
# cannot say what a command is, these make it one to refuse, not to let pass.
SUSPECT = re.compile(r"restart|\bstart\b|\bup\b|force-reload|condreload|--now\b|upgrade|install|rollback|rollout"
                     r"|ansible-playbook|reboot|\breset\b|\breload\b")


@dataclass(frozen=True)
class Recognised:
    action: str
    service: Optional[str]      # normalised; None when the text does not say which service
    target: str                 # as written, for messages
    command: str                # the simple command it came from


@dataclass
class _Line:
    """What earlier commands of the same line did: ``docker compose pull``
    (or ``build``) before ``up`` makes that ``up`` a redeployment."""

    pulled: set = field(default_factory=set)    # (project, service or "*")


def normalise_service(raw: str) -> Optional[str]:
    """One spelling per service: lower case, no ``.service``; None for names
    that are not literal (variables, globs, substitutions)."""
    name = raw.strip().lower().removesuffix(".service")
    return name if SERVICE_NAME.fullmatch(name) else None


def recognise(line: str, cwd: Optional[str] = None) -> list[Recognised]:
    state = _Line()
    found: list[Recognised] = []
    try:
        commands = list(simple_commands(line, cwd))
    except TooDeep:
        return _unread(line, "a command nested too deeply to read")
    for command in commands:
        if command.name == FROM_SHELL_INPUT:
            found += _unread(line, "the commands a shell reads from its input")
            continue
        if command.name == FROM_RUN_TIME_LINE:   # `bash -c "$cmd"`, `eval "$(minikube docker-env)"`
            found += _unread(line, "a command line made at run time", suspect=True)
            continue
        if command.name == FROM_OTHER_LANGUAGE:
            found += _unread(_code(command, line), "the commands another language runs (python -c, perl -e, …)",
                             suspect=True)
            continue
        default = _default_name(command.words[0])
        if default is not None:   # `${KUBECTL:-kubectl} rollout status …`: read as its default names it
            command = replace(command, words=[default, *command.words[1:]])
        handler = HANDLERS.get(command.name) or (_init_script if _is_init_script(command) else None)
        if handler is None:
            if _named_at_run_time(command.words[0]):   # `$D restart web`, `"$(which systemctl)" restart x`
                found += _unread(line, "a command named at run time", suspect=True, within=command.text())
            continue
        if _asks_for_help(command.words[1:]):
            continue
        recognised = handler(command, command.words[1:], state)
        if not recognised and any(_spelt_at_run_time_as_suspect(word) for word in command.words[1:]):
            recognised = _unread(line, "a command whose words are spelt at run time")   # `docker rest${x}art web`
        found += recognised
    # One tool call restarts a service once, however it is spelt (stop + start, pull + up).
    unique: dict[tuple, Recognised] = {}
    for item in found:
        unique.setdefault((item.action, item.service or item.target), item)
    return list(unique.values())


def _action_at_run_time(command: SimpleCommand) -> list[Recognised]:
    """A recognised program whose action the shell puts in at run time
    (``docker $(echo restart) web``, ``systemctl $ACTION nginx``): it may be
    a restart, of what the text cannot say."""
    return [Recognised(RESTART, None, "an action spelt at run time", command.text())]


def _unread(line: str, what: str, suspect: bool = False, within: Optional[str] = None) -> list[Recognised]:
    """Unread, so unknown: a line that may restart something (one the
    prefilter would let on) is refused, not let through uncounted. With
    ``suspect``, only if it also holds a word of a restart (in ``within``,
    the unread part, when given): code or a command that merely names a
    program (``subprocess.run(["docker", "ps"])``) is let be."""
    if names_a_program(line) and (not suspect or SUSPECT.search(within or line)):
        return [Recognised(RESTART, None, what, line[:200])]
    return []


# ${NAME:-default}, ${NAME-default}, ${NAME:=default}: a literal default.
_DEFAULTED = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*:?[-=](?P<default>[^}$`]+)\}")


def _default_name(word: str) -> Optional[str]:
    """The program a command named by a variable with a literal default
    runs, as far as the text can say."""
    match = _DEFAULTED.fullmatch(word)
    return match["default"] if match else None


def _named_at_run_time(word: str) -> bool:
    """A command's name the shell spells at run time from nothing the text
    shows (``$D``, ``"$(which systemctl)"``, ``$'systemctl'``), or around a
    recognised program's name; ``"$VENV/bin/pip"`` names its program."""
    if is_literal(word):
        return False
    shown = posixpath.basename(RUN_TIME_PARTS.sub("", word))
    return not shown or names_a_program(shown)


def _spelt_at_run_time_as_suspect(word: str) -> bool:
    """A word the shell spells at run time that, around its variables, is a
    restart's: ``rest${x}art``, ``re$(echo)start``; not a sentence of a
    script with a variable in it (``sh -c 'pip install x; echo $HOME'``)."""
    if is_literal(word) or any(char.isspace() for char in word):
        return False
    return SUSPECT.fullmatch(RUN_TIME_PARTS.sub("", word)) is not None


def _code(command: SimpleCommand, line: str) -> str:
    """The code another language is given: on its command line, or fed on
    its input by a heredoc, whose body follows the interpreter's name in
    the line (what comes before it, `kubectl logs web | python3 - <<EOF`,
    is no part of the code)."""
    if command.words[1:2] != [HEREDOC_CODE]:
        return command.words[1] if len(command.words) > 1 else line
    interpreter = command.words[2]
    at = line.find(interpreter)
    return line[at:] if at >= 0 else line


HELP = ("-h", "--help")


def _asks_for_help(words: list[str]) -> bool:
    """``docker compose up --help``: prints how to use it, runs nothing.
    (Every command recognised here takes -h as help; none as a value.)"""
    options = words[:words.index("--")] if "--" in words else words
    return any(word in HELP for word in options)


def _each(action: str, targets: list[str], command: SimpleCommand) -> list[Recognised]:
    text = command.text()   # once: a command of thousands of words would cost its square
    return [Recognised(action, normalise_service(t), t, text) for t in targets]


# -- docker / podman ----------------------------------------------------------

DOCKER_RESTART = {"-t", "--time", "--timeout", "-s", "--signal", "--detach-keys", "--checkpoint",
                  "--checkpoint-dir"}
EVERY_CONTAINER = ("-a", "--all", "-l", "--latest", "--running", "--filter")
# A container's id as docker and podman print it (12 characters) or in full:
# counted under it, a restart would escape the limit of the container's name.
CONTAINER_ID = re.compile(r"(?=[a-f]*[0-9])[0-9a-f]{12}|(?=[a-f]*[0-9])[0-9a-f]{64}")


def _docker(command: SimpleCommand, words: list[str], state: _Line) -> list[Recognised]:
    rest = parse_args(words, DOCKER_GLOBAL, stop_at_positional=True).positionals
    if rest[:1] == ["container"]:
        rest = rest[1:]
    if not rest:
        return []
    if wholly_at_run_time(rest[0]):   # `docker $ACTION web`, `docker container "$@"`
        return _action_at_run_time(command)
    if rest[0] in ("restart", "start"):
        args = parse_args(rest[1:], DOCKER_RESTART)
        # podman's: which ones is not in the text (but `start -a` attaches to the ones named)
        every = EVERY_CONTAINER if rest[0] == "restart" else tuple(o for o in EVERY_CONTAINER if o != "-a")
        if args.has(*every):
            return [Recognised(RESTART, None, "every container, or the latest", command.text())]
        return [Recognised(RESTART, None, f"the container {item.target}, named by its id", item.command)
                if CONTAINER_ID.fullmatch(item.target) else item for item in _each(RESTART, args.positionals, command)]
    if rest[0] == "compose":
        return _compose(command, rest[1:], state)
    return []


# -- docker compose / docker-compose ---------------------------------------------

COMPOSE_UP = {"-t", "--timeout", "--scale", "--pull", "--exit-code-from", "--attach", "--no-attach",
              "--wait-timeout"}
COMPOSE_PULL_BUILD = {"--policy", "--build-arg", "--builder", "-m", "--memory", "--ssh", "--progress"}
RECREATING = ("--force-recreate", "--build", "-V", "--renew-anon-volumes")


def _compose(command: SimpleCommand, words: list[str], state: _Line) -> list[Recognised]:
    top = parse_args(words, COMPOSE_GLOBAL, stop_at_positional=True)
    if top.has("--dry-run") or not top.positionals:
        return []
    project = _compose_project(command, top)
    sub, rest = top.positionals[0], top.positionals[1:]
    if wholly_at_run_time(sub):
        return _action_at_run_time(command)
    if sub in ("restart", "start"):
        return _compose_targets(RESTART, parse_args(rest, {"-t", "--timeout"}).positionals, project, command)
    if sub in ("pull", "build"):
        services = parse_args(rest, COMPOSE_PULL_BUILD).positionals
        state.pulled |= {(project, s.lower()) for s in services} or {(project, "*")}
        return []
    if sub != "up":
        return []
    up = parse_args(rest, COMPOSE_UP)
    if up.has("--no-start", "--dry-run"):
        return []
    recreating = up.has(*RECREATING) or "always" in up.values("--pull")
    pulled = {s for p, s in state.pulled if p == project}
    found = []
    for item in _compose_targets(RESTART, up.positionals, project, command):
        fresh = recreating or "*" in pulled or (item.target.lower() in pulled if up.positionals else bool(pulled))
        found.append(Recognised(REDEPLOYMENT, item.service, item.target, item.command) if fresh else item)
    return found


def _compose_targets(action: str, services: list[str], project: Optional[str],
                     command: SimpleCommand) -> list[Recognised]:
    """The named services, or the whole project when none is named."""
    if services:
        return _each(action, services, command)
    return [Recognised(action, project, project or "the compose project in an unknown directory", command.text())]


def _compose_project(command: SimpleCommand, top: Args) -> Optional[str]:
    """Compose's own rule: -p, $COMPOSE_PROJECT_NAME, else the name of the
    project directory (that of the first -f file, else the working directory)."""
    name = top.value("-p", "--project-name") or command.env.get("COMPOSE_PROJECT_NAME")
    if name and not is_literal(name):
        return None   # -p "$P": a name the shell spells at run time, not the letters around it
    if not name:
        directory = top.value("--project-directory")
        # -f, else $COMPOSE_FILE (paths separated by ":"): the first one's directory.
        files = top.values("-f", "--file") or [f for f in command.env.get("COMPOSE_FILE", "").split(":") if f]
        if not directory and files and ("$" in files[0] or files[0].startswith("~") or files[0] == PROCESS_SUBSTITUTED):
            return None   # a file named by a variable or a substitution (or a pipe's): its directory is unknown
        if not directory and files and posixpath.dirname(files[0]):
            directory = posixpath.dirname(files[0])
        if directory and not directory.startswith("/") and command.cwd:
            directory = posixpath.join(command.cwd, directory)
        directory = directory or command.cwd
        if not directory or directory.startswith(("$", "~")):
            return None
        name = posixpath.basename(posixpath.normpath(directory))
    return re.sub(r"[^a-z0-9_-]", "", name.lower()) or None


# -- systemd, SysV, OpenRC ---------------------------------------------------------

SYSTEMCTL_VALUE = {"-H", "--host", "-M", "--machine", "-t", "--type", "-p", "--property", "-P", "-s", "--signal",
                   "-n", "--lines", "-o", "--output", "--state", "--root", "--image", "--job-mode", "--kill-whom",
                   "--kill-value", "--what", "--timestamp", "--check-inhibitors", "--when", "--drop-in",
                   "-C", "--capsule", "--image-policy", "--preset-mode", "--reboot-argument", "--message",
                   "--boot-loader-menu", "--boot-loader-entry", "--legend"}
SYSTEMCTL_RESTARTS = {"restart", "try-restart", "reload-or-restart", "try-reload-or-restart",
                      "reload-or-try-restart", "condrestart", "condreload", "force-reload", "start"}


def _systemctl(command: SimpleCommand, words: list[str], state: _Line) -> list[Recognised]:
    args = parse_args(words, SYSTEMCTL_VALUE)
    positionals = args.positionals
    if positionals[:1] and wholly_at_run_time(positionals[0]):   # `systemctl --user $ACTION app`
        return _action_at_run_time(command)
    if positionals[:1] and positionals[0] in SYSTEMCTL_RESTARTS:
        return _each(RESTART, positionals[1:], command)
    if positionals[:1] == ["enable"] and args.has("--now"):   # enables and starts it, as `start` does
        return _each(RESTART, positionals[1:], command)
    return []


def _is_init_script(command: SimpleCommand) -> bool:
    """A script run by its path from a directory named init.d:
    ``/etc/init.d/nginx``, ``init.d/nginx`` from /etc, and ``./nginx`` after
    ``cd /etc/init.d`` (or in a session that works there)."""
    path = command.words[0]
    if "/" not in path:
        return False   # a bare name is looked up in PATH, never in the working directory
    if not path.startswith("/") and command.cwd:
        path = posixpath.join(command.cwd, path)
    return posixpath.basename(posixpath.dirname(posixpath.normpath(path))) == "init.d"


def _init_script(command: SimpleCommand, words: list[str], state: _Line) -> list[Recognised]:
    """``/etc/init.d/NAME restart``: the script is the service."""
    if words[:1] and wholly_at_run_time(words[0]):
        return _action_at_run_time(command)
    if words[:1] and words[0] in SYSTEMCTL_RESTARTS:
        return _each(RESTART, [command.name], command)
    return []


def _supervisorctl(command: SimpleCommand, words: list[str], state: _Line) -> list[Recognised]:
    """``supervisorctl restart|start NAME…`` (``all`` or a group: not readable as one service); a
    process of a group, ``GROUP:NAME`` (``celery:celery_00``), is counted under its own name."""
    positionals = parse_args(words, {"-c", "--configuration", "-s", "--serverurl", "-u", "--username",
                                     "-p", "--password", "-r", "--history-file"}).positionals
    if positionals[:1] and wholly_at_run_time(positionals[0]):
        return _action_at_run_time(command)
    if positionals[:1] and positionals[0] in ("restart", "start"):
        names = positionals[1:]
        if any(name == "all" or name.endswith((":*", ":")) for name in names):
            return [Recognised(RESTART, None, "every program, or a group", command.text())]
        return _each(RESTART, [name.rpartition(":")[2] for name in names], command)
    return []


def _service(command: SimpleCommand, words: list[str], state: _Line) -> list[Recognised]:
    """``service NAME restart`` (SysV), ``rc-service NAME restart`` (OpenRC)
    and ``invoke-rc.d NAME restart`` (Debian)."""
    args = parse_args(words, set())
    positionals = args.positionals
    if len(positionals) >= 2 and wholly_at_run_time(positionals[1]):   # `service nginx $ACTION`
        return _action_at_run_time(command)
    if len(positionals) >= 2 and positionals[1] in SYSTEMCTL_RESTARTS:
        return _each(RESTART, positionals[:1], command)
    if positionals and args.has("--full-restart"):   # `service NAME --full-restart`: stop, then start
        return _each(RESTART, positionals[:1], command)
    return []


# -- kubectl, ansible-playbook, helm ------------------------------------------------



# OpenShift's oc also starts a DeploymentConfig's new rollout (latest) or
# retries its failed one (retry): both deploy the pods again.
OC_REDEPLOYS = ("undo", "latest", "retry")


def _kubectl_within(command: SimpleCommand, words: list[str], state: _Line) -> list[Recognised]:
    """``k3s kubectl …``, ``microk8s kubectl …`` and ``minikube kubectl -- …``: kubectl under another name."""
    return _kubectl(command, words[1:], state) if words[:1] == ["kubectl"] else []


def _kubectl(command: SimpleCommand, words: list[str], state: _Line) -> list[Recognised]:
    positionals = parse_args(words, KUBECTL_VALUE).positionals
    redeploying = OC_REDEPLOYS if command.name == "oc" else ("undo",)
    if any(wholly_at_run_time(word) for word in positionals[:1] + positionals[1:2] * (positionals[:1] == ["rollout"])):
        return _action_at_run_time(command)   # `kubectl $VERB …`, `kubectl rollout $ACTION deploy/web`
    if positionals[:1] != ["rollout"] or len(positionals) < 2 or positionals[1] not in ("restart", *redeploying):
        return []
    action = RESTART if positionals[1] == "restart" else REDEPLOYMENT
    resources = positionals[2:]
    if resources and "/" not in resources[0]:
        names = resources[1:]                                   # `deployment web api`
    else:
        names = [r.split("/", 1)[1] for r in resources if "/" in r]   # `deployment/web`
    if not names:   # every deployment, a selector or a file: which services is not in the text
        return [Recognised(action, None, "the selected resources", command.text())]
    return _each(action, names, command)


ANSIBLE_VALUE = {"-i", "--inventory", "--inventory-file", "-l", "--limit", "-e", "--extra-vars", "-t", "--tags",
                 "--skip-tags", "-u", "--user", "-f", "--forks", "-c", "--connection", "-T", "--timeout",
                 "--private-key", "--key-file", "-M", "--module-path", "--vault-id", "--vault-password-file",
                 "--vault-pass-file", "--become-method", "--become-user", "--start-at-task", "--ssh-common-args",
                 "--sftp-extra-args", "--scp-extra-args", "--ssh-extra-args", "--become-password-file",
                 "--connection-password-file"}
ANSIBLE_DRY = ("-C", "--check", "--syntax-check", "--list-hosts", "--list-tasks", "--list-tags")


def _ansible_playbook(command: SimpleCommand, words: list[str], state: _Line) -> list[Recognised]:
    args = parse_args(words, ANSIBLE_VALUE)
    if args.has(*ANSIBLE_DRY):
        return []
    limits = [p.lstrip("&") for value in args.values("-l", "--limit") for p in re.split(r"[,:]", value)]
    limits = [p for p in limits if p and not p.startswith("!")]
    if limits:
        return _each(REDEPLOYMENT, limits, command)
    playbooks = [posixpath.splitext(posixpath.basename(p))[0] for p in args.positionals]
    return _each(REDEPLOYMENT, playbooks, command)


HELM_VALUE = {"-f", "--values", "--set", "--set-string", "--set-file", "--set-json", "--set-literal", "-n",
              "--namespace", "--version", "--timeout", "--kube-context", "--kubeconfig", "-o", "--output",
              "--description", "--post-renderer", "--post-renderer-args", "--repo", "--history-max", "--username",
              "--password", "--ca-file", "--cert-file", "--key-file", "--keyring", "--labels", "-l", "--burst-limit",
              "--qps", "--kube-apiserver", "--kube-as-user", "--kube-as-group", "--kube-ca-file",
              "--kube-tls-server-name", "--kube-token", "--registry-config", "--repository-cache",
              "--repository-config", "--name-template", "--max-history"}


def _helm(command: SimpleCommand, words: list[str], state: _Line) -> list[Recognised]:
    args = parse_args(words, HELM_VALUE)
    positionals = args.positionals
    if positionals[:1] and wholly_at_run_time(positionals[0]):
        return _action_at_run_time(command)
    if not positionals or positionals[0] not in ("upgrade", "install", "rollback") or args.has("--dry-run"):
        return []
    if positionals[0] == "install" and args.has("-g", "--generate-name"):
        return [Recognised(REDEPLOYMENT, None, "a release with a generated name", command.text())]
    if len(positionals) < 2:
        return []
    return _each(REDEPLOYMENT, positionals[1:2], command)


# -- whole guests: Proxmox containers (pct) and VMs (qm), libvirt domains (virsh) --

PROXMOX_VALUE = {"--timeout", "--machine", "--migratedfrom", "--migration_network", "--migration_type",
                 "--stateuri", "--targetstorage", "--force-cpu", "--nets", "--with-local-disks"}
GUEST_RESTARTS = ("reboot", "reset", "start")
# Proxmox takes a boolean option's value as the next word (--skiplock 1), and
# no guest's id is one of these.
BOOLEAN_WORDS = {"0", "1", "true", "false", "yes", "no", "on", "off"}
VIRSH_GLOBAL = {"-c", "--connect", "-d", "--debug", "-l", "--log", "-e", "--escape", "-k", "--keepalive-interval",
                "-K", "--keepalive-count"}
VIRSH_RESTART = {"--domain", "--mode", "--pass-fds"}


def _proxmox(command: SimpleCommand, words: list[str], state: _Line) -> list[Recognised]:
    """``pct reboot|start ID``, ``qm reboot|reset|start ID``: the guest
    restarted whole, counted under its id (``101``) as the command names it."""
    # Proxmox reads an option with one dash as with two (-timeout 60).
    words = ["-" + word if word[:1] == "-" and word[1:2] not in ("-", "") and len(word) > 2 else word
             for word in words]
    positionals = parse_args(words, PROXMOX_VALUE).positionals
    if positionals[:1] and wholly_at_run_time(positionals[0]):   # `qm $ACTION 101`
        return _action_at_run_time(command)
    if positionals[:1] and positionals[0] in GUEST_RESTARTS:
        return _each(RESTART, [p for p in positionals[1:] if p.lower() not in BOOLEAN_WORDS][:1], command)
    return []


def _virsh(command: SimpleCommand, words: list[str], state: _Line) -> list[Recognised]:
    """``virsh [-c URI] reboot|reset|start DOMAIN`` (or ``--domain DOMAIN``);
    also given as one word, which virsh reads as its own command line
    (``virsh 'start web; reboot db'``)."""
    rest = parse_args(words, VIRSH_GLOBAL, stop_at_positional=True).positionals
    if rest[:1] and wholly_at_run_time(rest[0]):
        return _action_at_run_time(command)
    if len(rest) == 1 and (";" in rest[0] or any(char.isspace() for char in rest[0])):
        found = []
        for part in rest[0].split(";"):
            try:
                found += _virsh(command, shlex.split(part), state)
            except ValueError:   # a stray quote: virsh refuses it too, but say so rather than pass
                return [Recognised(RESTART, None, "a virsh command line it cannot read", command.text())]
        return found
    if not rest or rest[0] not in GUEST_RESTARTS:
        return []
    args = parse_args(rest[1:], VIRSH_RESTART)
    return _each(RESTART, args.values("--domain")[-1:] or args.positionals[:1], command)


# -- whole instances: LXD and Incus, Multipass, Vagrant ---------------------------

# lxc and incus take their global options anywhere, as they do their command's.
INSTANCE_VALUE = {"--project", "--timeout"}
# The instance multipass starts or restarts when none is named.
MULTIPASS_PRIMARY = "primary"
VAGRANT_VALUE = {"--provider", "--provision-with"}
# A machine's id (32 hexadecimal characters, `vagrant global-status` shows
# 7), which vagrant takes shortened to any prefix: counted under it, a
# restart would escape the limit of the machine's name.
VAGRANT_ID = re.compile(r"[0-9a-f]{4,32}")


def _instances(command: SimpleCommand, words: list[str], state: _Line) -> list[Recognised]:
    """``lxc restart|start [REMOTE:]NAME…`` (also ``incus``) and ``multipass
    restart|start [NAME…]``: each instance, counted under its name, without
    the remote it is on; multipass's primary one when none is named, as
    multipass itself takes it."""
    args = parse_args(words, INSTANCE_VALUE)
    positionals = args.positionals
    if positionals[:1] and wholly_at_run_time(positionals[0]):   # `incus $ACTION web`
        return _action_at_run_time(command)
    if positionals[:1] not in (["restart"], ["start"]):
        return []
    if args.has("--all"):
        return [Recognised(RESTART, None, "every instance", command.text())]
    names = [name.rpartition(":")[2] for name in positionals[1:]]
    if not names and command.name == "multipass":
        names = [MULTIPASS_PRIMARY]
    return _each(RESTART, names, command)


def _vagrant(command: SimpleCommand, words: list[str], state: _Line) -> list[Recognised]:
    """``vagrant reload|up [NAME…]``: each machine named (one named by a
    pattern, ``/web[0-9]/``, or by its id is a target it cannot read), else
    the Vagrantfile's machines, counted under the name of its directory, as
    a compose project's are."""
    args = parse_args(words, VAGRANT_VALUE)
    positionals = args.positionals
    if positionals[:1] and wholly_at_run_time(positionals[0]):
        return _action_at_run_time(command)
    if positionals[:1] not in (["reload"], ["up"]):
        return []
    if positionals[1:]:
        return [Recognised(RESTART, None, f"the machine {item.target}, named by its id", item.command)
                if VAGRANT_ID.fullmatch(item.target) else item for item in _each(RESTART, positionals[1:], command)]
    directory = _vagrant_directory(command)
    return [Recognised(RESTART, directory and normalise_service(posixpath.basename(directory)),
                       f"the machines of the Vagrantfile in {directory or 'an unknown directory'}", command.text())]


def _vagrant_directory(command: SimpleCommand) -> Optional[str]:
    """Where vagrant looks for its Vagrantfile: ``VAGRANT_CWD``, else the
    working directory; None where the text cannot say."""
    directory = command.env.get("VAGRANT_CWD") or ""
    if directory and not is_literal(directory):
        return None
    if directory and not directory.startswith(("/", "~/")) and directory != "~":
        directory = posixpath.join(command.cwd, directory) if command.cwd else ""
    directory = posixpath.normpath(directory or command.cwd or "")
    return None if directory in (".", "/", "~") or directory.startswith("$") else directory


Handler = Callable[[SimpleCommand, list, _Line], list]
HANDLERS: dict[str, Handler] = {
    "docker": _docker, "podman": _docker, "nerdctl": _docker,
    "docker-compose": _compose, "podman-compose": _compose,
    "systemctl": _systemctl, "service": _service, "rc-service": _service, "invoke-rc.d": _service,
    "supervisorctl": _supervisorctl,
    "kubectl": _kubectl, "k3s": _kubectl_within, "microk8s": _kubectl_within, "minikube": _kubectl_within,
    "microk8s.kubectl": _kubectl, "oc": _kubectl,
    "ansible-playbook": _ansible_playbook, "helm": _helm,
    "pct": _proxmox, "qm": _proxmox, "virsh": _virsh,
    "lxc": _instances, "lxd.lxc": _instances, "incus": _instances, "multipass": _instances, "vagrant": _vagrant,
}
