"""Redaction: secrets taken out of text before it is written or shown.

A ``Redactor`` is built once per application (``init_app``) from the values
of secret environment variables (``CLAUDEOPS_REDACT_ENV``: names or glob
patterns), the settings declared secret, and a fixed set of credential
shapes: bearer and API tokens, private key blocks, ``password=``-style
pairs and their name/value forms, clients' password flags, URLs with
credentials. docs/security.md lists exactly what is caught
and what is not.

What it finds is replaced by ``[redacted]``. The replacement holds no quote
and no backslash, and a match never takes half of a backslash escape, so a
raw stream-json line stays valid JSON when redacted whole; it is lower case
so that it can never be mistaken for a marker (``[EVENT:…]``, ``[ESCALATE]``).
"""
from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from fnmatch import fnmatchcase
from itertools import accumulate
from typing import Callable, Iterable, Iterator, Mapping, Optional
from urllib.parse import quote, unquote_plus

import re2
from flask import Flask, current_app
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

log = logging.getLogger(__name__)

REPLACEMENT = "[redacted]"
# A shorter value would be found in ordinary words and numbers all over the text.
MIN_SECRET_LENGTH = 8

ENV_SETTING = "CLAUDEOPS_REDACT_ENV"   # parsed in app.config

# A value after "password=" and the like: up to whitespace, a quote, a
# backslash (the start of an escape in a raw JSON line) or a separator, but
# through the \u escapes Go's JSON encoder writes for <, > and &, and a
# non-ASCII letter in ASCII JSON (not an escaped quote or backslash); and
# through a closing bracket but one that ends it, as JSON's "token": null}
# does (one followed by the end, a space, "," or a quote). A value never
# starts with what follows a JSON string's closing quote (",:}]"): in a raw
# line, "token=" at the end of a string must not take the JSON after it.
# Written unrolled, so that a run of ordinary characters costs one class.
_VALUE_START = r"[^\s\"'`\\,;&<>:{}\[\]]"
_VALUE_CHARS = r"[^\s\"'`\\,;&<>}\]]*"
_VALUE_REST = (_VALUE_CHARS + r"(?:(?:\\+u(?!00(?:22|27|5[cC]))[0-9a-fA-F]{4}|[}\]](?![\s,}\]\"'\\]|$))"
               + _VALUE_CHARS + ")*")
_VALUE = _VALUE_START + _VALUE_REST


# A quoted value's text after its first character: up to the closing quote
# (either kind, or an escaped one), spaces and all ("correct horse battery").
_QUOTED_REST = r"[^\"'\\\r\n]*"
# Its first character (not what may follow a JSON string's closing quote: _quoted_or_not).
_QUOTED_FIRST = r"[^\s\"'\\,:}\]]"


def _quoted_or_not(unquoted_start: str = r"(?!-)[^\s\"'\\]", rest: str = r"[^\s\"'\\]*") -> str:
    """A value that may be quoted (-p'SECRET', --password SECRET), as the
    group "secret": quoted, it may start with anything but what ends it,
    and runs to its closing quote; but a quote that may be a JSON string's
    closing one is taken for an opening one only before what cannot follow
    a string's end (",:}]")."""
    return (r"(?P<q>\\*[\"'])?(?P<secret>(?(q)" + _QUOTED_FIRST + "|" + unquoted_start + ")(?(q)" + _QUOTED_REST
            + "|" + rest + "))")


_FLAG_VALUE = _quoted_or_not()
_KEYWORDS = (r"password|passwd|passphrase|secret(?:[_-]?key)?|token|api[_-]?key|apikey|access[_-]?key"
             r"|private[_-]?key|credentials?")
# A quote, or an escaped one: inside a JSON string (\"), or inside JSON
# kept in a JSON string, as a tool's output is in a raw line (\\\").
_QUOTE = r"(?:\\*[\"'])?"
# A key's closing quote, and a subscript's bracket after it (config['SECRET_KEY'] = …).
_KEY_END = r"(?:\\*[\"']\]?)?"
# Between a key and its value: =, :, => and their URL-encoded forms (%3D, %3A; folded to lower case).
_ASSIGNS = r"(?:[:=]>?|%3d|%3a)"
# Spaces and tabs around it, a tab also as JSON escapes it (\t), once or more.
_GAP = r"(?:[ \t]|\\+t)*"
_WORD_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_HEX = frozenset("0123456789abcdefABCDEF")


@dataclass(frozen=True)
class Rule:
    """One credential shape: what ``pattern``'s group ``group`` matched is
    replaced, unless ``keep`` says to leave it.

    For speed: the pattern runs only on a text holding one of its ``hints``;
    with ``fold_case`` both are lower case and run on the lower-cased text
    (``re``'s IGNORECASE is several times slower); ``word_start`` (the match
    must not continue a longer word) is checked here, because a lookbehind
    would keep ``re`` from skipping ahead to the pattern's first letters.
    ``overlapping``: the next match is looked for from the start of this
    one's group, so that a value running into the next key
    (``pw=a|token=b``) does not hide that key."""

    name: str
    pattern: re.Pattern
    group: str | int = 0
    keep: Optional[Callable[[str], bool]] = None
    hints: tuple[str, ...] = ()
    fold_case: bool = False
    word_start: bool = False
    overlapping: bool = False

    def matches(self, text: str, folded: str):
        subject = folded if self.fold_case else text
        if self.hints and not any(hint in subject for hint in self.hints):
            return
        position = 0
        while (match := self.pattern.search(subject, position)) is not None:
            # Past a match refused too: looking inside it again would cost a
            # line of many ("session_cookie": …) its length for each.
            position = match.start(self.group) + 1 if self.overlapping else max(match.end(), match.start() + 1)
            start, end = match.span(self.group)
            if self.word_start and not _starts_word(text, match.start()):
                continue
            if self.kept(text, match, start, end):
                continue
            yield start, end

    def kept(self, text: str, match: re.Match, start: int, end: int) -> bool:
        """Whether what ``match`` found, ``text[start:end]``, is left as it is."""
        return self.keep is not None and self.keep(text[start:end])


# How far after a program its options are looked for, and what ends its
# command before that: a line (also as a raw JSON line escapes it), a pipe, ; or &.
_COMMAND_REACH = 400
_COMMAND_ENDS = ("\n", "\\n", "|", ";", "&")
_LINE_BREAKS = ("\n", "\\n")
_ESCAPED_TAB = re.compile(r"\\+t")
# What ends the word before a program's name when it ends a command too (`-p3; mysql …`).
_COMMAND_SEPARATORS = (";", "|", "&", "(")
# An option whose next word is a command to run, not its value: the end of
# options (`kubectl exec db -- mysql …`), a shell's command string (`sh -c
# "mysql …"`, `bash -lc …`).
_RUNS_A_COMMAND = re.compile(r"--|-[A-Za-z]*c")


