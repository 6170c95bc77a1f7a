"""Command-line options the way getopt and cobra read them, enough to find
the positional words (containers, units, releases) of a command, or the
options of a command that runs another (``sudo``, ``tmux``) up to it."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional


# The options that take a value, of the programs more than one module reads:
# docker's and podman's and nerdctl's own (before the subcommand), compose's
# (v2's and v1's), kubectl's anywhere.
DOCKER_GLOBAL = {"-H", "--host", "-c", "--context", "--config", "-l", "--log-level",
                 "--tlscacert", "--tlscert", "--tlskey", "--url", "--connection", "--identity",
                 "--root", "--runroot", "--storage-driver", "--storage-opt", "--runtime", "--events-backend",
                 "--tmpdir", "--conmon", "--network-cmd-path", "--module", "--ssh", "--out",
                 "-n", "--namespace", "-a", "--address", "--snapshotter", "--cni-path", "--cni-netconfpath",
                 "--data-root", "--cgroup-manager", "--hosts-dir"}
COMPOSE_GLOBAL = {"-f", "--file", "-p", "--project-name", "--project-directory", "--env-file", "--profile",
                  "--ansi", "--parallel", "--progress",
                  "-H", "--host", "-c", "--context", "--log-level", "--tlscacert", "--tlscert", "--tlskey"}
KUBECTL_VALUE = {"-v", "--v", "-n", "--namespace", "--context", "--kubeconfig", "--cluster", "--user", "-s", "--server",
                 "--token", "-l", "--selector", "-o", "--output", "-f", "--filename", "--field-manager", "--as",
                 "--as-group", "--request-timeout", "--to-revision", "--template", "-k", "--kustomize",
                 "--as-uid", "--cache-dir", "--certificate-authority", "--client-certificate", "--client-key",
                 "--tls-server-name", "--username", "--password", "--log-file", "--log-dir", "--vmodule",
                 "--profile", "--profile-output", "--kuberc"}


@dataclass
class Args:
    options: dict[str, list[str]] = field(default_factory=dict)
    positionals: list[str] = field(default_factory=list)
    # Every option as given, in order: which of two spellings came last
    # (`su --command A -c B` runs B) is a matter of position, not of name.
    given: list[tuple[str, str]] = field(default_factory=list)

    def has(self, *names: str) -> bool:
        return any(name in self.options for name in names)

    def values(self, *names: str) -> list[str]:
        """The values of any of ``names``, in the order they were given."""
        return [value for name, value in self.given if name in names]

    def value(self, *names: str) -> Optional[str]:
        values = [v for v in self.values(*names) if v]
        return values[-1] if values else None      # the last one given wins, as in most CLIs


def parse_args(args: list[str], with_value: set[str], stop_at_positional: bool = False) -> Args:
    """Options anywhere (``--name=value``, ``--name value`` and ``-n value``
    for names in ``with_value``, clusters like ``-dt 5``), everything after
    ``--`` positional. With ``stop_at_positional``, the first positional and
    everything after it are positional: a subcommand and its own arguments."""
    parsed = Args()

    def add(name: str, value: str) -> None:
        parsed.options.setdefault(name, []).append(value)
        parsed.given.append((name, value))

    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            parsed.positionals += args[i + 1:]
            break
        if arg.startswith("--"):
            name, equals, value = arg.partition("=")
            if not equals and name in with_value and i + 1 < len(args):
                i += 1
                value = args[i]
            add(name, value)
        elif arg.startswith("-") and len(arg) > 1:
            for j, letter in enumerate(arg[1:], start=1):
                name = "-" + letter
                if name not in with_value:
                    add(name, "")
                    continue
                value = arg[j + 1:]
                if not value and i + 1 < len(args):
                    i += 1
                    value = args[i]
                add(name, value)
                break
        elif stop_at_positional:
            parsed.positionals += args[i:]
            break
        else:
            parsed.positionals.append(arg)
        i += 1
    return parsed



Option = tuple[str, Optional[str]]


def read_options(args: list[str], with_value: set[str] | frozenset[str]) -> tuple[list[Option], list[str]]:
    """The options before a command's first other word, each with its value,
    and the words from there on (``--`` ends the options, and is dropped).

    A cluster of short options ends at the first letter that takes a value:
    ``-iu root`` gives ``("-iu", "root")`` and ``-dmSname`` gives
    ``("-dmS", "name")``, so a value is never read as more letters. A long
    option takes the next word when it is in ``with_value``, else its own
    after "=" (``--chdir=/srv``)."""
    found: list[Option] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            i += 1
            break
        if not arg.startswith("-") or arg == "-":
            break
        i += 1
        if arg.startswith("--") and arg not in with_value:
            name, equals, value = arg.partition("=")
            found.append((name, value) if equals else (arg, None))
            continue
        option, glued = _up_to_value(arg, with_value)
        takes_value = option in with_value or f"-{option[-1]}" in with_value
        if glued or not takes_value:
            found.append((option, glued or None))
        else:                                  # its value is the next word
            found.append((option, args[i] if i < len(args) else None))
            i += 1
    return found, args[i:]


def is_option(option: str, names: set[str] | frozenset[str] | tuple[str, ...]) -> bool:
    """Whether ``option``, as :func:`read_options` gives it, is one of
    ``names``: alone, or ending a cluster (``-iD`` is ``-D`` with ``-i``)."""
    return option in names or (not option.startswith("--") and f"-{option[-1]}" in names)


def _up_to_value(arg: str, with_value: set[str] | frozenset[str]) -> tuple[str, str]:
    """A cluster of short options up to the first that takes a value, and
    what is glued after that one (``-dmSname``: ``-dmS``, ``name``)."""
    if arg in with_value or arg.startswith("--"):
        return arg, ""
    for place, letter in enumerate(arg[1:], start=1):
        if f"-{letter}" in with_value:
            return arg[:place + 1], arg[place + 1:]
    return arg, ""
