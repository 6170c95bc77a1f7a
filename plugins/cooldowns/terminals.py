"""The command lines that terminal multiplexers run or type for a command.

``tmux new -d 'systemctl restart nginx'``, ``tmux send-keys -t ops 'docker
restart web' Enter`` and ``screen -dmS fix systemctl restart nginx`` restart
a service as surely as the command itself; ``shell.py`` reads the lines
found here as it reads ``bash -c``'s. Pure, and unit tested with the rest of
the recognition.
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Optional

from plugins.cooldowns.options import Option, read_options


@dataclass(frozen=True)
class RunLine:
    """A command line a multiplexer runs, and whether it runs in the
    caller's directory (a new session does; a pane's is not known), or in
    the one its ``-c DIR`` names."""

    line: str
    same_directory: bool
    directory: Optional[str] = None


@dataclass(frozen=True)
class _TmuxCommand:
    options_with_value: frozenset[str]
    same_directory: bool = False
    directory_option: str = "-c"


def _tmux(with_value: str, same_directory: bool = False, directory_option: str = "-c") -> _TmuxCommand:
    return _TmuxCommand(frozenset(f"-{letter}" for letter in with_value), same_directory, directory_option)


# tmux's commands that run a shell command (its last words), by name and
# alias, with the options of theirs that take a value and the one that
# names the directory the command starts in.
TMUX_RUNS = {
    "new-session": _tmux("cefFnstxy", same_directory=True), "new": _tmux("cefFnstxy", same_directory=True),
    "new-window": _tmux("ceFnt"), "neww": _tmux("ceFnt"),
    "split-window": _tmux("ceFlpt"), "splitw": _tmux("ceFlpt"),
    "respawn-pane": _tmux("cet"), "respawnp": _tmux("cet"),
    "respawn-window": _tmux("cet"), "respawnw": _tmux("cet"),
    "run-shell": _tmux("cdt"), "run": _tmux("cdt"),
    # a popup's -c is the client it shows on
    "display-popup": _tmux("bcdehsStTwxy", directory_option="-d"),
    "popup": _tmux("bcdehsStTwxy", directory_option="-d"),
    "pipe-pane": _tmux("t"), "pipep": _tmux("t"),
}
TMUX_SEND_KEYS = {"send-keys", "send"}
TMUX_SEND_KEYS_WITH_VALUE = frozenset({"-c", "-N", "-t"})
TMUX_IF_SHELL = {"if-shell", "if"}
# tmux's own options that take a value; -c runs a shell command.
TMUX_GLOBAL_WITH_VALUE = frozenset({"-c", "-f", "-L", "-S", "-T"})
# What send-keys types for a key's name rather than the name itself (tmux
# reads key names in any case: enter, C-M).
KEYS_TYPED = {"enter": "\n", "kpenter": "\n", "c-m": "\n", "c-j": "\n", "^m": "\n", "^j": "\n", "space": " ",
              "tab": "\t"}
# Other keys' names (C-c, M-x, Escape, Up, F5): typed as no text.
_NAMED_KEYS = (r"Escape|BSpace|BTab|Up|Down|Left|Right|Home|End|NPage|PPage|PageUp|PageDown|PgUp|PgDn|DC|IC|Delete"
               r"|Insert|F[0-9]{1,2}|KP(?:[0-9/*+.-]|Enter)|Enter|Space|Tab")
KEY_NAME = re.compile(rf"(?:[CMS]-)*(?:{_NAMED_KEYS})|(?:[CMS]-)+\S|\^.", re.IGNORECASE)

SCREEN_WITH_VALUE = {"-S", "-c", "-e", "-h", "-p", "-t", "-T", "-s", "-Logfile"}
# screen's options that list, wipe or reattach sessions, and start no command.
SCREEN_RUNS_NOTHING = {"-ls", "-list", "-wipe", "-v", "-version", "-r", "-x", "-R", "-RR"}
# What stuff types for its escapes: \ooo (octal), \n, \r, ^M; a carriage return ends a line as a new line does.
SCREEN_STUFF_ESCAPE = re.compile(r"\\([0-7]{1,3})|\\(.)|\^([MJ])", re.DOTALL)
SCREEN_STUFF_ESCAPES = {"n": "\n", "r": "\n", "t": "\t", "M": "\n", "J": "\n"}

DTACH_MODES = {"-n", "-A", "-c", "-N"}
DTACH_WITH_VALUE = {"-e", "-r"}


def run_by_tmux(args: list[str]) -> list[RunLine]:
    """The shell commands ``tmux ARGS`` runs or types: of each of its
    commands (``;`` between them) that starts one (new-session, new-window,
    split-window, respawn-*, run-shell, display-popup, pipe-pane, if-shell),
    and what send-keys types (its key names as the keys they are: Enter a
    new line), and the line of tmux's own ``-c``."""
    options, rest = read_options(args, TMUX_GLOBAL_WITH_VALUE)
    found = [RunLine(value, True) for option, value in options if option.endswith("c") and value is not None]
    command: list[str] = []
    for word in rest + [";"]:
        # A word that is ";" or ends in one ends a command (one in "\;" is the character).
        if not word.endswith(";") or word.endswith("\\;"):
            command.append(word.removesuffix("\\;") + ";" if word.endswith("\\;") else word)
            continue
        if word[:-1]:
            command.append(word[:-1])
        found += _tmux_command(command)
        command = []
    return found


