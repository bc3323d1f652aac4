"""A PromQL syntax checker, so ``validate`` rejects a broken query before a rollout runs it.

No maintained PromQL parser exists on PyPI (the packages there build queries or call
the HTTP API), so this is a small recursive-descent grammar after Prometheus's own
(``promql/parser/generated_parser.y`` and ``lex.go``): selectors with matchers, range
vectors, ``offset`` and ``@``, subqueries, function calls with their argument types,
aggregations with ``by``/``without`` and a parameter, binary operators with their
precedence, ``bool``, ``on``/``ignoring`` and ``group_left``/``group_right``,
numbers (hex, octal, ``Inf``, ``NaN``), strings and durations. It checks types the
way Prometheus does (``rate`` takes a range vector, comparisons between scalars need
``bool``, set operators take vectors), because those are the errors a query's author
makes. It builds no tree: ``check`` returns the expression's type or raises
``PromQLError`` with the column. Prometheus itself is the final judge at query time;
a query this accepts and Prometheus refuses is a failed measurement with its reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

SCALAR, VECTOR, MATRIX, STRING = "scalar", "instant vector", "range vector", "string"
MAX_DEPTH = 100  # nesting bound: a query is a catalog input like any other


class PromQLError(ValueError):
    """A query that is not PromQL; ``column`` counts from 1."""

    def __init__(self, message: str, column: int) -> None:
        super().__init__(f"{message} (column {column})")
        self.column = column
        self.reason = message


@dataclass(frozen=True)
class Token:
    kind: str  # number duration string ident op ( ) { } [ ] , : eof
    text: str
    pos: int


_DURATION = re.compile(r"(?:[0-9]+(?:ms|s|m|h|d|w|y))+")
_NUMBER = re.compile(
    r"0[xX][0-9a-fA-F]+|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", re.ASCII
)
_IDENT = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
_OPS = ("==", "!=", "<=", ">=", "=~", "!~", "+", "-", "*", "/", "%", "^", "<", ">", "=", "@")
_PUNCT = "(){}[],:"


def tokenize(query: str) -> list[Token]:
    """Split ``query`` into tokens; a character PromQL has no use for is an error."""
    out: list[Token] = []
    i, n = 0, len(query)
    brackets = 0  # inside [...], ":" separates a subquery's range from its step
    while i < n:
        c = query[i]
        if c.isspace():
            i += 1
        elif c == "#":
            while i < n and query[i] != "\n":
                i += 1
        elif c in "\"'`":
            j = _string_end(query, i)
            out.append(Token("string", query[i : j + 1], i))
            i = j + 1
        elif c.isdigit() or (c == "." and i + 1 < n and query[i + 1].isdigit()):
            j = i
            while j < n and (query[j].isalnum() or query[j] in "._"):
                j += 1
            if (
                j < n
                and query[j] in "+-"
                and query[j - 1] in "eE"
                and not query[i:j].startswith("0x")
            ):
                j += 1  # the sign of an exponent: 5e-3
                while j < n and (query[j].isalnum() or query[j] in "._"):
                    j += 1
            text = query[i:j]
            if _DURATION.fullmatch(text):
                out.append(Token("duration", text, i))
            elif _NUMBER.fullmatch(text) or text.lower() in ("inf", "nan"):
                out.append(Token("number", text, i))
            else:
                raise PromQLError(f'bad number or duration syntax: "{text}"', i + 1)
            i = j
        elif c.isalpha() or c == "_" or (c == ":" and not brackets):
            m = _IDENT.match(query, i)
            assert m is not None
            out.append(Token("ident", m.group(0), i))
            i = m.end()
        elif c in _PUNCT:
            brackets += {"[": 1, "]": -1}.get(c, 0)
            out.append(Token(c, c, i))
            i += 1
        else:
            op = next((o for o in _OPS if query.startswith(o, i)), None)
            if op is None:
                after = f" after '{c}'" if c == "!" else ""
                shown = query[i + 1] if after and i + 1 < n else c
                raise PromQLError(f"unexpected character{after}: '{shown}'", i + 1)
            out.append(Token("op", op, i))
            i += len(op)
    out.append(Token("eof", "", n))
    return out


def _string_end(query: str, start: int) -> int:
    quote = query[start]
    i = start + 1
    while i < len(query):
        if query[i] == "\\" and quote != "`":
            i += 2
            continue
        if query[i] == quote:
            return i
        if query[i] == "\n" and quote != "`":
            break
        i += 1
    raise PromQLError("unterminated quoted string", start + 1)


# --- the language's vocabulary ---------------------------------------------------------

_AGGREGATIONS = {
    "sum": None,
    "min": None,
    "max": None,
    "avg": None,
    "group": None,
    "stddev": None,
    "stdvar": None,
    "count": None,
    "count_values": STRING,
    "bottomk": SCALAR,
    "topk": SCALAR,
    "quantile": SCALAR,
    "limitk": SCALAR,
    "limit_ratio": SCALAR,
}
_V, _M, _S, _T = VECTOR, MATRIX, SCALAR, STRING
_TRIG = [
    "acos",
    "acosh",
    "asin",
    "asinh",
    "atan",
    "atanh",
    "cos",
    "cosh",
    "sin",
    "sinh",
    "tan",
    "tanh",
]
# name -> (argument types, how many trailing ones may be left out, variadic last, result)
_FUNCTIONS: dict[str, tuple[tuple[str, ...], int, bool, str]] = {
    "abs": ((_V,), 0, False, _V),
    "absent": ((_V,), 0, False, _V),
    "absent_over_time": ((_M,), 0, False, _V),
    "ceil": ((_V,), 0, False, _V),
    "changes": ((_M,), 0, False, _V),
    "clamp": ((_V, _S, _S), 0, False, _V),
    "clamp_max": ((_V, _S), 0, False, _V),
    "clamp_min": ((_V, _S), 0, False, _V),
    "day_of_month": ((_V,), 1, False, _V),
    "day_of_week": ((_V,), 1, False, _V),
    "day_of_year": ((_V,), 1, False, _V),
    "days_in_month": ((_V,), 1, False, _V),
    "delta": ((_M,), 0, False, _V),
    "deriv": ((_M,), 0, False, _V),
    "exp": ((_V,), 0, False, _V),
    "floor": ((_V,), 0, False, _V),
    "histogram_avg": ((_V,), 0, False, _V),
    "histogram_count": ((_V,), 0, False, _V),
    "histogram_sum": ((_V,), 0, False, _V),
    "histogram_fraction": ((_S, _S, _V), 0, False, _V),
    "histogram_quantile": ((_S, _V), 0, False, _V),
    "histogram_stddev": ((_V,), 0, False, _V),
    "histogram_stdvar": ((_V,), 0, False, _V),
    "double_exponential_smoothing": ((_M, _S, _S), 0, False, _V),
    "holt_winters": ((_M, _S, _S), 0, False, _V),
    "hour": ((_V,), 1, False, _V),
    "idelta": ((_M,), 0, False, _V),
    "increase": ((_M,), 0, False, _V),
    "irate": ((_M,), 0, False, _V),
    "label_replace": ((_V, _T, _T, _T, _T), 0, False, _V),
    "label_join": ((_V, _T, _T, _T), 0, True, _V),
    "last_over_time": ((_M,), 0, False, _V),
    "ln": ((_V,), 0, False, _V),
    "log10": ((_V,), 0, False, _V),
    "log2": ((_V,), 0, False, _V),
    "mad_over_time": ((_M,), 0, False, _V),
    "max_over_time": ((_M,), 0, False, _V),
    "min_over_time": ((_M,), 0, False, _V),
    "avg_over_time": ((_M,), 0, False, _V),
    "count_over_time": ((_M,), 0, False, _V),
    "quantile_over_time": ((_S, _M), 0, False, _V),
    "stddev_over_time": ((_M,), 0, False, _V),
    "stdvar_over_time": ((_M,), 0, False, _V),
    "sum_over_time": ((_M,), 0, False, _V),
    "present_over_time": ((_M,), 0, False, _V),
    "minute": ((_V,), 1, False, _V),
    "month": ((_V,), 1, False, _V),
    "predict_linear": ((_M, _S), 0, False, _V),
    "rate": ((_M,), 0, False, _V),
    "resets": ((_M,), 0, False, _V),
    "round": ((_V, _S), 1, False, _V),
    "scalar": ((_V,), 0, False, _S),
    "sgn": ((_V,), 0, False, _V),
    "sort": ((_V,), 0, False, _V),
    "sort_desc": ((_V,), 0, False, _V),
    "sort_by_label": ((_V, _T), 0, True, _V),
    "sort_by_label_desc": ((_V, _T), 0, True, _V),
    "sqrt": ((_V,), 0, False, _V),
    "time": ((), 0, False, _S),
    "timestamp": ((_V,), 0, False, _V),
    "vector": ((_S,), 0, False, _V),
    "year": ((_V,), 1, False, _V),
    "pi": ((), 0, False, _S),
    "deg": ((_V,), 0, False, _V),
    "rad": ((_V,), 0, False, _V),
    **{name: ((_V,), 0, False, _V) for name in _TRIG},
}
# binary operators by precedence, lowest first; ``^`` is right-associative
_LEVELS: tuple[frozenset[str], ...] = (
    frozenset({"or"}),
    frozenset({"and", "unless"}),
    frozenset({"==", "!=", "<=", "<", ">=", ">"}),
    frozenset({"+", "-"}),
    frozenset({"*", "/", "%", "atan2"}),
    frozenset({"^"}),
)
_POW = len(_LEVELS) - 1
_SET_OPS = frozenset({"and", "or", "unless"})
_COMPARISONS = _LEVELS[2]
# words that follow an operator or an aggregation, never a function's name
_KEYWORDS = frozenset({"on", "ignoring", "group_left", "group_right", "bool", "by", "without"})


@dataclass(frozen=True)
class _Expr:
    type: str
    pos: int
    selector: bool = False  # a vector selector: it may take a range, offset and @
    modified: frozenset[str] = frozenset()  # "offset", "@" already set


def check(query: str) -> str:
    """The type of ``query`` (``scalar``, ``instant vector``...), or ``PromQLError``."""
    return _Parser(query).parse()


class _Parser:
    def __init__(self, query: str) -> None:
        self.query = query
        self.tokens = tokenize(query)
        self.i = 0
        self.depth = 0

    # --- tokens -----------------------------------------------------------------------

    @property
    def tok(self) -> Token:
        return self.tokens[self.i]

    def peek(self, ahead: int = 1) -> Token:
        return self.tokens[min(self.i + ahead, len(self.tokens) - 1)]

    def take(self) -> Token:
        tok = self.tokens[self.i]
        self.i = min(self.i + 1, len(self.tokens) - 1)
        return tok

    def error(self, message: str, tok: Token | None = None) -> PromQLError:
        return PromQLError(message, (tok or self.tok).pos + 1)

    def unexpected(self, context: str = "") -> PromQLError:
        tok = self.tok
        if tok.kind == "eof":
            return self.error("unexpected end of input" + context)
        if tok.kind == ")":
            return self.error("unexpected right parenthesis ')'" + context)
        shown = f"<op:{tok.text}>" if tok.kind == "op" else f'"{tok.text}"'
        return self.error(f"unexpected {shown}{context}")

    def expect(self, kind: str, context: str) -> Token:
        if self.tok.kind != kind:
            raise self.unexpected(context)
        return self.take()

    def is_word(self, *words: str) -> bool:
        return self.tok.kind == "ident" and self.tok.text.lower() in words

    # --- expressions --------------------------------------------------------------------

    def parse(self) -> str:
        if self.tok.kind == "eof":
            raise self.error("no expression found in input")
        expr = self.expr(0)
        if self.tok.kind == ")":
            raise self.error("unexpected right parenthesis ')'")
        if self.tok.kind != "eof":
            raise self.unexpected()
        return expr.type

    def binary_op(self, level: int) -> str | None:
        tok = self.tok
        if tok.kind == "op" and tok.text in _LEVELS[level]:
            return tok.text
        if tok.kind == "ident" and tok.text.lower() in _LEVELS[level]:
            return tok.text.lower()
        return None

    def expr(self, level: int) -> _Expr:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.error(f"expression nested deeper than {MAX_DEPTH}")
        try:
            if level == len(_LEVELS):
                return self.unary()
            lhs = self.expr(level + 1)
            while (op := self.binary_op(level)) is not None:
                op_tok = self.take()
                modifiers = self.modifiers(op)
                # ``^`` binds right to left; the others left to right
                rhs = self.expr(level if level == _POW else level + 1)
                lhs = self.binary(op, op_tok, modifiers, lhs, rhs)
            return lhs
        finally:
            self.depth -= 1

    def modifiers(self, op: str) -> set[str]:
        found: set[str] = set()
        if self.is_word("bool"):
            if op not in _COMPARISONS:
                raise self.error("bool modifier can only be used on comparison operators")
            self.take()
            found.add("bool")
        if self.is_word("on", "ignoring"):
            found.add("matching")
            self.take()
            self.label_list()
            if self.is_word("group_left", "group_right"):
                if op in _SET_OPS:
                    raise self.error(f'no grouping allowed for "{op}" operation')
                found.add("group")
                self.take()
                if self.tok.kind == "(":
                    self.label_list()
        return found

    def label_list(self) -> None:
        self.expect("(", ' in grouping opts, expected "("')
        while self.tok.kind != ")":
            if self.tok.kind not in ("ident", "string"):
                raise self.unexpected(" in grouping opts, expected label")
            self.take()
            if self.tok.kind == ",":
                self.take()
            elif self.tok.kind != ")":
                raise self.unexpected(' in grouping opts, expected "," or ")"')
        self.take()

    def binary(self, op: str, tok: Token, modifiers: set[str], lhs: _Expr, rhs: _Expr) -> _Expr:
        for side in (lhs, rhs):
            if side.type not in (SCALAR, VECTOR):
                raise self.error(
                    "binary expression must contain only scalar and instant vector types", tok
                )
        both_scalar = lhs.type == SCALAR and rhs.type == SCALAR
        if op in _SET_OPS and (lhs.type == SCALAR or rhs.type == SCALAR):
            raise self.error(f'set operator "{op}" not allowed in binary scalar expression', tok)
        if both_scalar and op in _COMPARISONS and "bool" not in modifiers:
            raise self.error("comparisons between scalars must use BOOL modifier", tok)
        if "matching" in modifiers and (lhs.type != VECTOR or rhs.type != VECTOR):
            raise self.error("vector matching only allowed between instant vectors", tok)
        result = SCALAR if both_scalar else VECTOR
        return _Expr(result, lhs.pos)

    def unary(self) -> _Expr:
        tok = self.tok
        if tok.kind == "op" and tok.text in ("+", "-"):
            self.take()
            operand = self.expr(_POW)  # -1^2 is -(1^2)
            if operand.type not in (SCALAR, VECTOR):
                raise self.error(
                    "unary expression only allowed on expressions of type scalar or "
                    f'instant vector, got "{operand.type}"',
                    tok,
                )
            return _Expr(operand.type, tok.pos)
        return self.postfix(self.primary())

    def postfix(self, expr: _Expr) -> _Expr:
        while True:
            tok = self.tok
            if tok.kind == "[":
                expr = self.range_or_subquery(expr)
            elif self.is_word("offset"):
                expr = self.offset(expr)
            elif tok.kind == "op" and tok.text == "@":
                expr = self.at(expr)
            else:
                return expr

    def range_or_subquery(self, expr: _Expr) -> _Expr:
        open_tok = self.take()
        self.duration(" in range")
        if self.tok.kind == ":":
            self.take()
            if self.tok.kind != "]":
                self.duration(" in subquery step")
            self.expect("]", ' in subquery selector, expected "]"')
            if expr.type != VECTOR:
                raise self.error(
                    f"subquery is only allowed on instant vector, got {expr.type} instead",
                    open_tok,
                )
            return _Expr(MATRIX, expr.pos)
        self.expect("]", ' in range, expected ":" or "]"')
        if not expr.selector or expr.type != VECTOR or expr.modified:
            raise self.error(
                "ranges only allowed for vector selectors"
                if not expr.modified
                else "no offset modifiers allowed before range",
                open_tok,
            )
        return _Expr(MATRIX, expr.pos, selector=True)

    def duration(self, context: str) -> None:
        tok = self.tok
        if tok.kind == "op" and tok.text in ("+", "-"):  # a negative offset
            self.take()
        if self.tok.kind not in ("duration", "number"):
            raise self.unexpected(context + ", expected duration")
        self.take()

    def offset(self, expr: _Expr) -> _Expr:
        tok = self.take()
        self._modifiable(expr, "offset", tok)
        self.duration(" in offset")
        return _Expr(expr.type, expr.pos, expr.selector, expr.modified | {"offset"})

    def at(self, expr: _Expr) -> _Expr:
        tok = self.take()
        self._modifiable(expr, "@", tok)
        if self.is_word("start", "end") and self.peek().kind == "(":
            self.take()
            self.take()
            self.expect(")", ' in @ modifier, expected ")"')
        else:
            if self.tok.kind == "op" and self.tok.text in ("+", "-"):
                self.take()
            self.expect("number", " in @ modifier, expected timestamp")
        return _Expr(expr.type, expr.pos, expr.selector, expr.modified | {"@"})

    def _modifiable(self, expr: _Expr, what: str, tok: Token) -> None:
        if not expr.selector and expr.type != MATRIX:
            raise self.error(
                f"{what} modifier must be preceded by an instant vector selector or range "
                "vector selector or a subquery",
                tok,
            )
        if what in expr.modified:
            name = "offset" if what == "offset" else "@ timestamp"
            raise self.error(f"{name} may not be set multiple times", tok)

    def primary(self) -> _Expr:
        tok = self.tok
        if tok.kind == "number":
            self.take()
            return _Expr(SCALAR, tok.pos)
        if tok.kind == "string":
            self.take()
            return _Expr(STRING, tok.pos)
        if tok.kind == "duration":  # a duration where a number may stand (Prometheus 3)
            self.take()
            return _Expr(SCALAR, tok.pos)
        if tok.kind == "(":
            self.take()
            if self.tok.kind == "eof":
                raise self.error("unclosed left parenthesis")
            inner = self.expr(0)
            if self.tok.kind != ")":
                if self.tok.kind == "eof":
                    raise self.error("unclosed left parenthesis")
                raise self.unexpected(' in paren expression, expected ")"')
            self.take()
            return _Expr(inner.type, tok.pos)
        if tok.kind == "{":
            return self.selector(None)
        if tok.kind == "ident":
            name = tok.text
            lower = name.lower()
            if lower in ("inf", "nan"):
                self.take()
                return _Expr(SCALAR, tok.pos)
            nxt = self.peek()
            if lower in _AGGREGATIONS and (
                nxt.kind == "(" or (nxt.kind == "ident" and nxt.text.lower() in ("by", "without"))
            ):
                return self.aggregation(lower)
            if nxt.kind == "(":
                if lower in _KEYWORDS:
                    raise self.error(f"unexpected <{lower}>")
                return self.call(name)
            return self.selector(name)
        raise self.unexpected(" in expression")

    def selector(self, name: str | None) -> _Expr:
        start = self.tok
        if name is not None:
            self.take()
        matchers = 0
        has_name = name is not None
        if self.tok.kind == "{":
            self.take()
            while self.tok.kind != "}":
                label = self.tok
                if label.kind not in ("ident", "string"):
                    raise self.unexpected(" in label matching, expected label")
                self.take()
                if self.tok.kind in (",", "}") and label.kind == "string":
                    has_name = self._set_name(has_name, label)  # {"metric"} (Prometheus 3)
                    matchers += 1
                else:
                    op = self.tok
                    if op.kind != "op" or op.text not in ("=", "!=", "=~", "!~"):
                        raise self.unexpected(
                            " in label matching, expected label matching operator"
                        )
                    self.take()
                    value = self.expect("string", " in label matching, expected string")
                    text = _unquote(value.text)
                    if op.text in ("=~", "!~"):
                        _check_regex(text, value)
                    if label.text.strip("\"'`") == "__name__":
                        has_name = self._set_name(has_name, label)
                    if not _matches_empty(op.text, text):
                        matchers += 1
                if self.tok.kind == ",":
                    self.take()
                elif self.tok.kind != "}":
                    raise self.unexpected(' in label matching, expected "," or "}"')
            self.take()
        if name is None and matchers == 0:
            raise self.error("vector selector must contain at least one non-empty matcher", start)
        return _Expr(VECTOR, start.pos, selector=True)

    def _set_name(self, has_name: bool, tok: Token) -> bool:
        if has_name:
            raise self.error("metric name must not be set twice", tok)
        return True

    def aggregation(self, name: str) -> _Expr:
        start = self.take()
        grouped = False
        if self.is_word("by", "without"):
            self.take()
            self.label_list()
            grouped = True
        self.expect("(", f' in aggregation "{name}", expected "("')
        param = _AGGREGATIONS[name]
        if param is not None:
            got = self.expr(0)
            if got.type != param:
                raise self.error(
                    f"expected type {param} in aggregation parameter, got {got.type}", start
                )
            self.expect(",", f' in aggregation "{name}", expected ","')
        body = self.expr(0)
        if self.tok.kind == ",":
            raise self.error(
                "wrong number of arguments for aggregate expression provided, "
                f"expected {2 if param else 1}"
            )
        self.expect(")", f' in aggregation "{name}", expected ")"')
        if self.is_word("by", "without"):
            if grouped:
                raise self.unexpected(" after a grouping already given")
            self.take()
            self.label_list()
        if body.type != VECTOR:
            raise self.error(
                f"expected type instant vector in aggregation expression, got {body.type}", start
            )
        return _Expr(VECTOR, start.pos)

    def call(self, name: str) -> _Expr:
        start = self.take()
        spec = _FUNCTIONS.get(name)
        if spec is None:
            raise self.error(f'unknown function with name "{name}"', start)
        types, optional, variadic, result = spec
        self.take()  # "("
        args: list[_Expr] = []
        while self.tok.kind != ")":
            args.append(self.expr(0))
            if self.tok.kind == ",":
                self.take()
            elif self.tok.kind != ")":
                if self.tok.kind == "eof":
                    raise self.error("unclosed left parenthesis")
                raise self.unexpected(f' in call to function "{name}", expected "," or ")"')
        self.take()
        least, most = len(types) - optional, len(types)
        if len(args) < least or (len(args) > most and not variadic):
            want = str(most) if least == most else f"{least} to {most}"
            raise self.error(
                f'expected {want} argument(s) in call to "{name}", got {len(args)}', start
            )
        for k, arg in enumerate(args):
            want_type = types[min(k, len(types) - 1)]
            if arg.type != want_type:
                raise self.error(
                    f'expected type {want_type} in call to function "{name}", got {arg.type}',
                    start,
                )
        return _Expr(result, start.pos)


def _unquote(text: str) -> str:
    body = text[1:-1]
    if text[0] == "`":
        return body
    return re.sub(r"\\(.)", r"\1", body)


def _check_regex(pattern: str, tok: Token) -> None:
    try:
        re.compile(pattern)
    except re.error as e:
        raise PromQLError(f"invalid regular expression {pattern!r}: {e}", tok.pos + 1) from e


def _matches_empty(op: str, value: str) -> bool:
    """Whether the matcher also matches a missing label (``{a=""}`` selects everything)."""
    if op == "=":
        return value == ""
    if op == "!=":
        return value != ""
    matched = re.fullmatch(value, "") is not None
    return matched if op == "=~" else not matched


__all__ = ["MATRIX", "SCALAR", "STRING", "VECTOR", "PromQLError", "check", "tokenize"]
