"""Version range expressions, as instances and ``upgradeFrom`` write them.

The ``semver`` package parses versions but has no range language that matches
what users of npm, Helm and Flux expect, so this module implements node-semver's
grammar on top of ``semver.Version``: comparators ``= != > >= < <=``, tilde,
caret, x-ranges (``1.2.x``, ``1.x``, ``*``), partial versions, hyphen ranges
(``1.2.3 - 2.3.4``), space or comma for AND and ``||`` for OR.

Differences from node-semver, on purpose:

* a leading ``v`` (``v1.2.3``, ``>=v1``) is rejected, as in catalog versions:
  one spelling per version keeps channel files, directories and ranges greppable;
* build metadata (``+build``) is rejected for the same reason;
* ``~>`` (Ruby's operator), an empty expression and an empty ``||`` alternative
  are errors rather than silently meaning "anything";
* ``!=`` exists: ``!=1.2.3`` excludes one version, ``!=1.2`` excludes ``1.2.x``;
  an exclusion never opts a prerelease in (see below).

Prerelease rule (node-semver's): a prerelease version matches only when the
caller passes ``include_prerelease``, or when a comparator of the same AND-set
carries a prerelease on the same MAJOR.MINOR.PATCH. Upper bounds produced by
sugar end in ``-0`` (``^1.2.3`` is ``>=1.2.3 <2.0.0-0``) so that even with
``include_prerelease`` a caret never admits ``2.0.0-rc.1``; lower bounds of a
partial version (``>=1.2``, ``1.x``, ``^1.2``, ``~1``) admit that version's own
prereleases (``1.2.0-rc.1``) only with ``include_prerelease``.

Size is bounded: a range is tested against every version of an app, often for
every instance and every ``upgradeFrom`` step, so its cost is alternatives times
comparators times versions. A range of 2,000 ``||`` alternatives once made
``validate`` of a 5,000-version catalog five times slower; past
``MAX_ALTERNATIVES`` alternatives or ``MAX_COMPARATORS`` comparators in all, a
range is a syntax error (the caller names the file and line), like any other
malformed one. Real ranges use a handful.

Called by ``reconciler.resolve.resolver`` (instance ranges) and
``reconciler.resolve.paths`` (``upgradeFrom``); the catalog validator may call
``parse_range`` to report bad expressions at load time.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from reconciler.model.version import Version

__all__ = [
    "MAX_ALTERNATIVES",
    "MAX_COMPARATORS",
    "Comparator",
    "Exclusion",
    "Range",
    "RangeSyntaxError",
    "parse_range",
]

MAX_ALTERNATIVES = 32  # "||"-separated AND-sets in one range
MAX_COMPARATORS = 64  # comparators written in one range, all alternatives together
_SHOWN = 80  # characters of a range an error message quotes

_NOTHING = Version(0, 0, 0, prerelease="0")  # "<0.0.0-0" matches no version at all
_OPERATOR = re.compile(r">=|<=|!=|>|<|=|~|\^")
_PRERELEASE_ID = re.compile(r"0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*")
_WILDCARDS = ("x", "X", "*")


class RangeSyntaxError(ValueError):
    """A range expression that cannot be parsed; the message says what and where."""

    def __init__(self, text: str, column: int, problem: str) -> None:
        self.text = text
        self.column = column  # 1-based position in ``text``
        self.problem = problem
        shown = text if len(text) <= _SHOWN else text[:_SHOWN] + "..."
        super().__init__(f'invalid range "{shown}" at column {column}: {problem}')


@dataclass(frozen=True)
class Comparator:
    """``op version`` after desugaring; ``floor`` marks a partial version's lower bound."""

    op: str  # "<" "<=" ">" ">=" "="
    version: Version
    floor: bool = False

    def test(self, v: Version, *, include_prerelease: bool = False) -> bool:
        bound = self.version
        if self.floor and include_prerelease:
            # ">=1.2" with prereleases allowed also means 1.2.0-rc.1 (node-semver)
            bound = bound.replace(prerelease="0")
        c = v.compare(bound)
        if self.op == "<":
            return c < 0
        if self.op == "<=":
            return c <= 0
        if self.op == ">":
            return c > 0
        if self.op == ">=":
            return c >= 0
        return c == 0

    def opts_in(self, v: Version) -> bool:
        """Does this comparator admit prereleases of ``v``'s MAJOR.MINOR.PATCH?"""
        w = self.version
        return w.prerelease is not None and (w.major, w.minor, w.patch) == (
            v.major,
            v.minor,
            v.patch,
        )

    def __str__(self) -> str:
        return f"{self.op}{self.version}"


