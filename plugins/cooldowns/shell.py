"""Take a shell command line apart into the simple commands it runs.

This is not a shell: it over-approximates on purpose. Heredoc bodies and
words after a stray quote are scanned as commands too, because the cost of
seeing a restart that is not one (a denial the agent can read) is lower than
missing one that is. Everything here is pure and unit tested.
"""
from __future__ import annotations

import posixpath
import re
import shlex
from dataclasses import dataclass, field, replace
from typing import Iterator, Optional

from plugins.cooldowns.elsewhere import run_elsewhere
from plugins.cooldowns.options import Option, is_option, parse_args, read_options
from plugins.cooldowns.terminals import RunLine, run_by_dtach, run_by_screen, run_by_sg, run_by_tmux

OPERATOR_CHARS = ";&|()<>`\n"
# An operator character quoted or escaped (`find -exec … \;`, `echo ';'`) is
# part of a word: _as_bash_reads hides it from the lexer, the word shows it again.
HIDDEN = str.maketrans({char: chr(0xE000 + ord(char)) for char in OPERATOR_CHARS})
SHOWN = str.maketrans({chr(0xE000 + ord(char)): char for char in OPERATOR_CHARS})
SEPARATOR_CHARS = set(";|()`\n")
MAX_DEPTH = 5
# In _as_bash_reads: a "$(" opened within double quotes.
QUOTED_SUBSTITUTION = '"$('

# Words that start a compound command or negate one; what follows is a command.
SHELL_KEYWORDS = {"if", "then", "else", "elif", "do", "while", "until", "!", "{", "}", "coproc"}
# Followed by a name, then the command: `function f { …; }`, `coproc NAME { …; }`.
NAMING_KEYWORDS = {"function", "coproc"}

# Commands that run the rest of their words as a command, and the options
# (of theirs) that take a value.
PREFIX_COMMANDS = {
    "sudo": {"-u", "-g", "-h", "-p", "-C", "-D", "-R", "-T", "-U", "-r", "-t", "--user", "--group", "--host",
             "--prompt", "--close-from", "--chdir", "--chroot", "--command-timeout", "--other-user", "--role",
             "--type"},
    "doas": {"-u", "-C"},
    "env": {"-u", "--unset", "-C", "--chdir", "-S", "--split-string"},
    "nohup": set(), "command": set(), "exec": {"-a"}, "builtin": set(),
    "nice": {"-n", "--adjustment"}, "ionice": {"-c", "-n", "-p", "--class", "--classdata"},
    "timeout": {"-s", "--signal", "-k", "--kill-after"}, "stdbuf": {"-i", "-o", "-e"},
    "chronic": set(), "time": {"-f", "--format", "-o", "--output"},
    "setsid": set(), "pkexec": {"--user"},
    "runuser": {"-u", "--user", "-g", "--group", "-G", "--supp-group", "-w", "--whitelist-environment"},
    "systemd-run": {"-u", "--unit", "-p", "--property", "-E", "--setenv", "-H", "--host", "-M", "--machine", "-C",
                    "--capsule", "--description", "--slice", "--expand-environment", "--service-type", "--uid", "--gid",
                    "--nice", "--on-active", "--on-boot", "--on-startup", "--on-unit-active", "--on-unit-inactive",
                    "--on-calendar", "--timer-property", "--path-property", "--socket-property",
                    "--working-directory", "--job-mode", "--background", "--json"},
    # systemd's own sudo: the command runs as a transient service, as systemd-run's does.
    "run0": {"-u", "--user", "-g", "--group", "-D", "--chdir", "--setenv", "--unit", "--property", "--description",
             "--slice", "--nice", "--machine", "--background", "--shell-prompt-prefix", "--area", "--lightweight"},
    # How a command in a container reaches the host, or another root: `nsenter -t 1 -m -- systemctl …`,
    # `chroot /host systemctl …`. (A namespace option's file is given as -mFILE or --mount=FILE.)
    "nsenter": {"-t", "--target", "-S", "--setuid", "-G", "--setgid"},
    "chroot": {"--userspec", "--groups"},
    "unshare": {"-S", "--setuid", "-G", "--setgid", "-R", "--root", "-w", "--wd", "--map-user", "--map-group",
                "--map-users", "--map-groups", "--propagation", "--load-interp", "--setgroups", "--monotonic",
                "--boottime"},
    "setpriv": {"--reuid", "--regid", "--ruid", "--rgid", "--euid", "--egid", "--groups", "--inh-caps",
                "--ambient-caps", "--bounding-set", "--securebits", "--pdeathsig", "--selinux-label",
                "--apparmor-profile", "--landlock-access", "--landlock-rule"},
    "strace": {"-e", "-o", "--output", "-p", "--attach", "-s", "--string-limit", "-u", "--user", "-E", "--env",
               "-a", "--columns", "-b", "--detach-on", "-I", "--interruptible", "-O", "-S", "--summary-sort-by",
               "-P", "--trace-path", "-X", "--const-print-style", "--trace", "--signal", "--status", "-U",
               "--summary-columns"},
    "ltrace": {"-e", "-o", "--output", "-p", "-s", "-u", "-a", "--align", "-n", "--indent", "-A", "-D", "--debug",
               "-F", "--config", "-l", "--library", "-x", "-L", "-w", "--where"},
    "busybox": set(),   # `busybox sh -c …`: the applet is the command
    "taskset": set(), "chrt": {"-T", "--sched-runtime", "-P", "--sched-period", "-D", "--sched-deadline"},
    "prlimit": {"-p", "--pid", "-o", "--output"},
    "unbuffer": {"-p"},
    "valgrind": set(),   # its options are all --name=value
    "firejail": set(),   # likewise
    "catchsegv": set(),
    "daemonize": {"-c", "-e", "-E", "-o", "-p", "-l", "-u"},
}
# Of sudo's options, those with which it runs no command: -l lists what it may run.
SUDO_RUNS_NOTHING = {"-l", "--list"}
# Of these, the first positional word is an argument, not the command: a
# duration, a new root, a CPU mask, a priority.
PREFIX_WITH_ARGUMENT = {"timeout", "chroot", "taskset", "chrt"}
# faketime [options] TIMESTAMP command …, where a timestamp may begin with "-" (-1d).
FAKETIME_FLAGS = {"-m", "-f", "--exclude-monotonic"}
FAKETIME_OPTIONS_WITH_VALUE = {"-p", "--date-prog"}
# The names a file of a command's own standard input goes by: `bash /dev/stdin
# <<< '…'` and `source /dev/stdin` run what they are fed.
STDIN_FILES = {"/dev/stdin", "-", "/dev/fd/0", "/proc/self/fd/0"}
# awk and sed run code of their own (awk's system(), sed's `e` command): read
# as another language's, for the programs and restarts it names.
AWKS = {"awk", "gawk", "mawk", "nawk"}
AWK_OPTIONS_WITH_VALUE = {"-F", "-v", "--field-separator", "--assign"}
AWK_PROGRAM_FILE = {"-f", "-E", "--file", "--exec", "-i", "--include"}
# How awk runs a command: system(), a pipe to or from one (`print … | "sh"`,
# `"cmd" | getline`).
AWK_RUNS = re.compile(r"\bsystem\s*\(|\|")
SEDS = {"sed", "gsed"}
# sed's e command (after an address, if any) and the e flag of s///.
_SED_ADDRESS = r"(?:[0-9]+|\$|/(?:[^/\\\n]|\\.)*/)(?:~[0-9]+)?"
SED_E_COMMAND = re.compile(rf"(?:^|[;\n{{}}])\s*(?:{_SED_ADDRESS}(?:\s*,\s*{_SED_ADDRESS})?)?\s*!?\s*e(?:\s|;|$)")
SED_E_FLAG = re.compile(r"(?:^|[;\n{}\s])s([^\w\s\\])(?:(?!\1)[^\\]|\\.)*\1(?:(?!\1)[^\\]|\\.)*\1[gpiImM0-9w]*e")
SED_OPTIONS_WITH_VALUE = {"--line-length"}
# su's (and runuser's when it is written as su is: `runuser -l ops -c CMD`).
SU_OPTIONS_WITH_VALUE = {"-c", "--command", "--session-command", "-s", "--shell", "-g", "--group", "-G",
                         "--supp-group", "-w", "--whitelist-environment"}