@dataclass(frozen=True)
class CommandOption:
    """A secret a program takes as an option (``mysql -pSECRET``, ``curl -u
    user:SECRET``), in the command that runs the program: its name found
    first (rare, and a literal), then the option after it in the same
    command, so that a text holding many such options and the name
    somewhere costs one scan of it, and ``journalctl -u mysql -p3`` (the
    name as an option's value) is left alone."""

    name: str
    program: re.Pattern
    option: re.Pattern
    hints: tuple[str, ...] = ()
    fold_case: bool = False

    def matches(self, text: str, folded: str):
        if self.hints and not any(hint in text for hint in self.hints):
            return
        scanned = 0
        for program in self.program.finditer(text):
            if not _names_the_command(text, program.start()):
                continue
            start = max(program.end(), scanned)
            end = min([found for stop in _COMMAND_ENDS if (found := text.find(stop, start, start + _COMMAND_REACH)) >= 0],
                      default=min(len(text), start + _COMMAND_REACH))
            for option in self.option.finditer(text, start, end):
                if not _placeholder(option["secret"]):
                    yield option.span("secret")
            scanned = max(scanned, end)


# A word of a command, for a password given by its place among them: quoted
# whole (a URL, 'user name', also with a JSON-escaped quote), or up to a
# space or a quote (not past a JSON string's end: `"…admin", "x": "…"`).
_ARGUMENT = r"(?:\\*[\"']" + _QUOTED_REST + r"\\*[\"']|[^\s\"'\\]+)"
# The MinIO client's words, counted past its long options: one that takes
# no value alone (--insecure), any other with its value (--api s3v4,
# --api=s3v4); each read once (an atomic group), so that no other reading
# of the options shifts the count. The word itself starts with no "-".
_MC_OPTION = (r"(?>--(?:insecure|json|debug|quiet|no-color|disable-pager|dp)(?![^\s\"'\\])|--[A-Za-z][\w-]*"
              r"(?:=|[ \t]+)" + _ARGUMENT + ")")
_MC_WORD = r"(?:[ \t]+" + _MC_OPTION + r")*[ \t]+(?!-)" + _ARGUMENT


def _user_then_password(short: str, separator: str) -> re.Pattern:
    """A user's name and password given as one option's value, ``-u
    user:SECRET`` (curl's, ``separator`` ":") or ``-U user%SECRET`` (Samba's,
    "%"): also last of a cluster of short options (``-sku``), as ``--user``,
    joined (``-uuser:``, ``--user=``), quoted or not. The name may hold a
    backslash (``DOMAIN\\user``), but not one that escapes a quote."""
    name = r"[^\s\"'\\" + separator + "]*"
    return re.compile(
        r"[ \t](?:-[A-Za-z]*" + short + r"|--user)(?:[ \t]+|=)?(?P<q>\\*[\"'])?" + name + r"(?:\\+(?![\"'\\])" + name
        + ")*" + separator + r"(?P<secret>[^\s\"'\\](?(q)" + _QUOTED_REST + r"|[^\s\"'\\]*))")


def _names_the_command(text: str, index: int) -> bool:
    """Whether the program named at ``index`` is run there: its name starts
    a word (after a path, a quote or an escaped one), and the word before
    is no option whose value it would be (a command's end, or none, is fine):
    a word on its own line's, not the line before's (``ls -l\\nmysql …``);
    a line break and a tab also as a raw JSON line escapes them."""
    if not _starts_word(text, index):
        return False
    window = text[max(0, index - 100):index]
    window = window[max((found + len(end) for end in _LINE_BREAKS if (found := window.rfind(end)) >= 0), default=0):]
    if "\\t" in window:
        window = _ESCAPED_TAB.sub(" ", window)
    words = window.rsplit(None, 2)
    if window and not window[-1].isspace():
        words = words[:-1]   # the start of the program's own word: a path, a quote
    before = words[-1] if words else ""
    return (not before.startswith("-") or before.endswith(_COMMAND_SEPARATORS)
            or _RUNS_A_COMMAND.fullmatch(before) is not None)


def _fold(text: str) -> str:
    """Lower case, character for character (a few characters lower-case to
    two, such as "İ"; they stay as they are, so positions still match)."""
    folded = text.lower()
    if len(folded) == len(text):
        return folded
    return "".join(c if len(c.lower()) != 1 else c.lower() for c in text)


def _starts_word(text: str, index: int) -> bool:
    """Not inside a longer word; a JSON escape before it is no word: the
    ``\n`` of a line break, escaped once or more (a tool's JSON output in a
    raw line), or a ``\u003e`` as Go writes ``>``."""
    if index == 0 or text[index - 1] not in _WORD_CHARS:
        return True
    if text[index - 1] in "nrt" and index >= 2 and text[index - 2] == "\\":
        return True
    return index >= 6 and text[index - 6:index - 4] == "\\u" and all(c in _HEX for c in text[index - 4:index])


# What names a secret in a shell or a template: $NAME, ${NAME}, ${NAME:-default},
# $(command …). A default is a value of its own, redacted by itself (the
# brace is then gone with it: still a name, so a second pass changes nothing).
_VARIABLE = re.compile(r"\$(?:[A-Za-z_][A-Za-z0-9_]*|\{[A-Za-z_][A-Za-z0-9_]*(?:[:?+=-][^}]*)?\}?|\(.*)")


# JSON's and YAML's words for no value: "api_key": null says the key is unset.
_NO_VALUE = frozenset({"null", "none", "nil", "true", "false", "undefined"})


def _placeholder(value: str) -> bool:
    """``password=$DB_PASSWORD``, ``token: ****``, ``"api_key": null`` and
    our own replacement name or hide a secret, or say there is none; they
    are not one. A value that merely begins with "$" (``'$Up3r-S3cret'``) is one."""
    return (bool(_VARIABLE.fullmatch(value)) or set(value) <= {"*"} or value == REPLACEMENT
            or value.lower() in _NO_VALUE)


def _word(value: str) -> bool:
    """``Bearer authentication.``: a word, not a token."""
    return value.rstrip(".,").isalpha()


def _placeholder_path_or_count(value: str) -> bool:
    """As ``_placeholder``; and a path, which a ``_PWD`` variable may name
    (``BUILD_PWD=/src``), and a number, which a ``_PASS`` one may count
    (``TESTS_PASS=12``): neither is a password."""
    return _placeholder(value) or value.startswith(("/", "~")) or value.isdigit()


def _placeholder_path_count_or_mode(value: str) -> bool:
    """As ``_placeholder_path_or_count``; and a lower-case word alone, by
    which an ``_AUTH`` variable names a mode (``SMTP_AUTH=login``,
    ``LDAP_AUTH=simple``, ``NGINX_AUTH=off``), not a password."""
    return _placeholder_path_or_count(value) or (value.isascii() and value.isalpha() and value.islower())


def _no_digit(value: str) -> bool:
    """``sk-learn-compatible-estimators``: words joined up look like a key;
    real keys carry digits."""
    return not any(c.isdigit() for c in value)