@dataclass(frozen=True)
class Exclusion:
    """``!=``: matches every version the inner comparators do not all match."""

    inner: tuple[Comparator, ...]

    def test(self, v: Version, *, include_prerelease: bool = False) -> bool:
        return not all(c.test(v, include_prerelease=include_prerelease) for c in self.inner)

    def opts_in(self, v: Version) -> bool:
        # excluding "1.2.3-beta.1" must not be read as "prereleases of 1.2.3 welcome"
        return False

    def __str__(self) -> str:
        if len(self.inner) == 1 and self.inner[0].op == "=":
            return f"!={self.inner[0].version}"
        return "!(" + " ".join(str(c) for c in self.inner) + ")"


Clause = Comparator | Exclusion


def _and_matches(clauses: tuple[Clause, ...], v: Version, *, include_prerelease: bool) -> bool:
    if not all(c.test(v, include_prerelease=include_prerelease) for c in clauses):
        return False
    if v.prerelease is None or include_prerelease:
        return True
    return any(c.opts_in(v) for c in clauses)


@dataclass(frozen=True)
class Range:
    """A parsed range: OR of AND-sets of comparators; ``str()`` is the user's text."""

    text: str
    alternatives: tuple[tuple[Clause, ...], ...]

    def matches(self, v: Version, *, include_prerelease: bool = False) -> bool:
        return any(
            _and_matches(clauses, v, include_prerelease=include_prerelease)
            for clauses in self.alternatives
        )

    @property
    def normalized(self) -> str:
        """The desugared form, e.g. ``~1.2`` -> ``>=1.2.0 <1.3.0-0``; for explanations."""
        return " || ".join(
            " ".join(str(c) for c in clauses) or "*" for clauses in self.alternatives
        )

    def __str__(self) -> str:
        return self.text


def parse_range(text: str) -> Range:
    """Parse a range expression or raise ``RangeSyntaxError`` naming the column at fault."""
    if not isinstance(text, str):
        raise RangeSyntaxError(str(text), 1, "a range must be a string (quote it in YAML)")
    return _parse_range(text)


@functools.lru_cache(maxsize=4096)
def _parse_range(text: str) -> Range:
    """A range is a frozen value of its text alone, and a catalog writes the same few
    (every version's ``upgradeFrom: ">=1.0.0"``) thousands of times; each is parsed
    once, in a bounded memo (an error is not kept: it is raised again when asked)."""
    if not text.strip():
        raise RangeSyntaxError(text, 1, "empty range (write * to allow any version)")
    return Range(text, tuple(_RangeParser(text).alternatives()))


@dataclass(frozen=True)
class _Partial:
    """A possibly incomplete version: ``None`` parts are wildcards or missing."""

    major: int | None
    minor: int | None
    patch: int | None
    prerelease: str | None = None

    @property
    def full(self) -> bool:
        return self.patch is not None

    def low(self) -> Version:
        return Version(self.major or 0, self.minor or 0, self.patch or 0, self.prerelease)

    def next_up(self) -> Version:
        """The first version after everything this partial covers (1.2 -> 1.3.0)."""
        assert self.major is not None
        if self.minor is None:
            return Version(self.major + 1, 0, 0)
        return Version(self.major, self.minor + 1, 0)


@dataclass(frozen=True)
class _Token:
    pos: int  # 0-based offset in the whole expression
    text: str


def _below(v: Version) -> Comparator:
    """``<v-0``: below every prerelease of ``v`` too."""
    return Comparator("<", v.replace(prerelease="0"))