# script [options] [file]: -c LINE runs a command line, under a terminal it records.
SCRIPT_OPTIONS_WITH_VALUE = {"-c", "--command", "-E", "--echo", "-I", "--log-in", "-O", "--log-out", "-B",
                             "--log-io", "-T", "--log-timing", "-m", "--logging-format", "-o", "--output-limit"}
# flock LOCKFILE COMMAND... or flock LOCKFILE -c LINE.
FLOCK_OPTIONS_WITH_VALUE = {"-w", "--timeout", "-E", "--conflict-exit-code"}
SHELL_OPTIONS_WITH_VALUE = {"-o", "-O", "--rcfile", "--init-file"}   # "+o" and "+O" too

SHELLS = {"sh", "bash", "dash", "zsh", "ksh", "ash"}
# Terminal multiplexers, and sg: what each runs or types for a command (terminals.py).
TERMINALS = {"tmux": run_by_tmux, "byobu": run_by_tmux, "byobu-tmux": run_by_tmux, "screen": run_by_screen,
             "byobu-screen": run_by_screen, "dtach": run_by_dtach, "sg": run_by_sg}
AT_OPTIONS_WITH_VALUE = {"-q", "-f", "-t"}
AT_RUNS_NOTHING = set("lrdcV")
XARGS_OPTIONS_WITH_VALUE = {"-a", "--arg-file", "-d", "--delimiter", "-E", "-I", "-L", "-n", "--max-args", "-P",
                            "--max-procs", "-s", "--max-chars", "--process-slot-var"}
# xargs adds words from its input: a target no one can read from the text.
FROM_XARGS = "<input of xargs>"
# GNU parallel: its options that take a value, and what separates its command from its arguments.
PARALLEL_OPTIONS_WITH_VALUE = {
    "-j", "--jobs", "-P", "--max-procs", "-S", "--sshlogin", "--slf", "--sshloginfile", "-a", "--arg-file", "-I",
    "-C", "--colsep", "-d", "--delimiter", "-E", "-n", "--max-args", "-N", "-L", "--max-lines", "-s", "--max-chars",
    "--delay", "--timeout", "--joblog", "--results", "--res", "--tmpdir", "--workdir", "--wd", "--retries",
    "--halt", "--memfree", "--load", "--tagstring", "--tag-string", "--env", "--basefile", "--bf", "--return",
    "--transferfile", "--tf", "--block", "--block-size", "--termseq", "--limit", "--header"}
PARALLEL_ARGUMENTS = {":::", ":::+"}          # the arguments follow, in the text
PARALLEL_ARGUMENT_FILES = {"::::", "::::+"}   # in files, which the text does not hold
PARALLEL_REPLACEMENT = re.compile(r"\{[0-9]*[./#%]*\}")
# Its arguments from its input or a file: like xargs', a target no one can read.
FROM_PARALLEL = "<input of parallel>"
# Stands for the commands of a shell fed from a variable, a substitution or
# another program: what it runs is not in the text.
FROM_SHELL_INPUT = "<input of a shell>"
# Stands for a command line the shell makes at run time and runs (``bash -c
# "$cmd"``, ``eval "$(minikube docker-env)"``, ``. <(kubectl completion
# bash)``): unread, as a command named at run time is, where the line holds
# a restart's words.
FROM_RUN_TIME_LINE = "<a command line made at run time>"
# Stands for code another language runs (``python3 -c …``): followed by the
# code when the text holds it, by nothing when it comes from elsewhere.
FROM_OTHER_LANGUAGE = "<code of another language>"
# In the code's place, with the interpreter's name after it, when a heredoc
# feeds the code: it is in the line, after that name.
HEREDOC_CODE = "<in a heredoc>"


@dataclass(frozen=True)
class Interpreter:
    """A language's command: the short options that give it its code on the
    command line, those that take a value of their own, those that run a
    module (as a script would be run), and the long ones that give code."""

    name: re.Pattern
    code: str
    with_value: str = ""
    module: str = ""
    long_code: tuple[str, ...] = ()
    long_with_value: tuple[str, ...] = ()


INTERPRETERS = (Interpreter(re.compile(r"(?:python|pypy)[0-9.]*"), "c", with_value="WX", module="m",
                            long_with_value=("--check-hash-based-pycs",)),
                Interpreter(re.compile(r"perl[0-9.]*"), "eE", with_value="IMmx"),
                Interpreter(re.compile(r"ruby[0-9.]*"), "e", with_value="IrCE", long_with_value=("--encoding",)),
                Interpreter(re.compile(r"php[0-9.]*"), "r", with_value="cdz"),
                Interpreter(re.compile(r"node(?:js)?"), "ep", with_value="rC", long_code=("--eval", "--print"),
                            long_with_value=("--require", "--import", "--loader", "--experimental-loader",
                                             "--env-file", "--input-type", "--conditions", "--title")))

# What they write into a pipe is in the text, when their words are.
PRINTING_COMMANDS = {"echo", "printf"}
PRINTF_DIRECTIVE = re.compile(r"%(?:%|[-+ #0]*[0-9]*(?:\.[0-9]*)?[a-zA-Z])")
ESCAPES = {"n": "\n", "t": "\t", "\\": "\\"}
WATCH_OPTIONS_WITH_VALUE = {"-n", "--interval", "-q", "--equexit", "-s", "--shotsdir"}
# find's actions that run a command, and whether it runs where find was called
# (-execdir and -okdir run it in the directory of each file found).
FIND_RUNS = {"-exec": True, "-ok": True, "-execdir": False, "-okdir": False}
SSH_OPTIONS_WITH_VALUE = {"-B", "-b", "-c", "-D", "-E", "-e", "-F", "-I", "-i", "-J", "-L", "-l", "-m", "-O", "-o",
                          "-P", "-p", "-Q", "-R", "-S", "-W", "-w"}


@dataclass
class SimpleCommand:
    """One command with its words, the variables set just before it, and the
    directory a preceding ``cd`` in the same line moved to."""

    words: list[str]
    env: dict[str, str] = field(default_factory=dict)
    cwd: Optional[str] = None
    inherits_env: bool = True     # False after sudo (without -E), doas or env -i
    chdir: Optional[str] = None   # env -C DIR, sudo -D DIR: where the command runs

    @property
    def name(self) -> str:
        return posixpath.basename(self.words[0]) if self.words else ""

    def text(self) -> str:
        return shlex.join(self.words)