@dataclass(frozen=True)
class PrivateKeys:
    """Private key blocks: from a header to its footer (``-----END`` and the
    same label), 64 KiB apart at most with no ``"`` between (the JSON-escaped
    form, ``\\n`` for newlines, too); a block cut short (``head id_rsa``) from
    its header through the key material after it.

    Each header's footer is looked up among the footers found in one scan,
    not searched for: a text of many headers and no footer would otherwise
    cost 64 KiB of scanning for each header."""

    name: str = "private key"
    hints: tuple[str, ...] = ("PRIVATE KEY",)
    fold_case: bool = False
    reach: int = 65536
    header: re.Pattern = re.compile(r"-----BEGIN (?P<label>[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?)-----")
    footer: re.Pattern = re.compile(r"-----END (?P<label>[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?)-----")
    quote: re.Pattern = re.compile('"')
    # Base64 and what may stand between its lines: PGP's armor headers
    # ("Version: GnuPG v2.0.22 (GNU/Linux)"), the line numbers of a file
    # read by the CLI ("     2→"), line breaks and arrows escaped once or more.
    material: re.Pattern = re.compile(r"(?:[A-Za-z0-9+/=\r\n \t:,.()\u2192-]+|\\+(?:[nrt]|u2192))*")   # fast

    def matches(self, text: str, folded: str):
        if self.hints and not any(hint in text for hint in self.hints):
            return
        footers: dict[str, list[tuple[int, int]]] = {}
        for found in _overlapping(self.footer, text):
            footers.setdefault(found["label"], []).append(found.span())
        quotes = [found.start() for found in self.quote.finditer(text)]
        headers = [(found.start(), found.end(), self._footer_end(footers.get(found["label"], ()), quotes, found.end()))
                   for found in _overlapping(self.header, text)]
        # Whole blocks and blocks cut short are found apart, each scan going
        # on after what it found, and the spans merged: a header inside a
        # block has its own say, and so has one inside another's material.
        for cut_short in (False, True):
            reached = 0
            for start, header_end, footer_end in headers:
                if start < reached or (footer_end is None) != cut_short:
                    continue
                reached = self.material.match(text, header_end).end() if cut_short else footer_end
                yield start, reached

    def _footer_end(self, footers, quotes, after: int) -> Optional[int]:
        """The end of the first footer that starts ``after`` or later, within
        reach and with no quote before it; None if there is none."""
        index = bisect_left(footers, (after, after))
        if index == len(footers) or footers[index][0] - after > self.reach:
            return None
        start, end = footers[index]
        quote = bisect_left(quotes, after)
        return end if quote == len(quotes) or quotes[quote] >= start else None


def _overlapping(pattern: re.Pattern, text: str) -> Iterator[re.Match]:
    """Every match, also one that begins inside the one before (the dashes
    ending one marker may begin the next, as a pattern searched for from
    each position would find it)."""
    position = 0
    while (found := pattern.search(text, position)) is not None:
        yield found
        position = found.start() + 1


@dataclass(frozen=True)
class CookieList:
    """Cookies given as a JSON array of strings (``"set-cookie": ["sid=…",
    "theme=dark"]``, as ``curl -w '%{header_json}'`` and Node write
    headers): each string of the array, whole. Its strings are quoted as
    the key is (escaped as often, JSON kept in a JSON string)."""

    name: str = "cookie list"
    hints: tuple[str, ...] = ("cookie",)
    fold_case: bool = True
    opening: re.Pattern = re.compile(r"(?:set-)?cookie(?P<quote>\\*\")[ \t]*:[ \t]*\[[ \t]*")
    between: re.Pattern = re.compile(r"[ \t]*,[ \t]*")
    most: int = 100   # strings of one array

    def matches(self, text: str, folded: str):
        if self.hints and not any(hint in folded for hint in self.hints):
            return
        for opening in self.opening.finditer(folded):
            if not _starts_word(text, opening.start()):
                continue
            quote, position = opening["quote"], opening.end()
            for _ in range(self.most):
                if not text.startswith(quote, position):
                    break
                start = position + len(quote)
                close = _closing_quote(text, start, len(quote) - 1)
                if close is None:
                    break
                end = close - (len(quote) - 1)
                if end > start and not _placeholder(text[start:end]):
                    yield start, end
                following = self.between.match(text, close + 1)
                if following is None:
                    break
                position = following.end()


def _closing_quote(text: str, start: int, escapes: int) -> Optional[int]:
    """Where the JSON string whose text begins at ``start`` ends, its quotes
    written after ``escapes`` backslashes (0; 1, 3, … in JSON kept in a JSON
    string): its closing quote; None if a quote of a shallower level comes
    first. A quote escaped once more is the string's own (a cookie's quoted
    value, ``sid=\\"abc\\"``): taken for the end, it would leave the rest
    of the value unredacted."""
    own = _quote_depth(escapes)
    close = text.find('"', start)
    while close >= 0:
        run = 0
        while close - run > start and text[close - run - 1] == "\\":
            run += 1
        depth = _quote_depth(run)
        if depth == own:
            return close
        if depth < own:   # a shallower string ends here (\\" at depth 1 is an escaped backslash, then a quote)
            return None
        close = text.find('"', close + 1)
    return None


def _quote_depth(backslashes: int) -> int:
    """The depth of JSON kept in JSON strings a quote after this many
    backslashes belongs to: each level doubles them and adds one (0, 1, 3,
    7, …), so that the number plus one has as many trailing zero bits as
    the depth (2, one backslash escaped, then the quote: depth 0)."""
    return ((backslashes + 1) & -(backslashes + 1)).bit_length() - 1


# A name a secret goes by, as the key=value pair and _PASS variable rules
# tell it: one of the key words at its end (any case), or _PASS, _PWD (upper case).
_SECRET_NAME = re.compile(r"(?:" + _KEYWORDS + r")\Z")
_PASS_NAME = re.compile(r"[A-Z0-9]_(?:PASS|PWD)\Z")
_AUTH_NAME = re.compile(r"[A-Z0-9]_AUTH\Z")


def _secret_name(name: str) -> Optional[Callable[[str], bool]]:
    """What keeps the value of a secret called ``name`` (``_placeholder``,
    or ``_placeholder_path_or_count`` as for ``DB_PASS=``, or
    ``_placeholder_path_count_or_mode`` as for ``REDISCLI_AUTH=``); None if
    the name is no secret's (``LOG_LEVEL``)."""
    if _SECRET_NAME.search(_fold(name)):
        return _placeholder
    if _PASS_NAME.search(name):
        return _placeholder_path_or_count
    if _AUTH_NAME.search(name):
        return _placeholder_path_count_or_mode
    return None