class _RangeParser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.comparators = 0  # written so far, all alternatives together

    def fail(self, pos: int, problem: str) -> RangeSyntaxError:
        return RangeSyntaxError(self.text, pos + 1, problem)

    def alternatives(self) -> list[tuple[Clause, ...]]:
        out: list[tuple[Clause, ...]] = []
        start = 0
        i = 0
        while i <= len(self.text):
            if i == len(self.text) or self.text.startswith("||", i):
                if len(out) == MAX_ALTERNATIVES:
                    first = len(self.text[start:i]) - len(self.text[start:i].lstrip())
                    raise self.fail(
                        start + first,
                        f"more than {MAX_ALTERNATIVES} alternatives (||): a range is tested "
                        "against every version, so its size is bounded; merge them into "
                        "wider ones (1.2.x, ^1.2.0, >=1.2.0 <1.5.0)",
                    )
                out.append(self.alternative(start, i))
                start = i = i + 2
                continue
            if self.text[i] == "|":
                raise self.fail(i, 'a single "|" is not an operator; write || for OR')
            i += 1
        return out

    def alternative(self, start: int, end: int) -> tuple[Clause, ...]:
        tokens = [
            _Token(start + m.start(), m.group())
            for m in re.finditer(r",|[^\s,]+", self.text[start:end])
        ]
        if not tokens:
            raise self.fail(start, "empty alternative next to || (write * for any version)")
        clauses: list[Clause] = []
        i = 0
        while i < len(tokens):
            tok = tokens[i]
            if tok.text == ",":
                self.check_comma(tokens, i)
                i += 1
                continue
            if tok.text == "-":
                raise self.fail(
                    tok.pos, 'a hyphen range needs a version on both sides: "1.2.3 - 2.3.4"'
                )
            self.count(tok)
            op, body, consumed = self.comparator_parts(tokens, i)
            lower = self.partial(body)
            if op is None and i + consumed < len(tokens) and tokens[i + consumed].text == "-":
                upper_at = i + consumed + 1
                if upper_at >= len(tokens) or tokens[upper_at].text == ",":
                    raise self.fail(tokens[i + consumed].pos, 'expected a version after " - "')
                upper = self.partial(tokens[upper_at])
                clauses += _hyphen(lower, upper)
                i = upper_at + 1
                continue
            clauses += _desugar(op, lower)
            i += consumed
        return tuple(clauses)

    def count(self, tok: _Token) -> None:
        self.comparators += 1
        if self.comparators > MAX_COMPARATORS:
            raise self.fail(
                tok.pos,
                f"more than {MAX_COMPARATORS} comparators: a range is tested against every "
                "version, so its size is bounded; write fewer, wider ones",
            )

    def check_comma(self, tokens: list[_Token], i: int) -> None:
        if i == 0 or tokens[i - 1].text == ",":
            raise self.fail(tokens[i].pos, 'expected a comparator before ","')
        if i == len(tokens) - 1:
            raise self.fail(tokens[i].pos, 'expected a comparator after ","')

    def comparator_parts(self, tokens: list[_Token], i: int) -> tuple[str | None, _Token, int]:
        """Split ``>=1.2.3`` (or ``>=`` ``1.2.3``) into operator and version token."""
        tok = tokens[i]
        if tok.text.startswith("~>"):
            raise self.fail(tok.pos, '"~>" is not supported; write ~1.2 (>=1.2.0 <1.3.0) or ^1.2')
        if tok.text.startswith("=="):
            raise self.fail(tok.pos, '"==" is not an operator; write =1.2.3 or just 1.2.3')
        m = _OPERATOR.match(tok.text)
        if m is None:
            return None, tok, 1
        op = m.group()
        rest = tok.text[m.end() :]
        if rest[:1] in ("<", ">", "=", "!", "~", "^", "-"):
            raise self.fail(
                tok.pos + m.end(), f'expected a version after "{op}", found "{rest[0]}"'
            )
        if rest:
            return op, _Token(tok.pos + m.end(), rest), 1
        nxt = tokens[i + 1] if i + 1 < len(tokens) else None
        if nxt is None or nxt.text in (",", "-"):
            raise self.fail(tok.pos + len(op), f'expected a version after "{op}"')
        return op, nxt, 2

    def partial(self, tok: _Token) -> _Partial:
        text, pos = tok.text, tok.pos
        first = text[0]
        if first in "<>=!~^-":
            raise self.fail(pos, f'expected a version, found "{first}"')
        if first in "vV" and text[1:2].isdigit():
            raise self.fail(pos, f'a version must not start with "v" (write {text[1:]})')
        plus = text.find("+")
        if plus >= 0:
            raise self.fail(pos + plus, "build metadata (+...) is not allowed in a range")
        dash = text.find("-")
        core, pre = (text, None) if dash < 0 else (text[:dash], text[dash + 1 :])
        parts = self.numbers(core, pos)
        if pre is not None:
            if None in parts or len(parts) < 3:
                raise self.fail(pos + dash, "a prerelease needs a full MAJOR.MINOR.PATCH version")
            self.check_prerelease(pre, pos + dash + 1)
        parts += [None] * (3 - len(parts))
        return _Partial(parts[0], parts[1], parts[2], pre)

    def numbers(self, core: str, pos: int) -> list[int | None]:
        parts: list[int | None] = []
        offset = pos
        for index, part in enumerate(core.split(".")):
            if index == 3:
                raise self.fail(offset, "a version has at most three parts (MAJOR.MINOR.PATCH)")
            if part in _WILDCARDS:
                parts.append(None)
            elif part.isascii() and part.isdigit() and (part == "0" or part[0] != "0"):
                if parts and parts[-1] is None:
                    raise self.fail(
                        offset, "a wildcard must be the last part (write 1.x, not 1.x.3)"
                    )
                parts.append(int(part))
            elif not part:
                raise self.fail(offset, "empty version part (expected a number, x or *)")
            elif part.isascii() and part.isdigit():
                raise self.fail(offset, f'"{part}" has a leading zero')
            else:
                raise self.fail(offset, f'expected a number, x or *, found "{part}"')
            offset += len(part) + 1
        return parts

    def check_prerelease(self, pre: str, pos: int) -> None:
        offset = pos
        for ident in pre.split("."):
            if not _PRERELEASE_ID.fullmatch(ident):
                what = (
                    f'invalid prerelease identifier "{ident}"'
                    if ident
                    else "empty prerelease identifier"
                )
                raise self.fail(
                    offset, f"{what} (letters, digits and -; numbers without leading zeros)"
                )
            offset += len(ident) + 1