@dataclass(frozen=True)
class Wrapped:
    """A command line run by another command: ``bash -c LINE`` (here) or
    ``ssh host LINE`` (elsewhere, so a ``cd`` before it does not apply).
    Here, the directory and variables prefixes gave it (``env -C DIR``,
    ``sudo -i``, ``VAR=x``, ``sudo``'s own environment) hold in it too."""

    line: str
    same_directory: bool
    chdir: Optional[str] = None
    env: dict[str, str] = field(default_factory=dict)
    inherits_env: bool = True


@dataclass(frozen=True)
class ReadsInput:
    """A shell that runs what it reads on its standard input: ``bash``,
    ``sh -s`` (here) or ``ssh host`` with no command (elsewhere); or, with
    ``other_language``, an interpreter (``python3``, ``python3 -``)."""

    same_directory: bool
    other_language: bool = False
    interpreter: str = ""      # its name as written, with other_language
    # As a wrapped line's (Wrapped): what its prefixes gave it, here
    chdir: Optional[str] = None
    env: dict[str, str] = field(default_factory=dict)
    inherits_env: bool = True


@dataclass(frozen=True)
class Input:
    """What a command reads on its standard input, as the text says it:
    ``text`` is None when it comes from a variable, a substitution or
    another program; a heredoc's is "" (its body is read with the line)."""

    text: Optional[str]
    heredoc: bool = False


@dataclass(frozen=True)
class HereString:
    """``<<< WORD``: the word is the input of the command it is given to."""

    word: str


def tokens(line: str) -> list[str]:
    line = _as_bash_reads(line)
    try:
        return _lex(line)
    except ValueError:
        # An unbalanced quote or a trailing backslash: bash would refuse that
        # line, but earlier lines of a script still run. Look again without
        # quotes and escapes (seeing too much rather than too little).
        return _lex(_shown(line).replace('"', " ").replace("'", " ").replace("\\", " "))


def _shown(token: str) -> str:
    """A word with the operator characters _as_bash_reads hid in it."""
    return token.translate(SHOWN)


def _lex(line: str) -> list[str]:
    lexer = shlex.shlex(line, posix=True, punctuation_chars=OPERATOR_CHARS)
    lexer.whitespace = " \t\r"          # newlines separate commands, as in a script
    lexer.whitespace_split = True
    lexer.commenters = ""               # shlex's comments swallow the newline: _as_bash_reads takes them out
    return list(lexer)


def _as_bash_reads(line: str, heredoc_depth: int = 0) -> str:
    """``line`` for the lexer, read with bash's quoting: without its comments
    (a ``#`` that starts a word, outside quotes, up to but not including the
    end of its line); with its line continuations joined (a backslash-newline
    outside single quotes and comments is taken out); and with ``GLUED`` where
    a word runs on into a substitution or on from one, which the lexer would
    split there (``x`echo y``, ``$(pwd)/compose.yml``). A heredoc's body is
    read on its own (``heredoc_depth``: within how many bodies ``line`` is;
    deeper than ``MAX_DEPTH``, a heredoc in it is read as the line's text)."""
    out: list[str] = []
    quote = None
    # The "(" and "$(" not closed yet; QUOTED_SUBSTITUTION for a "$(" within
    # double quotes, inside which quoting starts afresh until its ")".
    opened: list[str] = []
    backquoted = False
    heredocs: list[tuple[bool, str]] = []   # begun on this line: their bodies follow its end
    i = 0
    while i < len(line):
        char = line[i]
        if quote is None and char == "#" and (not out or (out[-1][-1] in " \t\n;&|()" and out[-1][0] != "\\")):
            end = line.find("\n", i)
            i = len(line) if end < 0 else end
            continue
        if quote is None and char == "$" and line[i + 1:i + 2] in ("'", '"'):
            if line[i + 1] == '"':   # $"…": a string for translation, read as "…"
                i += 1
                continue
            end = _ansi_c_end(line, i + 2)
            if end is not None:   # $'…': the string bash makes of it, single-quoted
                text = _ansi_c(line[i + 2:end]).translate(HIDDEN)
                out.append("'" + text.replace("'", "'\\''") + "'")
                i = end + 1
                continue
        if char == "\\" and quote != "'":
            if line[i + 1:i + 2] != "\n":
                out.append(line[i:i + 2].translate(HIDDEN))   # an escaped space ends no word: "foo\ #" holds no comment
            i += 2
            continue
        if quote == '"' and char == "(" and line[i - 1:i] == "$":
            opened.append(QUOTED_SUBSTITUTION)   # "$(echo "a # b")": its own quotes, its own comments
            quote = None
            out.append(char)
            i += 1
            continue
        if char in "'\"" and quote in (None, char):
            quote = None if quote else char
        out.append(char.translate(HIDDEN) if quote else char)
        i += 1
        if quote is not None:
            continue
        if char == "<" and line[i:i + 1] == "<" and line[i + 1:i + 2] != "<" and line[i - 2:i - 1] != "<" \
                and heredoc_depth < MAX_DEPTH:
            heredoc = HEREDOC_WORD.match(line, i + 1)
            if heredoc:   # `<<EOF`, `<<-'EOF'`: read as a word next, its body after this line
                heredocs.append((heredoc["tabs"] == "-", _unquoted(heredoc["word"])))
        elif char == "\n" and heredocs:
            i = _heredoc_bodies(line, i, heredocs, out, heredoc_depth + 1)
            heredocs = []
            continue
        ends_substitution = False
        if char == "(":
            opened.append("$(" if line[i - 2:i] == "$(" else "(")
        elif char == ")" and opened:
            closed = opened.pop()
            if closed == QUOTED_SUBSTITUTION:
                quote = '"'   # back within the double quotes it began in
                continue
            ends_substitution = closed == "$("
        elif char == "`":
            backquoted = not backquoted
            ends_substitution = not backquoted
            if backquoted and len(out) > 1 and out[-2][-1] not in " \t\r\n" + OPERATOR_CHARS:
                out.insert(len(out) - 1, GLUED)   # the word before goes on into it: `x`echo y``
        if ends_substitution and i < len(line) and line[i] not in " \t\r\n" + OPERATOR_CHARS:
            out.append(GLUED)   # what follows is the same word: `-f $(pwd)/compose.yml`
    return "".join(out)


# After "<<" (not "<<<"): a heredoc's "-" (leading tabs stripped) and its delimiter, quoted or not.
HEREDOC_WORD = re.compile(r"(?P<tabs>-?)[ \t]*(?P<word>(?:[^\s;&|()<>`'\"\\]|\\.|'[^']*'|\"(?:[^\"\\]|\\.)*\")+)")


def _unquoted(word: str) -> str:
    """A heredoc's delimiter as bash compares it: quotes and backslashes taken out."""
    try:
        return "".join(shlex.split(word))
    except ValueError:
        return word


def _heredoc_bodies(line: str, i: int, heredocs: list[tuple[bool, str]], out: list[str], depth: int) -> int:
    """The bodies of the heredocs begun on the line that ends at ``i``, each
    up to its delimiter's line, put in ``out`` as commands of their own (a
    body may be fed to a shell: ``bash <<EOF``). A body is no shell text
    the line's quoting goes on through: read alone, and one with a stray
    quote (``it's``) as the words of its lines, so that its quotes cannot
    hide the commands after its delimiter. Gives where the line reads on."""
    for strip_tabs, delimiter in heredocs:
        body: list[str] = []
        terminator = None
        while i < len(line) and terminator is None:
            end = line.find("\n", i)
            text = line[i:] if end < 0 else line[i:end]
            i = len(line) if end < 0 else end + 1
            if (text.lstrip("\t") if strip_tabs else text) == delimiter:
                terminator = text
            else:
                body.append(text)
        read = _as_bash_reads("\n".join(body), depth)
        try:
            _lex(read)
        except ValueError:   # a stray quote or a trailing backslash: its words, as tokens() reads such a line
            read = _shown(read).replace('"', " ").replace("'", " ").replace("\\", " ")
        out.append(read + "\n")
        if terminator is not None:
            out.append(terminator + "\n")
    return i


