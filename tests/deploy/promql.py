"""A small PromQL parser for checking the alert rules and dashboard queries in tests.

promtool is not installed here, so this parses the subset of PromQL that
``deploy/monitoring/`` uses the way Prometheus's grammar does
(https://prometheus.io/docs/prometheus/latest/querying/basics/): selectors with
label matchers, range and subquery brackets, ``offset``, functions and
aggregations with ``by``/``without``, binary operators with ``bool``,
``on``/``ignoring`` and ``group_left``/``group_right``. It checks what promtool
would refuse (unbalanced brackets, unknown functions, a range vector where an
instant vector is needed and the reverse) and returns every selector, so a test
can check that each metric and label really exists. Grafana's ``$variables``
are accepted where Grafana substitutes them: in strings and as a range.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

AGGREGATIONS = {
    "sum",
    "min",
    "max",
    "avg",
    "group",
    "stddev",
    "stdvar",
    "count",
    "count_values",
    "bottomk",
    "topk",
    "quantile",
}
AGGREGATIONS_WITH_PARAMETER = {"count_values", "bottomk", "topk", "quantile"}
# functions whose (first) argument is a range vector
RANGE_FUNCTIONS = {
    "rate",
    "irate",
    "increase",
    "delta",
    "idelta",
    "deriv",
    "changes",
    "resets",
    "predict_linear",
    "absent_over_time",
    "present_over_time",
    "avg_over_time",
    "min_over_time",
    "max_over_time",
    "sum_over_time",
    "count_over_time",
    "quantile_over_time",
    "stddev_over_time",
    "stdvar_over_time",
    "last_over_time",
}
INSTANT_FUNCTIONS = {
    "abs",
    "absent",
    "ceil",
    "clamp",
    "clamp_max",
    "clamp_min",
    "day_of_month",
    "day_of_week",
    "day_of_year",
    "days_in_month",
    "exp",
    "floor",
    "histogram_quantile",
    "hour",
    "label_join",
    "label_replace",
    "ln",
    "log2",
    "log10",
    "minute",
    "month",
    "round",
    "scalar",
    "sgn",
    "sort",
    "sort_desc",
    "sqrt",
    "time",
    "timestamp",
    "vector",
    "year",
}
FUNCTIONS = RANGE_FUNCTIONS | INSTANT_FUNCTIONS
SET_OPERATORS = {"and", "or", "unless"}
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset"}
COMPARISONS = {"==", "!=", ">", "<", ">=", "<="}
ARITHMETIC = {"+", "-", "*", "/", "%", "^"}
MATCH_OPERATORS = {"=", "!=", "=~", "!~"}

_TOKEN = re.compile(
    r"""
    (?P<space>\s+|\#[^\n]*)
  | (?P<duration>(?:\d+(?:ms|s|m|h|d|w|y))+)
  | (?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
  | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
  | (?P<variable>\$\{?[A-Za-z_][A-Za-z0-9_]*\}?)
  | (?P<ident>[A-Za-z_:][A-Za-z0-9_:]*)
  | (?P<op>==|!=|>=|<=|=~|!~|[-+*/%^<>=(){}\[\],:])
    """,
    re.VERBOSE,
)


class PromQLError(ValueError):
    pass


@dataclass(frozen=True)
class Selector:
    """A vector selector: its metric name and its matchers ``(label, op, value)``."""

    metric: str
    matchers: tuple[tuple[str, str, str], ...]


@dataclass
class Parsed:
    selectors: list[Selector] = field(default_factory=list)
    functions: set[str] = field(default_factory=set)
    # labels named in by/without/on/ignoring/group_* clauses
    grouping: set[str] = field(default_factory=set)
    type: str = ""


@dataclass(frozen=True)
class Token:
    kind: str
    text: str
    at: int


def tokens(text: str) -> list[Token]:
    found: list[Token] = []
    at = 0
    while at < len(text):
        match = _TOKEN.match(text, at)
        if match is None:
            raise PromQLError(f"unexpected character {text[at]!r} at {at}")
        kind = match.lastgroup or ""
        if kind != "space":
            found.append(Token(kind, match.group(), at))
        at = match.end()
    return found


def parse(text: str) -> Parsed:
    """Parse one expression; raises ``PromQLError`` naming what is wrong and where."""
    parser = _Parser(tokens(text), text)
    kind = parser.expression()
    if parser.peek() is not None:
        token = parser.peek()
        assert token is not None
        raise PromQLError(f"unexpected {token.text!r} at {token.at} in {text!r}")
    parser.result.type = kind
    return parser.result


class _Parser:
    def __init__(self, items: list[Token], text: str) -> None:
        self.items = items
        self.text = text
        self.pos = 0
        self.result = Parsed()

    # -- tokens ---------------------------------------------------------------------

    def peek(self, ahead: int = 0) -> Token | None:
        index = self.pos + ahead
        return self.items[index] if index < len(self.items) else None

    def take(self) -> Token:
        token = self.peek()
        if token is None:
            raise PromQLError(f"unexpected end of {self.text!r}")
        self.pos += 1
        return token

    def expect(self, text: str) -> Token:
        token = self.take()
        if token.text != text:
            raise PromQLError(f"expected {text!r} at {token.at}, found {token.text!r}")
        return token

    def at(self, *texts: str) -> bool:
        token = self.peek()
        return token is not None and token.text in texts

    # -- grammar --------------------------------------------------------------------

    def expression(self, level: int = 0) -> str:
        """Binary operators by precedence (lowest first), ``^`` right-associative."""
        levels: list[set[str]] = [
            {"or"},
            {"and", "unless"},
            COMPARISONS,
            {"+", "-"},
            {"*", "/", "%"},
            {"^"},
        ]
        if level == len(levels):
            return self.unary()
        left = self.expression(level + 1)
        while self.at(*levels[level]):
            op = self.take().text
            comparison_bool = op in COMPARISONS and self.at("bool")
            if comparison_bool:
                self.take()
            self.modifiers()
            right = self.expression(level if op == "^" else level + 1)
            left = self._binary(op, left, right, comparison_bool)
        return left

    def _binary(self, op: str, left: str, right: str, comparison_bool: bool) -> str:
        if "range" in (left, right) or "string" in (left, right):
            raise PromQLError(f"operator {op!r} needs instant vectors or scalars in {self.text!r}")
        if op in SET_OPERATORS and "scalar" in (left, right):
            raise PromQLError(f"set operator {op!r} needs two vectors in {self.text!r}")
        if op in COMPARISONS and left == right == "scalar" and not comparison_bool:
            raise PromQLError(f"comparing two scalars needs bool in {self.text!r}")
        return "scalar" if left == right == "scalar" else "instant"

    def modifiers(self) -> None:
        if self.at("on", "ignoring"):
            self.take()
            self.result.grouping |= self.label_list()
        if self.at("group_left", "group_right"):
            self.take()
            if self.at("("):
                self.result.grouping |= self.label_list()

    def label_list(self) -> set[str]:
        self.expect("(")
        labels: set[str] = set()
        while not self.at(")"):
            token = self.take()
            if token.kind != "ident":
                raise PromQLError(f"expected a label name at {token.at}, found {token.text!r}")
            labels.add(token.text)
            if not self.at(")"):
                self.expect(",")
        self.expect(")")
        return labels

    def unary(self) -> str:
        if self.at("-", "+"):
            self.take()
        return self.postfix(self.primary())

    def postfix(self, kind: str) -> str:
        while self.at("["):
            self.take()
            self.duration()
            if self.at(":"):  # a subquery: [range:step]
                self.take()
                if not self.at("]"):
                    self.duration()
                if kind != "instant":
                    raise PromQLError(f"a subquery needs an instant vector in {self.text!r}")
            elif kind != "selector":
                raise PromQLError(f"a range needs a vector selector in {self.text!r}")
            self.expect("]")
            kind = "range"
        if self.at("offset"):
            self.take()
            self.duration()
        return "instant" if kind == "selector" else kind

    def duration(self) -> None:
        token = self.take()
        if token.kind == "duration" or (token.kind == "variable" and "__" in token.text):
            return
        raise PromQLError(f"expected a duration at {token.at}, found {token.text!r}")

    def primary(self) -> str:
        token = self.take()
        if token.kind == "number":
            return "scalar"
        if token.kind == "string":
            return "string"
        if token.text == "(":
            kind = self.expression()
            self.expect(")")
            return kind
        if token.text == "{":
            self.pos -= 1
            return self.selector("")
        if token.kind != "ident":
            raise PromQLError(f"unexpected {token.text!r} at {token.at} in {self.text!r}")
        name = token.text
        if name in AGGREGATIONS:
            return self.aggregation(name)
        if self.at("("):
            return self.call(name, token)
        if name in KEYWORDS or name in SET_OPERATORS:
            raise PromQLError(f"unexpected keyword {name!r} at {token.at} in {self.text!r}")
        return self.selector(name)

    def aggregation(self, name: str) -> str:
        if self.at("by", "without"):
            self.take()
            self.result.grouping |= self.label_list()
        self.expect("(")
        if name in AGGREGATIONS_WITH_PARAMETER:
            self.expression()
            self.expect(",")
        if self.expression() != "instant":
            raise PromQLError(f"{name}() needs an instant vector in {self.text!r}")
        self.expect(")")
        if self.at("by", "without"):
            self.take()
            self.result.grouping |= self.label_list()
        self.result.functions.add(name)
        return "instant"

    def call(self, name: str, token: Token) -> str:
        if name not in FUNCTIONS:
            raise PromQLError(f"unknown function {name}() at {token.at} in {self.text!r}")
        self.result.functions.add(name)
        self.expect("(")
        args: list[str] = []
        while not self.at(")"):
            args.append(self.expression())
            if not self.at(")"):
                self.expect(",")
        self.expect(")")
        if name in RANGE_FUNCTIONS:
            if not args or args[0] != "range":
                raise PromQLError(f"{name}() needs a range vector in {self.text!r}")
        elif "range" in args:
            raise PromQLError(f"{name}() takes no range vector in {self.text!r}")
        if name == "histogram_quantile" and args != ["scalar", "instant"]:
            raise PromQLError(f"histogram_quantile(φ, buckets) in {self.text!r}")
        if name == "time" and args:
            raise PromQLError(f"time() takes no argument in {self.text!r}")
        return "scalar" if name in ("time", "scalar") else "instant"

    def selector(self, name: str) -> str:
        matchers: list[tuple[str, str, str]] = []
        if self.at("{"):
            self.take()
            while not self.at("}"):
                label = self.take()
                if label.kind != "ident":
                    raise PromQLError(f"expected a label at {label.at}, found {label.text!r}")
                op = self.take()
                if op.text not in MATCH_OPERATORS:
                    raise PromQLError(f"expected a matcher at {op.at}, found {op.text!r}")
                value = self.take()
                if value.kind != "string":
                    raise PromQLError(f"expected a quoted value at {value.at}")
                matchers.append((label.text, op.text, value.text[1:-1]))
                if not self.at("}"):
                    self.expect(",")
            self.expect("}")
        if not name and not matchers:
            raise PromQLError(f"a selector needs a name or a matcher in {self.text!r}")
        self.result.selectors.append(Selector(name, tuple(matchers)))
        return "selector"
