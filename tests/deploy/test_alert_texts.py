"""The alerts' texts as Prometheus renders them (``promtool test rules``), and the
series that must exist from start-up so a fresh Grafana shows 0, not "No data".
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from reconciler.daemon.metrics import RETRY_CODES, RETRY_VERBS, DaemonMetrics
from tests.conftest import REPO_ROOT
from tests.daemon.test_metrics import samples

RULE = REPO_ROOT / "deploy" / "monitoring" / "prometheusrule.yaml"
PROMTOOL = shutil.which("promtool")
INFO = "reconciler_instance_info"


def _stalled_series(desired: str) -> str:
    return (
        f'{INFO}{{cluster="prod",instance="web",app="podinfo",version="6.5.0",'
        f'desired="{desired}",phase="Stalled",reason="CatalogInvalid"}}'
    )


def _expected(desired: str) -> str:
    middle = f" (desired {desired})" if desired else ""
    return (
        f"podinfo 6.5.0{middle} has been Stalled for 15 minutes. In a clone of the catalog, "
        "`reconciler status --repo . --cluster prod` and the Events of its inventory "
        "ConfigMap say why."
    )


@pytest.mark.skipif(PROMTOOL is None, reason="promtool is not installed")
@pytest.mark.parametrize("desired", ["", "6.6.0"], ids=["no-desired", "desired"])
def test_stalled_alert_text_as_prometheus_renders_it(tmp_path: Path, desired: str) -> None:
    spec = yaml.safe_load(RULE.read_text())["spec"]
    rules = tmp_path / "rules.yaml"
    rules.write_text(yaml.safe_dump(spec))
    labels = {
        "alertname": "ReconcilerInstanceStalled",
        "severity": "warning",
        "cluster": "prod",
        "instance": "web",
        "app": "podinfo",
        "version": "6.5.0",
        "desired": desired,
        "phase": "Stalled",
        "reason": "CatalogInvalid",
    }
    if not desired:
        del labels["desired"]  # an empty label is no label in Prometheus
    test = {
        "rule_files": [str(rules)],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [{"series": _stalled_series(desired), "values": "1x30"}],
                "alert_rule_test": [
                    {
                        "eval_time": "20m",
                        "alertname": "ReconcilerInstanceStalled",
                        "exp_alerts": [
                            {
                                "exp_labels": labels,
                                "exp_annotations": {
                                    "summary": "prod/web is Stalled (CatalogInvalid)",
                                    "description": _expected(desired),
                                },
                            }
                        ],
                    }
                ],
            }
        ],
    }
    test_file = tmp_path / "test.yaml"
    test_file.write_text(yaml.safe_dump(test))
    assert PROMTOOL is not None
    done = subprocess.run(
        [PROMTOOL, "test", "rules", str(test_file)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_runbook_hint_names_the_repository() -> None:
    text = RULE.read_text()
    descriptions = [
        rule["annotations"]["description"]
        for group in yaml.safe_load(text)["spec"]["groups"]
        for rule in group["rules"]
    ]
    commands = [d for d in descriptions if "`reconciler" in d]
    assert commands and all("--repo ." in d for d in commands), commands


def test_rollout_and_retry_series_start_at_zero() -> None:
    metrics = DaemonMetrics()
    metrics.start("prod")
    got = samples(metrics)
    for result in ("rolloutSucceed", "rolloutFailed", "rolledBack", "rolloutAbandoned"):
        key = ("reconciler_rollouts_total", (("cluster", "prod"), ("result", result)))
        assert got[key] == 0, result
    assert got[("reconciler_rollout_batch_duration_seconds_count", (("cluster", "prod"),))] == 0
    for verb in RETRY_VERBS:
        for code in RETRY_CODES:
            key = ("reconciler_api_retries_total", (("code", code), ("verb", verb)))
            assert got[key] == 0, key