def _ansi_c_end(line: str, start: int) -> Optional[int]:
    """Where the ``$'…'`` whose text begins at ``start`` ends (its closing
    quote: an escaped one, ``\\'``, is text), or None if it does not."""
    i = start
    while i < len(line):
        if line[i] == "\\":
            i += 2
        elif line[i] == "'":
            return i
        else:
            i += 1
    return None


# Bash's escapes within $'…' (bash(1), QUOTING).
_ANSI_C_ESCAPE = re.compile(r"\\(?:([abeEfnrtv\\'\"?])|([0-7]{1,3})|x([0-9a-fA-F]{1,2})|u([0-9a-fA-F]{1,4})"
                            r"|U([0-9a-fA-F]{1,8})|c(.)|(.))", re.DOTALL)
_ANSI_C_LETTERS = {"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r", "t": "\t",
                   "v": "\v"}


def _ansi_c(text: str) -> str:
    """The text of ``$'text'``, as bash makes it: ``re$'st\\x61rt'`` is restart."""
    def one(match: re.Match) -> str:
        letter, octal, hex_, short, long_, control, other = match.groups()
        if letter is not None:
            return _ANSI_C_LETTERS.get(letter, letter)
        if octal is not None:
            return chr(int(octal, 8) & 0xFF)
        number = hex_ or short or long_
        if number is not None:
            return chr(min(int(number, 16), 0x10FFFF))
        if control is not None:
            return chr(ord(control) & 0x1F)
        return "\\" + other   # not an escape: kept as it is
    return _ANSI_C_ESCAPE.sub(one, text)


def split_commands(line: str) -> list[list[str]]:
    """The word lists of the simple commands in ``line``: operators split,
    redirections and their targets dropped."""
    return [part for part in _parts(line) if isinstance(part, list)]


OPENS, CLOSES = "(", ")"
# Between two commands of a pipeline: what the first writes, the second reads.
PIPE = "|"
# Before a command given a heredoc, whose body is read as commands of the line itself.
HEREDOC = "<<"


def _parts(line: str) -> Iterator[list[str] | str | HereString | Input]:
    """The word lists of ``line``'s simple commands, and between them
    ``OPENS`` and ``CLOSES`` where a subshell or a substitution begins and
    ends (what a ``cd`` or ``export`` in it does ends there too), ``PIPE``
    where a pipe joins two, and before a command the ``HereString`` or
    ``HEREDOC`` it reads, or the ``Input`` a process substitution feeds it.
    Raises ``TooDeep`` for substitutions nested more than ``MAX_DEPTH`` deep."""
    yield from _parts_of(tokens(line))


# A command's word that a substitution stood for: no one can read it from the text.
SUBSTITUTED = "$(…)"
# A command's word that a process substitution stands for (``diff <(a) <(b)``,
# ``bash <(curl …)``): the name of a pipe that what the commands in it print
# comes through.
PROCESS_SUBSTITUTED = "<(…)"
# Marks text that runs on into or from a substitution with no space between
# (_as_bash_reads): the same word. A control character no command line holds.
GLUED = "\x01"


def _is_operator(token: str) -> bool:
    return bool(token) and all(c in OPERATOR_CHARS for c in token)


def _parts_of(items: list[str], depth: int = 0) -> Iterator[list[str] | str | HereString | Input]:
    if depth > MAX_DEPTH:
        raise TooDeep(" ".join(items))
    current: list[str] = []
    case_patterns = 0   # inside case … esac, a pattern's ")" ends no subshell
    redirected = False  # the process substitution next is a redirection's target (`< <(cmd)`), no word
    i = 0
    while i < len(items):
        token = items[i]
        i += 1
        if not _is_operator(token):
            if not current and token in ("case", "esac"):
                case_patterns += 1 if token == "case" else -1 if case_patterns else 0
            current.append(_shown(token if token.endswith(GLUED) else token.lstrip(GLUED)))
            continue
        if "`" in token and token != "`":   # a backquote with other operators: each on its own
            items[i - 1:i] = [piece for piece in re.split("(`)", token) if piece]
            i -= 1
            continue
        if token[:2] in ("<(", ">("):
            # A process substitution: its commands run in a scope of their own
            # while the command (which goes on after it) reads or writes a pipe.
            inner, i = _substitution(items, i, token[2:], CLOSES)
            yield OPENS
            yield from _parts_of(inner, depth + 1)
            yield CLOSES
            if not redirected:
                current.append(PROCESS_SUBSTITUTED)
            redirected = False
            continue
        substituted = token == "`" or (token[0] == OPENS and current and current[-1].endswith("$"))
        if substituted:
            # A substitution ($( … ) or backquotes) among a command's words or
            # before them: its commands run first, in a scope of their own, and
            # the command keeps a word in its place.
            inner, i = _substitution(items, i, token[1:], "`" if token == "`" else CLOSES)
            yield OPENS
            yield from _parts_of(inner, depth + 1)
            yield CLOSES
            if token != "`" or (current and current[-1].endswith(GLUED)):
                current[-1] = current[-1][:-1] + SUBSTITUTED   # in place of the "$" or the mark
            elif current and current[-1].endswith("="):
                current[-1] += SUBSTITUTED
            else:
                current.append(SUBSTITUTED)
            if i < len(items) and items[i].startswith(GLUED):
                current[-1] += _shown(items[i][1:])
                i += 1
            continue
        if any(c in SEPARATOR_CHARS for c in token) or set(token) == {"&"}:
            if current:
                yield current
            current = []
            if not case_patterns:
                yield from (c for c in token if c in (OPENS, CLOSES))
            if token.lstrip(CLOSES) in ("|", "|&"):
                yield PIPE
            continue
        # A redirection (>, 2>&1, &>, <<EOF): drop its target, and the file
        # descriptor number shlex split off in front of it. A process
        # substitution after it (< <(cmd)) is no target: it is read next, as
        # a subshell. A substitution in a quoted target ("$(cmd).log") runs.
        if current and current[-1].isdigit():
            current.pop()
        if i < len(items) and items[i][:2] in ("<(", ">("):
            redirected = True
            if token == "<":
                yield Input(None)   # `bash < <(…)`: fed what a command prints at run time
        elif i < len(items) and not _is_operator(items[i]):
            target = _shown(items[i])
            i += 1
            if token == "<<<":
                yield HereString(target)
            elif token == HEREDOC:
                yield HEREDOC
            if "$(" in target or "`" in target:
                yield OPENS
                yield from _parts_of(tokens(target), depth + 1)
                yield CLOSES
    if current:
        yield current


