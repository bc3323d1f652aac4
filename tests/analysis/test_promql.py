"""The PromQL checker against cases from Prometheus's own parser tests.

Inputs and expected messages are taken from ``promql/parser/parse_test.go`` of
prometheus/prometheus (the ``testExpr`` table), plus the queries SPEC section 4c and
docs/ROLLOUTS.md show, so a query our users copy from Prometheus's docs validates.
"""

from __future__ import annotations

import pytest

from reconciler.analysis.promql import MATRIX, SCALAR, STRING, VECTOR, PromQLError, check

VALID = {
    "1": SCALAR,
    "+Inf": SCALAR,
    "-Inf": SCALAR,
    ".5": SCALAR,
    "5.": SCALAR,
    "123.4567": SCALAR,
    "5e-3": SCALAR,
    "5e3": SCALAR,
    "0xc": SCALAR,
    "0755": SCALAR,
    "+5.5e-3": SCALAR,
    "-0755": SCALAR,
    "1 + 1": SCALAR,
    "1 % 1": SCALAR,
    "1 == bool 1": SCALAR,
    "1 <= bool 1": SCALAR,
    "-1^2": SCALAR,
    "-1^-2": SCALAR,
    "+1 + -2 * 1": SCALAR,
    "1 + 2/(3*1)": SCALAR,
    "1 < bool 2 - 1 * 2": SCALAR,
    "-some_metric": VECTOR,
    " +some_metric": VECTOR,
    ' +{"some_metric"}': VECTOR,
    'offset{step="1s"}[5m]': MATRIX,
    'step{offset="1s"}[5m]': MATRIX,
    'anchored{job="test"}': VECTOR,
    "foo * bar": VECTOR,
    "foo * sum": VECTOR,
    "foo == 1": VECTOR,
    "foo == bool 1": VECTOR,
    "2.5 / bar": VECTOR,
    "foo and bar": VECTOR,
    "foo + bar or bla and blub": VECTOR,
    "foo and bar unless baz or qux": VECTOR,
    "bar + on(foo) bla / on(baz, buz) group_right(test) blub": VECTOR,
    "foo * on(test,blub) bar": VECTOR,
    "foo * on(test,blub) group_left bar": VECTOR,
    "foo and on(test,blub) bar": VECTOR,
    "foo and on() bar": VECTOR,
    "foo and ignoring(test,blub) bar": VECTOR,
    "foo unless on(bar) baz": VECTOR,
    "foo offset 5m": VECTOR,
    "foo offset -7m": VECTOR,
    "foo @ 1603774568": VECTOR,
    "foo @ start()": VECTOR,
    'foo{a="b", c!="d", e=~"f.*", g!~"h",}': VECTOR,
    "test[5y]": MATRIX,
    "test[1h30m] offset 1w": MATRIX,
    "sum by (foo) (some_metric)": VECTOR,
    "avg by (foo)(some_metric)": VECTOR,
    "sum without (foo) (some_metric)": VECTOR,
    "sum (some_metric) without (foo)": VECTOR,
    "stddev(some_metric)": VECTOR,
    "topk(5, some_metric)": VECTOR,
    'count_values("value", some_metric)': VECTOR,
    "quantile(0.9, some_metric) by (le)": VECTOR,
    "time()": SCALAR,
    'floor(some_metric{foo!="bar"})': VECTOR,
    "rate(some_metric[5m])": VECTOR,
    "round(some_metric)": VECTOR,
    "round(some_metric, 5)": VECTOR,
    "scalar(sum(foo))": SCALAR,
    'label_join(foo, "dst", ",", "a", "b", "c")': VECTOR,
    'label_replace(up, "a", "$1", "b", "(.*)")': VECTOR,
    "min_over_time(rate(foo[5m])[30m:1m])": VECTOR,
    "rate(foo[5m])[10m:]": MATRIX,
    "foo[10m:1m] offset 5m": MATRIX,
    "histogram_quantile(0.99, sum by (le) (rate(req_bucket[5m])))": VECTOR,
    "# a comment\nfoo": VECTOR,
    '"a string"': STRING,
    "`raw \\d`": STRING,
    (
        'sum(rate(http_requests_total{namespace="web",code=~"5.."}[2m]))'
        ' / sum(rate(http_requests_total{namespace="web"}[2m]))'
    ): VECTOR,
}