def _desugar(op: str | None, p: _Partial) -> list[Clause]:
    """One written comparator as plain comparators (node-semver's expansions)."""
    if p.major is None:  # "*", "x", ">=*", "~*", ...
        return [Comparator("<", _NOTHING)] if op in (">", "<", "!=") else []
    if op == "~":
        upper = Version(p.major + 1, 0, 0) if p.minor is None else Version(p.major, p.minor + 1, 0)
        return [Comparator(">=", p.low(), floor=not p.full), _below(upper)]
    if op == "^":
        return [Comparator(">=", p.low(), floor=not p.full), _below(_caret_upper(p))]
    if p.full:
        v = p.low()
        if op in (None, "="):
            return [Comparator("=", v)]
        if op == "!=":
            return [Exclusion((Comparator("=", v),))]
        return [Comparator(op, v)]
    return _partial_comparator(op, p)


def _caret_upper(p: _Partial) -> Version:
    """Caret allows changes that do not touch the left-most non-zero part."""
    assert p.major is not None
    if p.major > 0 or p.minor is None:
        return Version(p.major + 1, 0, 0)
    if p.minor > 0 or p.patch is None:
        return Version(0, p.minor + 1, 0)
    return Version(0, 0, p.patch + 1)


def _partial_comparator(op: str | None, p: _Partial) -> list[Clause]:
    """``1.2``, ``>1.2``, ``<=1.x``...: comparisons against the whole 1.2.x block."""
    block: list[Comparator] = [Comparator(">=", p.low(), floor=True), _below(p.next_up())]
    if op in (None, "="):
        return list(block)
    if op == "!=":
        return [Exclusion(tuple(block))]
    if op == ">":
        return [Comparator(">=", p.next_up(), floor=True)]
    if op == ">=":
        return [block[0]]
    if op == "<":
        return [_below(p.low())]
    return [block[1]]  # "<="


def _hyphen(lower: _Partial, upper: _Partial) -> list[Clause]:
    """``A - B``: at least A (a partial A is its first version), at most all of B."""
    out: list[Clause] = []
    if lower.major is not None:
        out.append(Comparator(">=", lower.low(), floor=not lower.full))
    if upper.full:
        out.append(Comparator("<=", upper.low()))
    elif upper.major is not None:
        out.append(_below(upper.next_up()))
    return out