def _substitution(items: list[str], i: int, rest: str, closing: str) -> tuple[list[str], int]:
    """The tokens of a ``$( … )`` whose ``(`` was just read (``rest``: what
    came after it in the same operator token), or of backquotes (``closing``
    the backquote), and where to read on after it ends. What follows the end
    in its operator token is put back to be read on its own. Never closed,
    it runs to the end."""
    inner: list[str] = []
    depth = 1
    queue = [rest] if rest else []
    while queue or i < len(items):
        if queue:
            token = queue.pop()
        else:
            token = items[i]
            i += 1
        if not _is_operator(token):
            inner.append(token)
            continue
        for place, char in enumerate(token):
            if closing == "`":
                depth -= char == "`"
            else:
                depth += (char == OPENS) - (char == CLOSES)
            if depth == 0:
                if token[:place]:
                    inner.append(token[:place])
                if token[place + 1:]:
                    items.insert(i, token[place + 1:])
                return inner, i
        inner.append(token)
    return inner, i


class TooDeep(ValueError):
    """Command lines nested in one another deeper than ``MAX_DEPTH``: not read."""


def simple_commands(line: str, cwd: Optional[str] = None, depth: int = 0,
                    exported: Optional[dict[str, str]] = None,
                    stdin: Optional[Input] = None) -> Iterator[SimpleCommand]:
    """Every simple command ``line`` would run, with prefixes (sudo, env,
    timeout, ...) taken off and wrapped command lines (``bash -c``, ``ssh
    host cmd``, ``eval``) and substitutions (``$( … )``, backquotes, also
    within double quotes) opened up; ``stdin``, what the command wrapping
    ``line`` was fed, is the input of its first command. Raises ``TooDeep``
    rather than leave a command unread."""
    if depth > MAX_DEPTH:
        raise TooDeep(line)
    exported = dict(exported or {})
    scopes: list[tuple[Optional[str], dict[str, str], Optional[Input]]] = []
    previous: SimpleCommand | Wrapped | ReadsInput | None = None   # what a pipe would take the output of
    previous_input: Optional[Input] = None
    for words in _parts(line):
        if words == OPENS:
            scopes.append((cwd, dict(exported), stdin))
            stdin = previous = None
            continue
        if words == CLOSES:
            if scopes:
                cwd, exported, stdin = scopes.pop()
            previous = None   # the output of a subshell or a substitution is not in the text
            continue
        if words == PIPE:
            stdin = _written(previous, previous_input)
            continue
        if isinstance(words, HereString):
            stdin = Input(words.word if is_literal(words.word) else None)
            continue
        if words == HEREDOC:
            stdin = Input("", heredoc=True)   # its body is read with the line's own commands
            continue
        if isinstance(words, Input):
            stdin = words
            continue
        command = previous = _unwrap(words)
        previous_input, stdin = stdin, None
        passed_on = previous_input   # `… | ssh host bash`: the wrapped line reads what its wrapper was fed
        if isinstance(command, ReadsInput):
            command, passed_on = _fed(command, previous_input), None   # the text fed is the line, read up
        for word in words:
            if isinstance(command, Wrapped) and word in command.line:
                continue   # read with the wrapped line, below
            if "$(" in word.replace(SUBSTITUTED, "") or "`" in word:
                # a substitution inside double quotes, which the lexer kept in one word
                yield from simple_commands(word, cwd, depth + 1, exported)
        if command is None:
            continue
        if isinstance(command, Wrapped):        # a command line inside a command: look inside
            here = command.same_directory
            inner_cwd = (_cd(cwd, [command.chdir]) if command.chdir else cwd) if here else None
            inner_env = {**(exported if command.inherits_env else {}), **command.env} if here else None
            yield from simple_commands(command.line, inner_cwd, depth + 1, inner_env, passed_on)
            continue
        command.cwd = _cd(cwd, [command.chdir]) if command.chdir else cwd
        if command.inherits_env:
            command.env = {**exported, **command.env}
        if command.name in ("cd", "pushd"):
            cwd = _cd(cwd, command.words[1:])
            continue
        if command.name == "popd":
            cwd = None   # back to a directory of the stack, which is not followed
            continue
        if command.name == "export":
            exported.update(arg.split("=", 1) for arg in command.words[1:] if "=" in arg and not arg.startswith("-"))
            continue
        yield command


def _cd(cwd: Optional[str], args: list[str]) -> Optional[str]:
    targets = [a for a in args if not a.startswith("-")]
    if not targets or targets[0].startswith(("~", "$")):
        return None      # somewhere we cannot know
    target = targets[0]
    if cwd and not target.startswith("/"):
        target = posixpath.join(cwd, target)
    return posixpath.normpath(target)


@dataclass
class _Prefixed:
    """What the prefixes read so far give the command after them."""
    env: dict[str, str] = field(default_factory=dict)
    inherits_env: bool = True
    chdir: Optional[str] = None


def _unwrap(words: list[str]) -> SimpleCommand | Wrapped | ReadsInput | None:
    prefixed = _Prefixed()
    command = _unwrap_after(words, prefixed)
    if isinstance(command, (Wrapped, ReadsInput)) and command.same_directory:
        return replace(command, chdir=prefixed.chdir, env={**prefixed.env, **command.env},
                       inherits_env=prefixed.inherits_env and command.inherits_env)
    return command