INVALID = {
    "": "no expression found in input",
    "# just a comment\n\n": "no expression found in input",
    "1+": "unexpected end of input",
    ".": "unexpected character: '.'",
    "2.5.": 'bad number or duration syntax: "2.5."',
    "100..4": 'bad number or duration syntax: "100..4"',
    "0deadbeef": 'bad number or duration syntax: "0deadbeef"',
    "1 /": "unexpected end of input",
    "*1": "unexpected <op:*>",
    "(1))": "unexpected right parenthesis ')'",
    "((1)": "unclosed left parenthesis",
    "(": "unclosed left parenthesis",
    "1 and 1": 'set operator "and" not allowed in binary scalar expression',
    "1 == 1": "comparisons between scalars must use BOOL modifier",
    "1 or 1": 'set operator "or" not allowed in binary scalar expression',
    "1 unless 1": 'set operator "unless" not allowed in binary scalar expression',
    "1 !~ 1": "unexpected <op:!~>",
    "1 =~ 1": "unexpected <op:=~>",
    '-"string"': "unary expression only allowed on expressions of type scalar or instant "
    'vector, got "string"',
    "-test[5m]": "unary expression only allowed on expressions of type scalar or instant "
    'vector, got "range vector"',
    "*test": "unexpected <op:*>",
    "@@": "unexpected <op:@>",
    "1 offset 1d": "offset modifier must be preceded by an instant vector selector",
    "foo offset 1s offset 2s": "offset may not be set multiple times",
    "a - on(b) ignoring(c) d": "unexpected <ignoring>",
    "{}": "vector selector must contain at least one non-empty matcher",
    '{x=""}': "vector selector must contain at least one non-empty matcher",
    'foo{__name__="bar"}': "metric name must not be set twice",
    "foo{": "unexpected end of input",
    'foo{a~"b"}': "unexpected character: '~'",
    'foo{a=~"("}': "invalid regular expression",
    "foo[5m][5m]": "ranges only allowed for vector selectors",
    "sum(foo[5m])": "expected type instant vector in aggregation expression, got range vector",
    "topk(some_metric)": "expected type scalar in aggregation parameter",
    "sum by foo (bar)": "in grouping opts",
    "rate(some_metric)": 'expected type range vector in call to function "rate"',
    "non_existent_function_far_bar()": 'unknown function with name "non_existent_function_far_bar"',
    "floor()": 'expected 1 argument(s) in call to "floor", got 0',
    "floor(some_metric, other_metric)": 'expected 1 argument(s) in call to "floor", got 2',
    "foo and bool bar": "bool modifier can only be used on comparison operators",
    "foo + on(a) group_left 1": "vector matching only allowed between instant vectors",
    "foo and group_left bar": "unexpected",
    "foo and on(a) group_left bar": 'no grouping allowed for "and" operation',
    "rate(foo[5m]) [5m:1m] offset": "unexpected end of input",
    'foo{a="unterminated}': "unterminated quoted string",
    "foo bar": 'unexpected "bar"',
    "1 + foo[5m]": "binary expression must contain only scalar and instant vector types",
}


@pytest.mark.parametrize(("query", "kind"), list(VALID.items()))
def test_valid_queries_parse_to_their_type(query: str, kind: str) -> None:
    assert check(query) == kind


@pytest.mark.parametrize(("query", "message"), list(INVALID.items()))
def test_invalid_queries_name_the_error(query: str, message: str) -> None:
    with pytest.raises(PromQLError) as caught:
        check(query)
    assert message in str(caught.value)


def test_the_column_points_at_the_fault() -> None:
    with pytest.raises(PromQLError) as caught:
        check("sum(rate(x[5m])) / bogus_fn(y)")
    assert caught.value.column == 20
    assert str(caught.value).endswith("(column 20)")


def test_nesting_is_bounded() -> None:
    with pytest.raises(PromQLError, match="nested deeper"):
        check("(" * 500 + "1" + ")" * 500)