@dataclass(frozen=True)
class NamedValue(Rule):
    """A value given apart from its name, a secret's when the name is
    (``_secret_name``): the pattern's group "name", then its group "secret".
    Its hints are what such a name holds."""

    group: str | int = "secret"
    hints: tuple[str, ...] = ("pass", "secret", "token", "key", "credential", "_pwd", "_auth")
    fold_case: bool = True
    word_start: bool = True

    def kept(self, text: str, match: re.Match, start: int, end: int) -> bool:
        keep = _secret_name(text[match.start("name"):match.end("name")])
        return keep is None or keep(text[start:end])


# A line break between a YAML mapping's lines (also as a raw JSON line
# escapes it), and the number the CLI writes before each line of a file it read.
_NEXT_LINE = r"(?:\r?\n|(?:\\+r)?\\+n)(?:[ \t]*[0-9]+(?:\u2192|\\+u2192))?" + _GAP


SHAPES: tuple[Rule, ...] = (
    PrivateKeys(),
    Rule("URL credentials", re.compile(r"[A-Za-z0-9]://[^\s:/@\"'\\]*:(?P<secret>[^\s/\"'\\]+)@"), "secret",
         hints=("://",)),
    # Proxy-Authorization too: "-" joins words, so "authorization" alone would not start one there.
    # Also as CGI and WSGI name it (HTTP_AUTHORIZATION), as a debug page shows it.
    Rule("authorization header", re.compile(
        r"(?:http_)?(?:proxy[-_])?authorization" + _QUOTE + _GAP + r"[:=]" + _GAP + _QUOTE
        + r"(?:basic|bearer|token|negotiate|ntlm)[ \t]+(?P<secret>[^\s\"'\\]{4,})"), "secret",
        keep=_placeholder, hints=("authorization",), fold_case=True, word_start=True),
    # A Digest header's secret part: the response worked out from the
    # password (its user name, realm and nonce are none).
    # Its parameters before it are read one by one (name=value or name="value",
    # each with its comma): a scan ahead of every "digest" would cost a text
    # full of the word as many times its length.
    Rule("digest response", re.compile(
        r"digest[ \t]+(?:[a-z0-9_-]+[ \t]*=[ \t]*(?:\\*\"[^\"\\\r\n]*\\*\"|[^\s,\"\\]*)[ \t]*,[ \t]*)*?response"
        + _QUOTE + r"[ \t]*=[ \t]*" + _QUOTE + r"(?P<secret>[0-9a-f]{16,})"), "secret", hints=("digest",),
        fold_case=True, word_start=True),
    Rule("bearer token", re.compile(r"bearer[ \t]+(?P<secret>[a-z0-9._~+/=-]{8,})"), "secret",
         keep=_word, hints=("bearer",), fold_case=True, word_start=True),
    Rule("key=value pair", re.compile(
        r"(?:" + _KEYWORDS + r")" + _KEY_END + _GAP + _ASSIGNS + _GAP + _QUOTE + r"(?P<secret>" + _VALUE + ")"),
        "secret", keep=_placeholder, hints=("pass", "secret", "token", "key", "credential"), fold_case=True,
        overlapping=True),
    # Short names only as a variable's (upper case, the end of a longer name:
    # DB_PASS=, MYSQL_ROOT_PWD:), a query's (?pwd=) or openssl's (-pass
    # pass:…): elsewhere "pass" is a test's result (--- PASS:, "pass": true).
    # The one character before is looked behind at, so each try costs as
    # little on a long run of capitals as on anything else.
    Rule("_PASS variable", re.compile(
        r"(?<=[A-Z0-9])_(?:PASS|PWD)" + _KEY_END + _GAP + r"[:=]" + _GAP + _QUOTE + r"(?P<secret>" + _VALUE + ")"),
        "secret", keep=_placeholder_path_or_count, hints=("_PASS", "_PWD")),
    # _AUTH the same way, as clients take a password from it (REDISCLI_AUTH=,
    # BASIC_AUTH=user:…, HTTP_AUTH=…); but a lower-case word alone is a mode
    # (SMTP_AUTH=login, LDAP_AUTH=simple, NGINX_AUTH=off), and kept too.
    Rule("_AUTH variable", re.compile(
        r"(?<=[A-Z0-9])_AUTH" + _KEY_END + _GAP + r"[:=]" + _GAP + _QUOTE + r"(?P<secret>" + _VALUE + ")"),
        "secret", keep=_placeholder_path_count_or_mode, hints=("_AUTH",)),
    Rule("pass query parameter", re.compile(r"[?&;](?:pass|pwd)=(?P<secret>[^\s\"'`\\&#;]+)"), "secret",
         keep=_placeholder, hints=("pass=", "pwd="), fold_case=True),
    Rule("openssl pass:", re.compile(r"-pass(?:in|out)?[ \t]+pass:(?P<secret>[^\s\"'\\]+)"), "secret",
         keep=_placeholder, hints=("-pass",)),
    # The clients' own spelling, the value joined to the flag (-P is the
    # port, so the case counts), in the command of that client: not -p3 of
    # `journalctl -u mysql`, nor the port of `docker run --name mysql -p3306:3306`.
    CommandOption("mysql -p password", re.compile(r"(?:mysql|mariadb)[\w-]*"),
                  re.compile(r"[ \t]-p" + _FLAG_VALUE),
                  hints=("mysql", "mariadb")),
    Rule("sshpass -p password", re.compile(
        r"sshpass[ \t]+(?:-[a-zA-Z]+[ \t]+)*?-p[ \t]*" + _FLAG_VALUE),
        "secret", keep=_placeholder, hints=("sshpass",), word_start=True),
    CommandOption("curl user:password", re.compile(r"curl"), _user_then_password("u", ":"), hints=("curl",)),
    CommandOption("smbclient user%password", re.compile(r"smbclient|rpcclient|smbcacls"),
                  _user_then_password("U", "%"), hints=("smbclient", "rpcclient", "smbcacls")),
    CommandOption("lftp user,password", re.compile(r"lftp"), _user_then_password("u", ","), hints=("lftp",)),
    # A word of its own after redis-cli: -a, --pass (-p is its port).
    CommandOption("redis-cli -a password", re.compile(r"(?:redis|valkey)-cli"),
                  re.compile(r"[ \t](?:-a|--pass)[ \t]+" + _FLAG_VALUE),
                  hints=("redis-cli", "valkey-cli")),
    # -p, the value joined to it or not, where it is the password: mongo's
    # shells and tools (--port is the port; not mongod, mongos), smbmap,
    # Dell's racadm, hydra (-P is a file of passwords), netexec and
    # crackmapexec (nxc, cme), evil-winrm (-P is its port), a registry's
    # login (not docker run's -p8080:80), az login. "cme" with the space
    # after it: "acme" holds it.
    CommandOption("-p password", re.compile(
        r"(?:mongo(?:sh|dump|restore|export|import|stat|top|files)?|smbmap|racadm|hydra|netexec|nxc|crackmapexec"
        r"|cme|evil-winrm)(?![\w-])"
        r"|(?:docker|podman|nerdctl|buildah|skopeo|oras|helm[ \t]+registry|az)[ \t]+login"),
        re.compile(r"[ \t]-p[ \t]*" + _FLAG_VALUE),
        hints=("mongo", "smbmap", "racadm", "hydra", "netexec", "nxc", "crackmapexec", "cme ", "evil-winrm",
               "login")),
    # ipmitool: -P, and the Kg key, -k (-y hex); -p is its port, -E, -K
    # and -Y take them from the environment or ask. And a user's new
    # password, the word after the user's id in user set password (the
    # size after it, 16 or 20, stays; without it ipmitool asks).
    CommandOption("ipmitool -P password", re.compile(r"ipmitool"), re.compile(
        r"[ \t](?:-[Pky][ \t]*|user[ \t]+set[ \t]+password[ \t]+" + _ARGUMENT + r"[ \t]+)" + _FLAG_VALUE),
        hints=("ipmitool",)),
    # Dell's racadm (-p is above): a user's password set as an attribute,
    # iDRAC.Users.2.Password (any case), or by the old config command,
    # -o cfgUserAdminPassword, its -i index and -g group before or after.
    CommandOption("racadm user password", re.compile(r"racadm"), re.compile(
        r"[ \t](?:set[ \t]+(?i:idrac\.users\.[0-9]+\.password)|-o[ \t]+(?i:cfguseradminpassword)"
        r"(?:[ \t]+-[gi][ \t]+" + _ARGUMENT + r")*)[ \t]+" + _FLAG_VALUE), hints=("racadm",)),
    # Net-SNMP's clients: -A and -X, SNMPv3's passphrases (-a and -x name
    # their protocols), the keys made from them, -3m and -3M (master), -3k
    # and -3K (localized), and -c, v1's and v2c's community; not snmpd's
    # nor snmptrapd's -c, a configuration file.
    CommandOption("snmp -A, -X, -c", re.compile(
        r"snmp(?:walk|get|getnext|set|bulkwalk|bulkget|table|trap|status|df|inform|delta|netstat|usm|vacm)(?![\w-])"),
        re.compile(r"[ \t]-(?:[AXc]|3[mMkK])[ \t]*" + _FLAG_VALUE),
        hints=("snmpwalk", "snmpget", "snmpset", "snmpbulkwalk", "snmpbulkget", "snmptable", "snmptrap",
               "snmpstatus", "snmpdf", "snmpinform", "snmpdelta", "snmpnetstat", "snmpusm", "snmpvacm")),
    # snmpusm's passwd: the old passphrase, then the new one (-Co, -Ca and
    # -Cx before them say which key they change), each a rule of its own.
    CommandOption("snmpusm passwd old passphrase", re.compile(r"snmpusm"), re.compile(
        r"[ \t]passwd(?:[ \t]+-C[oax]+)*[ \t]+" + _FLAG_VALUE), hints=("snmpusm",)),
    CommandOption("snmpusm passwd new passphrase", re.compile(r"snmpusm"), re.compile(
        r"[ \t]passwd(?:[ \t]+-C[oax]+)*[ \t]+(?!-)" + _ARGUMENT + r"[ \t]+" + _FLAG_VALUE), hints=("snmpusm",)),
    # htpasswd's password is a word of its own, the command's last (before
    # a redirection, > /dev/null, 2>&1; the end of a string it is quoted in
    # right after it), given so with -b in a cluster of options (-nb, -bcB):
    # without it htpasswd asks.
    CommandOption("htpasswd -b password", re.compile(r"htpasswd"), re.compile(
        r"[ \t]-[A-Za-z0-9]*b[A-Za-z0-9]*(?:[ \t]+" + _ARGUMENT + r")*?[ \t]+" + _FLAG_VALUE
        + r"(?(q)\\*[\"'])(?:[ \t]*[0-9]*>>?[ \t]*[^\s\"'\\]*)*(?=[ \t]*\Z|\\*[\"'])"), hints=("htpasswd",)),
    # FreeRDP's clients: /p: (FreeRDP 2 and 3, X11, Wayland, SDL), the
    # gateway's /gp:, and /pth:, the NT hash passed for the password.
    CommandOption("FreeRDP /p: password", re.compile(r"(?:xfreerdp|wlfreerdp|sdl-freerdp)3?"),
                  re.compile(r"[ \t]/(?:p|gp|pth):" + _FLAG_VALUE), hints=("freerdp",)),
    # netexec (nxc), crackmapexec (cme) and evil-winrm: -H, the hash passed
    # for the password (an NT hash logs in as the password does).
    CommandOption("-H hash", re.compile(r"(?:netexec|nxc|crackmapexec|cme|evil-winrm)(?![\w-])"),
                  re.compile(r"[ \t]-H[ \t]*" + _FLAG_VALUE),
                  hints=("netexec", "nxc", "crackmapexec", "cme ", "evil-winrm")),
    # The MinIO client's secret keys: the fourth word after alias set (or
    # the old config host add), NAME URL ACCESSKEY SECRETKEY, and the third
    # after admin user add, ALIAS USER SECRETKEY; its options not counted
    # (_MC_WORD). The words as written, each one space apart: a hint holds
    # them ("host add" alone would be every "host address"; "admin user
    # add" with the space after it, not "admin user added").
    CommandOption("mc alias set secret key", re.compile(r"mc(?:li)?(?![\w-])"), re.compile(
        r"[ \t](?:(?:alias set|config host add)(?:" + _MC_WORD + r"){3}|admin user add(?= )(?:" + _MC_WORD + r"){2})"
        r"(?:[ \t]+" + _MC_OPTION + r")*[ \t]+" + _FLAG_VALUE),
        hints=("alias set", "config host add", "admin user add ")),
    # OpenLDAP's clients: -w (-W asks), also last of a cluster of options
    # that take no value (-xw, not -fnew.ldif); ldappasswd's old and new
    # passwords too (-a, -s; elsewhere -s is the search's scope).
    CommandOption("ldap -w password", re.compile(
        r"ldap(?:search|modify|add|delete|whoami|passwd|compare|modrdn|exop)"),
        re.compile(r"[ \t]-[ALMNQVWZcnvx]*w[ \t]*" + _FLAG_VALUE),
        hints=("ldapsearch", "ldapmodify", "ldapadd", "ldapdelete", "ldapwhoami", "ldappasswd", "ldapcompare",
               "ldapmodrdn", "ldapexop")),
    CommandOption("ldappasswd -a, -s passwords", re.compile(r"ldappasswd"),
                  re.compile(r"[ \t]-[as][ \t]*" + _FLAG_VALUE), hints=("ldappasswd",)),
    # The whole value: a session cookie is as good as a password. Also as
    # CGI and WSGI name it (HTTP_COOKIE), which an environment's dump
    # (env, printenv, a CGI script's debug output) writes with "=". Not a
    # JSON array's or object's bracket ("cookie": ["sid=…"], CookieList's;
    # "cookie": [], [1, …]): alone replaced, it would leave JSON that is no
    # JSON; a bracket of the value's own text (Cookie: [sid=…]) starts it.
    Rule("cookie header", re.compile(
        r"(?:(?:http_)?(?:set-)?cookie" + _QUOTE + _GAP + r":|http_cookie" + _QUOTE + _GAP + r"=)" + _GAP
        + _quoted_or_not(unquoted_start=r"(?![\[{]\s*(?:\\*\"|[\]}\[{0-9-]))[^\s\"'\\]", rest=r"[^\r\n\"'\\]*")),
        "secret", keep=_placeholder, hints=("cookie",), fold_case=True, word_start=True),
    CookieList(),
    # An environment variable as Kubernetes and ECS list them: "- name: DB_PASSWORD",
    # "value: …" on the next line; {"name": "DB_PASSWORD", "value": "…"}. A
    # quoted value whole; valueFrom, and a YAML block's "|" (its value on the
    # lines after), are no value. The name is read possessively (++): what
    # may end it is none of its characters, and a long run of them ending
    # otherwise would be read again from each.
    NamedValue("name/value pair", re.compile(
        r"name" + _KEY_END + _GAP + ":" + _GAP + _QUOTE + r"(?P<name>[a-z0-9_.-]++)" + _KEY_END + _GAP
        + r"(?:,(?:\s|\\+[nrt])*|" + _NEXT_LINE + ")" + _QUOTE + "value" + _KEY_END + _GAP + ":" + _GAP
        + _quoted_or_not(r"(?!\|)" + _VALUE_START, _VALUE_REST))),
    # PHP's constants: define('DB_PASSWORD', '…'), a quoted value only (not getenv('…')).
    NamedValue("PHP define", re.compile(
        r"define" + _GAP + r"\(" + _GAP + r"\\*[\"'](?P<name>[a-z0-9_]++)\\*[\"']" + _GAP + "," + _GAP
        + r"\\*[\"'](?P<secret>" + _QUOTED_FIRST + _QUOTED_REST + ")")),
    # Hints as narrow as the pattern allows: "key" for api-key, not "api",
    # which every status page's "GET /api/…" holds.
    Rule("--password value", re.compile(
        r"--?[\w-]*?(?:password|passwd|passphrase|token|secret|api[-_]?key)[ \t]+" + _FLAG_VALUE),
        "secret", keep=_placeholder, hints=("pass", "token", "secret", "key"), fold_case=True,
        word_start=True, overlapping=True),
    Rule("API token", re.compile(
        r"sk-ant-[A-Za-z0-9_-]{20,}"                       # Anthropic
        r"|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}"   # GitHub
        r"|glpat-[A-Za-z0-9_-]{20,}"                       # GitLab
        r"|xox[abposr]-[A-Za-z0-9-]{10,}|xapp-[0-9]-[A-Za-z0-9-]{10,}"  # Slack
        r"|(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])"       # AWS access key id
        r"|AIza[A-Za-z0-9_-]{35}"                          # Google API key
        r"|(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"      # Stripe
        r"|npm_[A-Za-z0-9]{36}"                            # npm
        r"|pypi-AgE[A-Za-z0-9_-]{50,}"                     # PyPI
        r"|hv[sb]\.[A-Za-z0-9_-]{24,}"),                   # HashiCorp Vault
        hints=("sk-ant-", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-", "xox", "xapp-", "AKIA",
               "ASIA", "AIza", "k_live_", "k_test_", "npm_", "pypi-", "hvs.", "hvb."), word_start=True),
    Rule("sk- key", re.compile(r"sk-[A-Za-z0-9_-]{20,}"), keep=_no_digit, hints=("sk-",), word_start=True),
    Rule("JSON Web Token", re.compile(r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"),
         hints=("eyJ",), word_start=True),
)


# The service's own secrets (its password, API token, cookie key) are kept
# out of the agent's environment, and so out of the hook commands the CLI
# runs there, one of which writes to the database (the cooldown hook). Those
# are given, in this variable, each value's length and its SHA-256 under a
# key drawn for the session: enough to recognise the value, not to hold it.
WITHHELD_ENV = "CLAUDEOPS_WITHHELD_SECRETS"


class WithheldValues:
    """Finds values known only by their length and keyed digest: every
    stretch of text of such a length is hashed and compared. That costs a
    hash per character for each length, so only the cooldown hook, which
    writes a few short texts, uses it (``include_withheld``)."""

    name = "withheld secret value"
    hints: tuple[str, ...] = ()

    def __init__(self, key: bytes, digests: dict[int, set[bytes]]):
        self.key = key
        self.digests = digests

    @classmethod
    def describe(cls, values: Iterable[str]) -> str:
        """The variable's value for ``values`` (those long enough to be redacted)."""
        key = os.urandom(16)
        kept = sorted({v for v in values if isinstance(v, str) and len(v) >= MIN_SECRET_LENGTH})
        return " ".join([key.hex()] + [f"{len(v)}:{_keyed_digest(key, v).hex()}" for v in kept])

    @classmethod
    def parse(cls, description: Optional[str]) -> Optional["WithheldValues"]:
        """From the variable's value; None when there is none or it is unusable."""
        if not description:
            return None
        try:
            key_hex, *entries = description.split()
            digests: dict[int, set[bytes]] = {}
            for entry in entries:
                length, digest = entry.split(":")
                digests.setdefault(int(length), set()).add(bytes.fromhex(digest))
            key = bytes.fromhex(key_hex)
        except ValueError:
            log.warning("%s is malformed; the service's withheld secrets are not redacted here", WITHHELD_ENV)
            return None
        return cls(key, digests) if digests else None

    def matches(self, text: str, folded: str):
        for length, digests in self.digests.items():
            position = 0
            while position <= len(text) - length:
                if _keyed_digest(self.key, text[position:position + length]) in digests:
                    yield position, position + length
                    position += length
                else:
                    position += 1


def _keyed_digest(key: bytes, value: str) -> bytes:
    return hmac.new(key, value.encode("utf-8", "surrogatepass"), hashlib.sha256).digest()


class Redactor:
    """Finds secrets in text and replaces them; cheap to call, built once."""

    def __init__(self, secrets: Iterable[str] = (), shapes: tuple[Rule, ...] = SHAPES,
                 withheld: Optional[WithheldValues] = None):
        self.secret_count = 0
        values = set()
        for secret in set(secrets):
            if isinstance(secret, str) and len(secret) >= MIN_SECRET_LENGTH:
                self.secret_count += 1
                # As written, and as it appears inside a raw JSON line.
                values.add(secret)
                values.update(_json_forms(secret))
        rules = list(shapes)
        if values:
            ordered = sorted(values, key=len, reverse=True)   # the longest first: no secret left half-shown
            rules.insert(0, Rule("secret value", re.compile("|".join(map(re.escape, ordered))),
                                 hints=tuple(ordered)))
        if withheld is not None:
            rules.append(withheld)
        self.rules = tuple(rules)
        self.unhinted = tuple(rule for rule in rules if not rule.hints)
        # Nearly every text holds no hint of any rule. One scan by RE2's
        # automaton settles those, several times faster than a substring test
        # per hint; its case folding finds a hint whatever its case, which is
        # enough for a gate: each rule then tests its own hints exactly.
        hints = sorted({hint for rule in rules for hint in rule.hints})
        self.gate = re2.compile("(?i)" + "|".join(map(_re2_literal, hints))) if hints else None

    def _may_hold_secret(self, text: str) -> bool:
        try:
            return self.gate.search(text) is not None
        except UnicodeEncodeError:   # a lone surrogate, which RE2 cannot take: every rule decides
            return True

    def spans(self, text: str, hinted: Optional[bool] = None) -> list[tuple[int, int]]:
        """Where the secrets are: sorted, merged ``(start, end)`` ranges.
        ``hinted``: what the gate said of ``text``, if it was asked already."""
        if hinted is None:
            hinted = self.gate is not None and self._may_hold_secret(text)
        if not hinted and not self.unhinted:
            return []
        rules = self.rules if hinted else self.unhinted
        folded = _fold(text)
        return self._merge([_whole_escapes(text, start, end)
                            for rule in rules for start, end in rule.matches(text, folded) if start < end])

    @staticmethod
    def _merge(found: list[tuple[int, int]]) -> list[tuple[int, int]]:
        if not found:
            return found
        found.sort()
        merged = [found[0]]
        for start, end in found[1:]:
            last_start, last_end = merged[-1]
            if start <= last_end:
                merged[-1] = (last_start, max(last_end, end))
            else:
                merged.append((start, end))
        return merged

    def redact(self, text: Optional[str]) -> Optional[str]:
        if not text:
            return text
        return replace_spans(text, self.spans(text))

    def redact_many(self, texts: list[Optional[str]]) -> list[Optional[str]]:
        """``redact`` of each text, with one gate scan for them all: a batch
        of activity rows is mostly tool output with no hint of a secret, and
        one scan of the batch costs a fraction of one call per text."""
        return [replace_spans(text, spans) if text else text for text, spans in zip(texts, self.spans_many(texts))]

    def spans_many(self, texts: list[Optional[str]]) -> list[list[tuple[int, int]]]:
        """``spans`` of each text, with one gate scan for them all."""
        if self.gate is None:
            return [self.spans(text) if text else [] for text in texts]
        try:
            encoded = [text.encode() if text else b"" for text in texts]
        except UnicodeEncodeError:   # a lone surrogate: each on its own, as spans() takes it
            return [self.spans(text) if text else [] for text in texts]
        hinted = set()
        # No hint holds a NUL, so none is found across two texts; RE2 takes
        # bytes without the copy and offset mapping it does for a str.
        joined = b"\0".join(encoded)
        ends = list(accumulate(len(data) + 1 for data in encoded))   # each text's end, its separator included
        position = 0
        while (found := self.gate.search(joined, position)) is not None:
            index = bisect_right(ends, found.start())
            hinted.add(index)
            position = ends[index]   # that text goes through every rule: look on from the next one
        return [self.spans(text, hinted=index in hinted) if text else [] for index, text in enumerate(texts)]

    def redact_bytes(self, data: bytes) -> bytes:
        """Bytes as the CLI wrote them (UTF-8, or not quite): bytes that are
        not UTF-8 pass through unchanged."""
        text = data.decode("utf-8", "surrogateescape")
        spans = self.spans(text)
        if not spans:
            return data
        return replace_spans(text, spans).encode("utf-8", "surrogateescape")


def _re2_literal(text: str) -> str:
    """``text`` as an RE2 pattern matching exactly it: letters and digits as
    they are, every other character by its code point."""
    return "".join(c if c.isascii() and c.isalnum() else f"\\x{{{ord(c):x}}}" for c in text)


def replace_spans(text: str, spans: list[tuple[int, int]]) -> str:
    if not spans:
        return text
    parts, position = [], 0
    for start, end in spans:
        replacement = REPLACEMENT
        quote = _json_key_quote(text, start)
        if quote is not None:
            # A number or a literal ("password": 12345678): given as a bare
            # word, it would leave JSON that is no longer JSON; what a value
            # read to the end of its line took after it is JSON's own (`}}`).
            replacement = f"{quote}{REPLACEMENT}{quote}"
            # Not read past the span's end (plus one, to see that the token goes on): from each of many
            # spans on one long line, that would be quadratic.
            token_end = _JSON_SCALAR.match(text, start, end + 1).end()
            if _JSON_AFTER_VALUE.fullmatch(text, token_end, end):
                end = token_end
                if text[start:end] in _JSON_LITERALS:   # "cookie": null holds none
                    replacement = text[start:end]
        parts += [text[position:start], replacement]
        position = end
    parts.append(text[position:])
    return "".join(parts)


# A value's place in JSON's structure: after a key's closing quote and its
# colon, the quote as JSON at that depth writes one (", or \" in JSON kept
# in a JSON string, \\\" a level deeper), which the replacement is quoted
# with. A string value's secret begins after its opening quote, an array's
# or object's inside it: neither is here.
_JSON_SCALAR = re.compile(r'[^\s,}\]\\]*')
_JSON_AFTER_VALUE = re.compile(r'[\s,}\]]*')
_JSON_LITERALS = frozenset({"null", "true", "false"})


def _json_key_quote(text: str, start: int) -> Optional[str]:
    """How a quote is written where the value at ``start`` is, if it is a
    JSON key's value that is no string; else None. Read back a character at
    a time: it is asked of every secret found."""
    if start == 0 or start >= len(text) or text[start] in "\"[{\\":
        return None
    colon = _back_over_blanks(text, start)
    if colon < 0 or text[colon] != ":":
        return None
    quote = _back_over_blanks(text, colon)
    if quote < 0 or text[quote] != '"':
        return None
    first = quote
    while first > 0 and text[first - 1] == "\\":
        first -= 1
    backslashes = quote - first
    if _opens_a_string(text, first, backslashes):
        return None
    # Only as many as a quote of some depth has (0, 1, 3, 7, …: one less than a power of two);
    # two are an escaped backslash, then a quote.
    return text[first:quote + 1] if (backslashes + 1) & backslashes == 0 else None


# What stands before a string's opening quote in JSON, and ends no key a
# secret's name ends: a blank, a colon, a bracket, a comma.
_BEFORE_A_STRING = frozenset(" \t\r\n:[{,")


def _opens_a_string(text: str, first: int, backslashes: int) -> bool:
    """Whether the quote written from ``first`` (after ``backslashes``)
    opens a string rather than closes a key: in ``{"t": ": 12345678"}`` the
    colon is the string's own text, and a replacement quoted there would
    end the string. A line break as JSON escapes it, once or more (a tool's
    JSON output in a raw line), counts as a blank; a quote right before it
    is an outer string's opening one if it is of a shallower depth (else
    it opens the empty key, ``"": 12345678``)."""
    if first == 0:
        return True
    before = text[first - 1]
    if before in _BEFORE_A_STRING:
        return True
    if before == '"':
        outer = first - 1
        while outer > 0 and text[outer - 1] == "\\":
            outer -= 1
        return _quote_depth(first - 1 - outer) < _quote_depth(backslashes)
    return before in "nrt" and first >= 2 and text[first - 2] == "\\"


def _back_over_blanks(text: str, index: int) -> int:
    """The index of the last character before ``index`` that is no space or tab; -1 if none."""
    index -= 1
    while index >= 0 and text[index] in " \t":
        index -= 1
    return index


# A text cut to what is shown, from secrets found in more of it: cut where the
# text as written would be, never in the redacted text. There a long secret,
# replaced, would shorten what comes before the cut, and bring into view the
# part of a secret that the longer text's own end had cut, and so kept from
# the redactor.

def head_redacted(text: str, spans: list[tuple[int, int]], length: int) -> str:
    """The first ``length`` characters of ``text``, its ``spans`` replaced."""
    return replace_spans(text[:length], [(start, min(end, length)) for start, end in spans if start < length])


def tail_redacted(text: str, spans: list[tuple[int, int]], length: int) -> str:
    """The last ``length`` characters of ``text``, its ``spans`` replaced."""
    cut = max(0, len(text) - length)
    return replace_spans(text[cut:], [(max(start, cut) - cut, end - cut) for start, end in spans if end > cut])


# Go's JSON encoder (docker inspect, kubectl -o json, most of the tools an
# agent runs) writes these as \u escapes, where Python's writes them as they are.
_GO_HTML_ESCAPES = str.maketrans({"&": "\\u0026", "<": "\\u003c", ">": "\\u003e"})


def _json_forms(secret: str) -> set[str]:
    """The secret as a JSON string holds it: as Python and Go write it, and
    as that text holds it again inside a raw stream-json line (a tool's JSON
    output is a string in the CLI's line, escaped a second time)."""
    once = {json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1]}
    once |= {form.translate(_GO_HTML_ESCAPES) for form in once}
    twice = {json.dumps(form)[1:-1] for form in once} | {json.dumps(form, ensure_ascii=False)[1:-1] for form in once}
    return (once | twice) - {secret}