def _tmux_command(words: list[str]) -> list[RunLine]:
    if not words:
        return []
    name, args = words[0], words[1:]
    if name in TMUX_RUNS:
        runs = TMUX_RUNS[name]
        options, rest = read_options(args, runs.options_with_value)
        if name in ("run-shell", "run") and "C" in _letters(options):
            return run_by_tmux(_split(rest[0])) if rest else []   # -C: a tmux command, not a shell's
        if not rest:
            return []
        directory = next((value for option, value in options if option.endswith(runs.directory_option[1])), None)
        if directory is not None and "#{" in directory:   # a format (#{pane_current_path}): known to tmux only
            return [RunLine(_as_one_line(rest), False)]
        return [RunLine(_as_one_line(rest), runs.same_directory and directory is None, directory)]
    if name in TMUX_SEND_KEYS:
        options, keys = read_options(args, TMUX_SEND_KEYS_WITH_VALUE)
        letters = _letters(options)
        if "X" in letters or "H" in letters:   # a copy-mode command, or keys given in hex
            return []
        typed = "".join(keys) if "l" in letters else "".join(_typed(key) for key in keys)
        return [RunLine(typed, False)] if typed.strip() else []
    if name in TMUX_IF_SHELL:
        options, rest = read_options(args, {"-t"})
        found = [] if "F" in _letters(options) or not rest else [RunLine(rest[0], False)]
        for branch in rest[1:3]:   # tmux commands, each one word
            found += run_by_tmux(_split(branch))
        return found
    return []


def run_by_screen(args: list[str]) -> list[RunLine]:
    """The command ``screen ARGS`` starts in a new window, or what ``-X``
    makes a running session do: ``stuff TEXT`` types it, ``screen CMD …``
    and ``exec CMD …`` run it."""
    options, command = read_options(args, SCREEN_WITH_VALUE)
    if "X" not in _letters(options):
        if any(arg in SCREEN_RUNS_NOTHING for arg in args[:len(args) - len(command)]):
            return []
        return [RunLine(shlex.join(command), True)] if command else []
    if not command:
        return []
    if command[0] == "stuff":
        typed = "".join(_stuffed(text) for text in command[1:])
        return [RunLine(typed, False)] if typed.strip() else []
    if command[0] == "screen":
        return [RunLine(line.line, False) for line in run_by_screen(command[1:])]
    if command[0] == "exec":
        words = command[1:]
        while words and re.fullmatch(r"[.!:|]*", words[0]):   # exec's fd patterns, `exec .!. cmd`
            words = words[1:]
        return [RunLine(shlex.join(words), False)] if words else []
    return []


def run_by_dtach(args: list[str]) -> list[RunLine]:
    """``dtach -n SOCKET [options] CMD …`` (also -A, -c, -N): the command it
    starts; ``dtach -a`` attaches, and runs none."""
    if len(args) < 3 or args[0] not in DTACH_MODES:
        return []
    _, rest = read_options(args[2:], DTACH_WITH_VALUE)
    return [RunLine(shlex.join(rest), True)] if rest else []


def run_by_sg(args: list[str]) -> list[RunLine]:
    """``sg [-] GROUP [-c] LINE``: the line, which sg gives to /bin/sh."""
    if args[:1] == ["-"]:
        args = args[1:]
    rest = args[1:]
    if rest[:1] == ["-c"]:
        rest = rest[1:]
    return [RunLine(" ".join(rest), True)] if rest else []


def _typed(key: str) -> str:
    if key.lower() in KEYS_TYPED:
        return KEYS_TYPED[key.lower()]
    return "" if KEY_NAME.fullmatch(key) else key


def _stuffed(text: str) -> str:
    """What screen's ``stuff`` types for its text: ``\\n``, ``\\r``, ``\\015`` and ``^M`` end a line."""
    def typed(escape: re.Match) -> str:
        octal, letter, control = escape.groups()
        if octal:
            char = chr(int(octal, 8))
            return "\n" if char == "\r" else char
        return SCREEN_STUFF_ESCAPES.get(letter or control, letter or control)
    return SCREEN_STUFF_ESCAPE.sub(typed, text)


def _as_one_line(words: list[str]) -> str:
    """tmux gives one word to the shell as it is, and runs several as a command's words."""
    return words[0] if len(words) == 1 else shlex.join(words)


def _split(text: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError:
        return text.split()


def _letters(options: list[Option]) -> str:
    return "".join(option[1:] for option, _ in options if not option.startswith("--"))