def _unwrap_after(words: list[str], prefixed: _Prefixed) -> SimpleCommand | Wrapped | ReadsInput | None:
    while words:
        head, name = words[0], posixpath.basename(words[0])
        if "=" in head and not head.startswith("=") and head.split("=", 1)[0].isidentifier():
            key, value = head.split("=", 1)
            prefixed.env[key] = value
            words = words[1:]
        elif head in NAMING_KEYWORDS and words[2:3] and words[2] in ("{", "(", "(("):
            words = words[2:]   # the name is no command; what follows is
        elif head in SHELL_KEYWORDS or head == "function":
            words = words[1:]
        elif name in PREFIX_COMMANDS and not (name == "runuser" and _runuser_as_su(words[1:])):
            options, rest = read_options(words[1:], PREFIX_COMMANDS[name])
            if name == "sudo" and any(o in SUDO_RUNS_NOTHING or "l" in _flags(o, PREFIX_COMMANDS["sudo"])
                                      for o, _ in options):
                return None
            if name == "env" and rest[:1] == ["-"]:   # `env -` is `env -i`
                options, rest = options + [("-i", None)], rest[1:]
            split = _env_split_string(options) if name == "env" else None
            if split is not None:   # `env -S 'docker restart x'` runs the words of its value
                return Wrapped(" ".join([split, *map(shlex.quote, rest)]), True)
            if _resets_env(name, options):
                # what was set or exported before does not reach the command
                prefixed.env, prefixed.inherits_env = {}, False
            prefixed.env.update(_environment_given(name, options))
            prefixed.chdir = _chdir(name, options) or prefixed.chdir
            words = rest[1:] if name in PREFIX_WITH_ARGUMENT else rest
        elif name == "faketime":
            i = 1
            while i < len(words) and (words[i] in FAKETIME_FLAGS or words[i] in FAKETIME_OPTIONS_WITH_VALUE):
                i += 2 if words[i] in FAKETIME_OPTIONS_WITH_VALUE else 1
            words = words[i + 1:]   # after the timestamp
        elif name == "gdb" and "--args" in words:
            words = words[words.index("--args") + 1:]   # gdb [options] --args PROGRAM ARG…
        elif name in TERMINALS:
            return _run_lines(TERMINALS[name](words[1:]))
        elif (inside := run_elsewhere(name, words[1:])) is not None:   # docker exec, kubectl exec, pct exec, …
            return _run_lines(inside)
        elif name == "flock":
            rest = _after_options(words[1:], FLOCK_OPTIONS_WITH_VALUE)
            if len(rest) > 2 and rest[1] in ("-c", "--command"):
                return _wrapped(rest[2], True)
            words = rest[1:]
        elif name in SHELLS:
            script = _shell_script(words[1:])
            if script is not None:
                return _wrapped(script, True)
            if _shell_options(words[1:])[1][:1] == [PROCESS_SUBSTITUTED]:
                return SimpleCommand([FROM_RUN_TIME_LINE])   # `bash <(…)`: runs what that prints
            return ReadsInput(True) if _reads_input(words[1:]) else None
        elif name in (".", "source"):
            if words[1:2] == [PROCESS_SUBSTITUTED]:   # `. <(…)`: what that prints is run
                return SimpleCommand([FROM_RUN_TIME_LINE])
            return ReadsInput(True) if words[1:2] and words[1] in STDIN_FILES else None   # else a file we cannot see
        elif name in AWKS:
            return _awk_program(words[1:])
        elif name in SEDS:
            return _sed_script(words[1:])
        elif (language := _interpreter(name)) is not None:
            return _other_language(language, head, words[1:])
        elif name == "su" or name == "runuser" and _runuser_as_su(words[1:]):
            # Words after the user go to the user's shell, after "--" too: `su ops -- -c CMD` runs CMD.
            script = parse_args([word for word in words[1:] if word != "--"],
                                SU_OPTIONS_WITH_VALUE).value("-c", "--command", "--session-command")
            return _wrapped(script, False) if script is not None else None
        elif name == "script":
            # Options anywhere (GNU getopt): `script /dev/null -qc LINE` runs LINE too.
            line = parse_args([word for word in words[1:] if word != "--"],
                              SCRIPT_OPTIONS_WITH_VALUE).value("-c", "--command")
            return _wrapped(line, True) if line is not None else None
        elif name == "xargs":
            words = _after_options(words[1:], XARGS_OPTIONS_WITH_VALUE)
            words = words + [FROM_XARGS] if words else []
        elif name == "eval":
            return _wrapped(" ".join(words[1:]), True)
        elif name == "parallel":
            return _run_by_parallel(words[1:])
        elif name == "watch":
            return _watched(words[1:])
        elif name in ("at", "batch"):
            return _scheduled_by_at(words[1:])
        elif name == "find" and (run := _run_by_find(words[1:])) is not None:
            return run
        elif name == "ssh":
            rest = _after_options(words[1:], SSH_OPTIONS_WITH_VALUE)
            # OpenSSH reads options after the destination too: `ssh host -t cmd`.
            remote = _after_options(rest[1:], SSH_OPTIONS_WITH_VALUE) if rest else []
            if remote:
                return Wrapped(" ".join(remote), False)
            return ReadsInput(False) if rest and not _forwards_only(words[1:]) else None
        else:
            return SimpleCommand(words, prefixed.env, inherits_env=prefixed.inherits_env, chdir=prefixed.chdir)
    return None


def _wrapped(line: str, same_directory: bool) -> Wrapped | SimpleCommand:
    """A command line run inside a command (``bash -c LINE``, ``eval LINE``),
    or, when the shell makes it at run time (``bash -c "$cmd"``, ``eval
    "$(…)"``), commands no one can read."""
    if _made_at_run_time(line):
        return SimpleCommand([FROM_RUN_TIME_LINE])
    return Wrapped(line, same_directory)


def _made_at_run_time(line: str) -> bool:
    return bool(line.strip()) and (wholly_at_run_time(line) or all(wholly_at_run_time(word) for word in line.split()))


def _run_lines(lines: list[RunLine]) -> Optional[Wrapped]:
    """The command lines a multiplexer runs or types, or ``sg`` runs, one a
    line; one the shell makes at run time (``tmux new -d "$cmd"``) stands
    for commands no one can read."""
    if not lines:
        return None
    text = "\n".join(shlex.quote(FROM_RUN_TIME_LINE) if _made_at_run_time(run.line)
                     else f"(cd {shlex.quote(run.directory)}\n{run.line}\n)" if run.directory else run.line
                     for run in lines)
    return Wrapped(text, all(run.same_directory for run in lines))


def _scheduled_by_at(args: list[str]) -> Optional[ReadsInput]:
    """``at`` and ``batch`` run later, in this directory and with this
    environment, the commands they read on their input, as a shell would;
    from ``-f FILE``, a script we cannot see. ``-l``, ``-r``/``-d``, ``-c``
    and ``-V`` list, remove or print jobs, and run none."""
    options, _ = read_options(args, AT_OPTIONS_WITH_VALUE)
    letters = "".join(_flags(option, AT_OPTIONS_WITH_VALUE) for option, _ in options)
    if "f" in letters or any(letter in AT_RUNS_NOTHING for letter in letters):
        return None
    return ReadsInput(True)


def _interpreter(name: str) -> Optional[Interpreter]:
    return next((language for language in INTERPRETERS if language.name.fullmatch(name)), None)


def _other_language(language: Interpreter, name: str, args: list[str]) -> SimpleCommand | ReadsInput | None:
    """The code an interpreter is given on its command line (``python3 -c
    CODE``, ``perl -ne CODE``, ``perl -e'CODE'``, ``node --eval=CODE``), which
    no shell reading can see into; with no script named (or ``-``), it runs
    what it reads on its input. A script or a module is one we cannot see."""
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg in ("-", "--"):
            return ReadsInput(True, True, name) if arg == "-" or i == len(args) else None
        if not arg.startswith("-"):
            return None
        option, equals, glued = arg.partition("=")
        if option in language.long_code:
            return SimpleCommand([FROM_OTHER_LANGUAGE, glued if equals else (args[i] if i < len(args) else "")])
        if arg.startswith("--"):
            i += 1 if option in language.long_with_value and not equals else 0   # --require dotenv/config
            continue
        for place, letter in enumerate(arg[1:], start=1):
            if letter in language.code:
                return SimpleCommand([FROM_OTHER_LANGUAGE, arg[place + 1:] or (args[i] if i < len(args) else "")])
            if letter in language.with_value:
                i += 0 if arg[place + 1:] else 1   # -W ignore, or -Wignore
                break
            if letter in language.module:
                return None   # `python3 -m pkg`: a script we cannot see
    return ReadsInput(True, True, name)


def _runuser_as_su(args: list[str]) -> bool:
    """runuser given no ``-u USER`` takes su's arguments: a user, then its options anywhere."""
    return not parse_args(args, SU_OPTIONS_WITH_VALUE | {"-u", "--user"}).has("-u", "--user")