def _escaping(text: str, index: int) -> bool:
    """Is ``text[index]`` a backslash that escapes the character after it?"""
    run = 0
    while index - run >= 0 and text[index - run] == "\\":
        run += 1
    return run % 2 == 1


def _escape_cut_at(text: str, position: int) -> Optional[int]:
    """The start of the backslash escape (``\\n``, ``\\"``, ``\\u00e9``) that a
    cut at ``position`` would split, or None."""
    if position > 0 and _escaping(text, position - 1):
        return position - 1
    for back in range(2, 6):
        start = position - back
        if start >= 0 and text[start] == "\\" and text[start + 1] == "u" and _escaping(text, start):
            return start
    return None


def _whole_escapes(text: str, start: int, end: int) -> tuple[int, int]:
    """Widen a match so that it never takes half of a backslash escape: the
    rest would break the JSON string it sits in."""
    cut = _escape_cut_at(text, start)
    if cut is not None:
        start = cut
    cut = _escape_cut_at(text, end)
    if cut is not None:
        end = min(len(text), cut + (6 if text[cut + 1:cut + 2] == "u" else 2))
    return start, end


# --- configuration ---------------------------------------------------------

def secret_env_values(patterns: Iterable[str], environ: Mapping[str, str]) -> list[str]:
    """The values of the variables whose names match (case does not matter)."""
    patterns = [p.upper() for p in patterns]
    return [value for name, value in environ.items()
            if any(fnmatchcase(name.upper(), pattern) for pattern in patterns)]


