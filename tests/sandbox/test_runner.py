"""The kubeconfig a sandbox writes: the config the official client and kubectl read."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from kubernetes import client, config

from reconciler.sandbox.runner import kubeconfig_text, write_kubeconfig
from reconciler.sandbox.testing import SandboxHandle
from tests.sandbox.workloads import client_of


def _expected(url: str, namespace: str) -> dict[str, object]:
    """The config as https://kubernetes.io/docs/concepts/configuration/organize-cluster-access-kubeconfig/
    lays it out: one cluster, one user, one context that is the current one."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "sandbox", "cluster": {"server": url}}],
        "users": [{"name": "sandbox", "user": {"token": "sandbox"}}],
        "contexts": [
            {
                "name": "sandbox",
                "context": {"cluster": "sandbox", "user": "sandbox", "namespace": namespace},
            }
        ],
        "current-context": "sandbox",
        "preferences": {},
    }


@pytest.mark.parametrize(
    ("url", "namespace"),
    [
        ("http://127.0.0.1:6443", "default"),
        ("http://[::1]:8080", "team-a"),
        # what YAML would read as something else unquoted: a comment, a mapping, a number,
        # a boolean, escapes and characters beyond ASCII
        ("http://h:1/#x", "a: b"),
        ("http://h:1", "123"),
        ("http://h:1", "true"),
        ('http://h:1/"q"\\', "näme\ttab"),
    ],
)
def test_the_kubeconfig_text_is_the_config_it_names(url: str, namespace: str) -> None:
    assert yaml.safe_load(kubeconfig_text(url, namespace)) == _expected(url, namespace)


def test_the_official_client_reads_the_written_kubeconfig(tmp_path: Path) -> None:
    path = write_kubeconfig(tmp_path / "deep" / "kubeconfig", "http://127.0.0.1:6443")
    assert yaml.safe_load(path.read_text()) == _expected("http://127.0.0.1:6443", "default")
    contexts, active = config.list_kube_config_contexts(str(path))
    assert [c["name"] for c in contexts] == ["sandbox"]
    assert active["context"]["namespace"] == "default"
    api = config.new_client_from_config(str(path))
    try:
        assert api.configuration.host == "http://127.0.0.1:6443"
        assert api.configuration.auth_settings()["BearerToken"]["value"] == "Bearer sandbox"
    finally:
        api.close()


def test_the_tests_client_is_the_one_the_kubeconfig_configures(sandbox: SandboxHandle) -> None:
    """``client_of`` (the sandbox tests' client) connects as the kubeconfig says."""
    from_file = config.new_client_from_config(str(sandbox.kubeconfig))
    direct = client_of(sandbox)
    try:
        for api in (from_file, direct):
            assert api.configuration.host == sandbox.url
            assert api.configuration.auth_settings()["BearerToken"]["value"] == "Bearer sandbox"
            assert client.CoreV1Api(api).read_namespace("default").metadata.name == "default"
    finally:
        from_file.close()
        direct.close()