def _run_by_parallel(args: list[str]) -> Optional[Wrapped]:
    """The commands GNU ``parallel`` runs, one a line, through a shell: its
    command with each argument after ``:::`` in place of ``{}`` (or after
    it), or the arguments themselves when no command is given. Arguments
    from its input or a file (``::::``, ``-a``) are, like xargs', a target
    no one can read; commands from there, a shell's unseen input."""
    options, rest = read_options(args, PARALLEL_OPTIONS_WITH_VALUE)
    separators = PARALLEL_ARGUMENTS | PARALLEL_ARGUMENT_FILES
    first = next((i for i, word in enumerate(rest) if word in separators), len(rest))
    command, arguments = rest[:first], []
    unread = first == len(rest) or any(is_option(option, ("-a", "--arg-file")) for option, _ in options)
    in_text = False
    for word in rest[first:]:
        if word in separators:
            in_text = word in PARALLEL_ARGUMENTS
            unread = unread or not in_text
        elif in_text:
            arguments.append(word)
    if not command:   # the arguments are the commands; read from elsewhere, a shell's unseen input
        lines = arguments + ([shlex.quote(FROM_SHELL_INPUT)] if unread else [])
        return Wrapped("\n".join(lines), True) if lines else None
    arguments = [shlex.quote(word) for word in arguments] + ([shlex.quote(FROM_PARALLEL)] if unread else [])
    line = " ".join(command)
    if PARALLEL_REPLACEMENT.search(line):
        return Wrapped("\n".join(PARALLEL_REPLACEMENT.sub(lambda _: argument, line) for argument in arguments), True)
    return Wrapped("\n".join(f"{line} {argument}" for argument in arguments), True)


def _watched(args: list[str]) -> Optional[Wrapped]:
    """What ``watch`` runs over and over: its words joined for ``sh -c``, or
    with ``-x`` run as they are."""
    options, rest = read_options(args, WATCH_OPTIONS_WITH_VALUE)
    if not rest:
        return None
    as_they_are = any(o == "--exec" or "x" in _flags(o, WATCH_OPTIONS_WITH_VALUE) for o, _ in options)
    return Wrapped(shlex.join(rest) if as_they_are else " ".join(rest), True)


def _run_by_find(args: list[str]) -> Optional[Wrapped]:
    """The commands of find's ``-exec CMD … ;`` (or ``… {} +``), ``-execdir``,
    ``-ok`` and ``-okdir``, one a line; each ``{}`` stands for a path found,
    a target no one can read from the text."""
    commands: list[str] = []
    same_directory = True
    i = 0
    while i < len(args):
        if args[i] not in FIND_RUNS:
            i += 1
            continue
        same_directory = same_directory and FIND_RUNS[args[i]]
        end = i + 1
        while end < len(args) and not (args[end] == ";" or (args[end] == "+" and args[end - 1] == "{}")):
            end += 1
        commands.append(shlex.join(args[i + 1:end]))
        i = end + 1
    return Wrapped("\n".join(commands), same_directory) if commands else None


def _env_split_string(options: list[Option]) -> Optional[str]:
    """The value of env's ``-S``/``--split-string`` (``-iS VALUE``,
    ``-SVALUE`` and ``--split-string=VALUE`` too), if it was given one."""
    for option, value in options:
        if option in ("-S", "--split-string"):
            return value
        if option.startswith("--"):
            continue
        for place, letter in enumerate(option[1:], 1):
            if letter == "S":
                return option[place + 1:] or value
            if f"-{letter}" in PREFIX_COMMANDS["env"]:
                break   # the rest of the cluster is that option's value (-uS: the variable S)
    return None


def _resets_env(name: str, options: list[Option]) -> bool:
    """sudo (unless told -E or --preserve-env) and doas start the command
    with an environment of their own; so does env -i, and so does the
    service manager for systemd-run's transient service (not for a --scope,
    which systemd-run runs itself)."""
    flags = [option for option, _ in options]
    if name == "sudo":
        return not any(o.startswith("--preserve-env") or (not o.startswith("--") and "E" in o) for o in flags)
    if name == "env":
        return any(o in ("-i", "--ignore-environment") or (not o.startswith("--") and "i" in o) for o in flags)
    if name == "systemd-run":
        return "--scope" not in flags
    return name in ("doas", "run0")


def _environment_given(name: str, options: list[Option]) -> dict[str, str]:
    """The variables systemd-run's -E NAME=VALUE (run0's --setenv) sets for the command."""
    if name not in ("systemd-run", "run0"):
        return {}
    pairs = (value.split("=", 1) for option, value in options if is_option(option, ("-E", "--setenv")) and value)
    return {key: value for key, value in (p for p in pairs if len(p) == 2)}


# The options of a prefix command that run the command in another directory.
CHDIR_OPTIONS = {"env": ("-C", "--chdir"), "sudo": ("-D", "--chdir"), "systemd-run": ("--working-directory",),
                 "run0": ("-D", "--chdir")}


def _chdir(name: str, options: list[Option]) -> Optional[str]:
    chosen = next((value for option, value in options if is_option(option, CHDIR_OPTIONS.get(name, ())) and value),
                  None)
    if chosen is None and name == "sudo" and any(o == "--login" or "i" in _flags(o, PREFIX_COMMANDS[name])
                                                 for o, _ in options):
        return "~"   # a login shell starts in the target user's home, which is not known here
    if chosen is None and name == "systemd-run":
        return _transient_service_directory(options)
    if chosen is None and name == "run0":
        return _run0_directory(options)
    return chosen


def _run0_directory(options: list[Option]) -> Optional[str]:
    """run0 keeps the caller's directory when the command runs as root, and
    starts in the target user's home (not known here) otherwise."""
    user = None
    for option, value in options:
        if is_option(option, ("-u", "--user")):
            user = value
    return None if user in (None, "root", "0") else "~"


def _transient_service_directory(options: list[Option]) -> Optional[str]:
    """A transient service starts in / (a user's service in that user's home,
    which is not known here), not where systemd-run was called, unless told
    -d/--same-dir; a --scope is run by systemd-run itself, where it is."""
    flags = [option for option, _ in options]
    letters = "".join(_flags(option, PREFIX_COMMANDS["systemd-run"]) for option in flags)
    if "--scope" in flags or "--same-dir" in flags or "d" in letters:
        return None
    return "~" if "--user" in flags or "--capsule" in flags or "C" in letters else "/"


def _after_options(args: list[str], with_value: set[str]) -> list[str]:
    """``args`` from the first word that is not an option."""
    return read_options(args, with_value)[1]


def _flags(option: str, with_value: set[str]) -> str:
    """The letters of a cluster of short options (``-il``), up to and with
    the first that takes a value (``-ulucas``: only ``u``, whose value is "lucas")."""
    if option.startswith("--") or not option.startswith("-"):
        return ""
    letters = ""
    for letter in option[1:]:
        letters += letter
        if f"-{letter}" in with_value:
            break
    return letters


def _value_follows(arg: str, with_value: set[str]) -> bool:
    """Is the next word the value of ``arg``, an option or a cluster of
    short ones (``sudo -iu root``: ``-u`` takes ``root``; ``-uroot`` holds its own)?"""
    if arg in with_value:
        return True
    if arg.startswith("--") or len(arg) < 3:
        return False
    for place, letter in enumerate(arg[1:], 1):
        if f"-{letter}" in with_value:
            return place == len(arg) - 1
    return False


def _shell_script(args: list[str]) -> Optional[str]:
    """The command string of ``bash -c '...'`` (or ``-lc``, ``-ec``, with
    ``-o pipefail``, ``--norc``, ``--`` ... around it): the first word after
    the options, when one of them is ``c``."""
    letters, rest = _shell_options(args)
    return rest[0] if "c" in letters and rest else None   # else `bash script.sh`: a script we cannot see


def _reads_input(args: list[str]) -> bool:
    """Does the shell run what it reads on its standard input: no ``-c`` and
    no script named (``bash``, ``sh -x``), or ``-s`` (``bash -s -- ARG…``),
    or its input named as the script (``bash /dev/stdin``)?"""
    letters, rest = _shell_options(args)
    return "c" not in letters and ("s" in letters or not rest or rest[0] in STDIN_FILES)