# Where SQLAlchemy reads a URL's password (sqlalchemy.engine.url._parse_url).
_URL_PASSWORD = re.compile(r"[\w+]+://[^:/]*:(?P<password>[^@]*)@")


def database_passwords(uri: Optional[str]) -> list[str]:
    """The passwords in the database's URL (its own, and a client key's
    ``sslpassword`` in its query), as written and percent-encoded: the agent's
    environment holds the URL, and the service knows them for secrets."""
    if not uri:
        return []
    try:
        url = make_url(uri)
    except (ArgumentError, ValueError):
        return []
    found = [url.password] + [value for key, value in url.query.items() if key.lower().endswith("password")]
    values = [v for v in found if isinstance(v, str)]
    return values + [quote(v, safe="") for v in values] + _written_passwords(uri)


def _written_passwords(uri: str) -> list[str]:
    """The same passwords spelt as the URL spells them: percent-encoding is
    no one spelling (``p%40ss!``, ``p%2fss``, ``key+phrase``), and a program
    that reads the URL may print them so (``urlsplit(url).password``)."""
    netloc = _URL_PASSWORD.match(uri)
    found = [netloc["password"]] if netloc else []
    for pair in uri[netloc.end() if netloc else 0:].partition("?")[2].split("&"):
        key, equals, value = pair.partition("=")
        if equals and unquote_plus(key).lower().endswith("password"):
            found.append(value)
    return found


def build(config: Mapping, settings: Iterable, environ: Optional[Mapping[str, str]] = None,
          withheld: bool = False) -> Redactor:
    """The application's redactor: secret environment values, every setting
    declared secret, the key that signs the dashboard's cookies; with
    ``withheld``, also the service's secrets withheld from the agent's
    environment, known by their digests (``WITHHELD_ENV``)."""
    environ = os.environ if environ is None else environ
    values = secret_env_values(config.get(ENV_SETTING, []), environ)
    values += [config.get(s.name) for s in settings if s.secret]
    values.append(config.get("SECRET_KEY"))
    # The URL the service opens, and as the operator wrote it, which the agent's environment holds.
    values += database_passwords(config.get("SQLALCHEMY_DATABASE_URI"))
    values += database_passwords(config.get("CLAUDEOPS_DATABASE_URL"))
    return Redactor((v for v in values if isinstance(v, str)),
                    withheld=WithheldValues.parse(environ.get(WITHHELD_ENV)) if withheld else None)


def init_app(app: Flask) -> Redactor:
    redactor = build(app.config, app.extensions["claudeops.settings"])
    app.extensions["claudeops.redactor"] = redactor
    return redactor


def include_withheld(app: Flask) -> None:
    """For the cooldown hook, run in the agent's environment: what it writes
    is redacted of the service's own secrets too, which it knows only by
    their digests."""
    app.extensions["claudeops.redactor"] = build(app.config, app.extensions["claudeops.settings"], withheld=True)


def redactor() -> Redactor:
    """The current application's redactor."""
    return current_app.extensions["claudeops.redactor"]