def _awk_program(args: list[str]) -> Optional[SimpleCommand]:
    """awk's program: the first word after its options; None when it is a
    file's (``-f FILE``), which we cannot see."""
    i = 0
    while i < len(args):
        arg = args[i]
        option, equals, _ = arg.partition("=")
        if arg == "--":
            i += 1
            break
        if not arg.startswith("-") or arg == "-":
            break
        if option in AWK_PROGRAM_FILE or (not arg.startswith("--") and arg[1:2] in ("f", "E", "i")):
            return None
        glued = arg.startswith("--") and equals or not arg.startswith("--") and len(arg) > 2
        i += 1 if glued or option not in AWK_OPTIONS_WITH_VALUE else 2
    if i >= len(args) or not AWK_RUNS.search(args[i]):
        return None   # a program that runs nothing: it only reads, counts and prints
    return SimpleCommand([FROM_OTHER_LANGUAGE, args[i]])


def _sed_script(args: list[str]) -> Optional[SimpleCommand]:
    """sed's script (``-e`` values, else the first word after the options),
    whose ``e`` command runs a shell command; None when it is a file's."""
    scripts: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "--":
            rest += args[i:]
            break
        if arg.startswith("--"):
            option, equals, value = arg.partition("=")
            if option == "--file":
                return None
            if option == "--expression":
                scripts.append(value if equals else (args[i] if i < len(args) else ""))
                i += 0 if equals else 1
            elif option in SED_OPTIONS_WITH_VALUE and not equals:
                i += 1
        elif arg.startswith("-") and arg != "-":
            for place, letter in enumerate(arg[1:], start=1):   # -n, -ne 'p', -i.bak, -l 80
                if letter == "f":
                    return None
                if letter in "el":
                    value = arg[place + 1:] or (args[i] if i < len(args) else "")
                    i += 0 if arg[place + 1:] else 1
                    if letter == "e":
                        scripts.append(value)
                    break
                if letter == "i":
                    break   # the rest is a backup file's suffix
        else:
            rest.append(arg)
    if not scripts and rest:
        scripts = rest[:1]
    script = "\n".join(scripts)
    if not (SED_E_COMMAND.search(script) or SED_E_FLAG.search(script)):
        return None   # a script that runs nothing: it only edits and prints
    return SimpleCommand([FROM_OTHER_LANGUAGE, script])


def _shell_options(args: list[str]) -> tuple[str, list[str]]:
    """The letters of a shell's short options (``-lc``, ``+x``), and the
    words after its options (``--`` or a lone ``-`` ends them)."""
    letters = ""
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in ("--", "-"):
            i += 1
            break
        if len(arg) < 2 or arg[0] not in "-+":
            break
        if not arg.startswith("--"):
            letters += arg[1:]
        # -o pipefail, -euo pipefail, +O extglob: the option's value is the next word.
        i += 2 if _value_follows("-" + arg[1:], SHELL_OPTIONS_WITH_VALUE) else 1
    return letters, args[i:]


def _forwards_only(ssh_args: list[str]) -> bool:
    """``ssh -N`` (or ``-W host:port``) forwards, and runs no shell to read its input."""
    options = read_options(ssh_args, SSH_OPTIONS_WITH_VALUE)[0]
    return any(letter in "NW" for option, _ in options for letter in _flags(option, SSH_OPTIONS_WITH_VALUE))


def _fed(shell: ReadsInput, stdin: Optional[Input]) -> Wrapped | SimpleCommand | None:
    """What a shell that reads its input runs: the text fed to it; fed what
    the text does not say, commands no one can read."""
    if stdin is None:
        return None   # a terminal, or a file (`bash < script.sh`): a script we cannot see
    if shell.other_language:
        # Code in the text is read for what it names; a heredoc's, in the line after the interpreter.
        if stdin.heredoc:
            return SimpleCommand([FROM_OTHER_LANGUAGE, HEREDOC_CODE, shell.interpreter])
        return SimpleCommand([FROM_OTHER_LANGUAGE] + ([stdin.text] if stdin.text is not None else []))
    if stdin.text is None:
        return SimpleCommand([FROM_SHELL_INPUT])
    return Wrapped(stdin.text, shell.same_directory, shell.chdir, shell.env, shell.inherits_env)


def _written(command: SimpleCommand | Wrapped | ReadsInput | None, its_input: Optional[Input]) -> Input:
    """What ``command`` writes into a pipe, where the text says it: the
    literal words of echo and printf, and what cat given no file was fed."""
    if _passes_on_input(command) and its_input is not None:
        return its_input
    if not isinstance(command, SimpleCommand) or command.name not in PRINTING_COMMANDS:
        return Input(None)
    if not all(is_literal(word) for word in command.words[1:]):
        return Input(None)
    if command.name == "echo":
        return Input(_echo_output(command.words[1:]))
    return Input(_printf_output(command.words[1:]))


def _passes_on_input(command: SimpleCommand | Wrapped | ReadsInput | None) -> bool:
    return isinstance(command, SimpleCommand) and command.name == "cat" and all(
        word.startswith("-") for word in command.words[1:])


# What the shell puts in a word at run time: variables, substitutions.
RUN_TIME_PARTS = re.compile(r"\$\{[^}]*\}?|\$\(…\)|\$[A-Za-z_][A-Za-z0-9_]*|\$.|`[^`]*`?")


def wholly_at_run_time(word: str) -> bool:
    """A word that is nothing but what the shell puts there at run time
    (``$cmd``, ``"$@"``, ``$(printf …)``): whatever it runs or asks for, the
    text does not say."""
    word = word.strip().strip("\"")
    return not is_literal(word) and (_one_substitution(word) or not RUN_TIME_PARTS.sub("", word).strip("\"'"))


def _one_substitution(word: str) -> bool:
    """``$( … )`` or a backquoted command, and nothing around it."""
    if word.startswith("`"):
        return len(word) > 1 and word.endswith("`") and "`" not in word[1:-1]
    if not word.startswith("$("):
        return False
    depth = 0
    for place, char in enumerate(word[1:], start=1):   # quotes aside: a ")" in one only ends it early
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth == 0:
            return place == len(word) - 1
    return False


def is_literal(word: str) -> bool:
    """Not spelt by the shell at run time from a variable or a substitution."""
    return "$" not in word and "`" not in word


def _echo_output(args: list[str]) -> str:
    options = 0
    while options < len(args) and re.fullmatch(r"-[neE]+", args[options]):
        options += 1
    text = " ".join(args[options:])
    return _unescaped(text) if any("e" in option for option in args[:options]) else text


def _printf_output(args: list[str]) -> str:
    """printf's format, with its values in place of its directives, over
    again while values are left."""
    if args[:1] == ["-v"]:
        return ""   # into a variable, not out
    if args[:1] == ["--"]:
        args = args[1:]
    if not args:
        return ""
    form, values = _unescaped(args[0]), args[1:]
    out = []
    while True:
        used = 0

        def fill(directive: re.Match) -> str:
            nonlocal used
            if directive.group() == "%%":
                return "%"
            used += 1
            return values[used - 1] if used <= len(values) else ""
        out.append(PRINTF_DIRECTIVE.sub(fill, form))
        values = values[used:]
        if not values or not used:
            return "".join(out)


def _unescaped(text: str) -> str:
    return re.sub(r"\\(.)", lambda m: ESCAPES.get(m.group(1), m.group()), text, flags=re.S)
