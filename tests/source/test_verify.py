"""Signature verification: signed heads are taken, others refused, the last good one kept."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler.model.errors import UsageError
from reconciler.source.checkout import CatalogSource
from reconciler.source.verify import SignaturePolicy, SignatureRefused
from tests.source.servers import git

GPG = ("gpg", "--batch", "--passphrase", "")
SIGNER = "Catalog Signer <signer@example.com>"


def _ssh_key(directory: Path, name: str) -> Path:
    key = directory / name
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(key)], check=True
    )
    return key


def _signed_commit(repo: Path, rel: str, *sign_args: str) -> str:
    (repo / rel).write_text(rel + "\n")
    git(repo, "add", rel)
    git(repo, *sign_args, "commit", "-q", "-S", "-m", f"signed {rel}")
    return git(repo, "rev-parse", "HEAD")


def _ssh_sign(key: Path) -> tuple[str, ...]:
    return ("-c", "gpg.format=ssh", "-c", f"user.signingkey={key}.pub")


@pytest.fixture
def gpg_home() -> Iterator[Path]:
    """A GnuPG home with one signing key; short path because gpg-agent sockets need one."""
    home = Path(tempfile.mkdtemp(prefix="gpg"))
    home.chmod(0o700)
    subprocess.run(
        [
            "gpg",
            "--batch",
            "--homedir",
            str(home),
            "--passphrase",
            "",
            "--quick-gen-key",
            "Catalog Signer <signer@example.com>",
            "ed25519",
            "sign",
            "never",
        ],
        check=True,
        capture_output=True,
    )
    yield home
    subprocess.run(["gpgconf", "--homedir", str(home), "--kill", "all"], check=False)
    shutil.rmtree(home, ignore_errors=True)


def _export(home: Path, target: Path) -> Path:
    out = subprocess.run(
        ["gpg", "--batch", "--homedir", str(home), "--armor", "--export"],
        check=True,
        capture_output=True,
    )
    target.write_bytes(out.stdout)
    return target


def test_ssh_signed_head_is_taken_and_unsigned_head_refused(
    catalog_repo: Path, tmp_path: Path
) -> None:
    key = _ssh_key(tmp_path, "release")
    signed = _signed_commit(catalog_repo, "a.txt", *_ssh_sign(key))
    source = CatalogSource(str(catalog_repo), verify=SignaturePolicy.from_files([f"{key}.pub"]))
    good = source.sync()
    assert good.commit == signed and good.refused is None and good.signer.startswith("ssh:")

    unsigned = commit_unsigned(catalog_repo)
    refused = source.sync()
    assert refused.commit == signed and refused.remote_commit == unsigned
    assert refused.refused == f"commit {unsigned[:12]} is not signed"
    assert not refused.changed
    assert not (refused.path / "b.txt").exists()


def commit_unsigned(repo: Path) -> str:
    (repo / "b.txt").write_text("b\n")
    git(repo, "add", "b.txt")
    git(repo, "commit", "-q", "-m", "unsigned")
    return git(repo, "rev-parse", "HEAD")


def test_ssh_key_not_in_the_allowed_set_is_refused(catalog_repo: Path, tmp_path: Path) -> None:
    allowed = _ssh_key(tmp_path, "allowed")
    stranger = _ssh_key(tmp_path, "stranger")
    first = _signed_commit(catalog_repo, "a.txt", *_ssh_sign(allowed))
    source = CatalogSource(str(catalog_repo), verify=SignaturePolicy.from_files([f"{allowed}.pub"]))
    assert source.sync().commit == first
    bad = _signed_commit(catalog_repo, "b.txt", *_ssh_sign(stranger))
    result = source.sync()
    assert result.commit == first
    assert result.refused is not None
    assert f"commit {bad[:12]} is signed with SSH key SHA256:" in result.refused
    assert "not in the allowed keys" in result.refused


def test_first_head_refused_means_no_catalog(catalog_repo: Path, tmp_path: Path) -> None:
    key = _ssh_key(tmp_path, "release")
    source = CatalogSource(str(catalog_repo), verify=SignaturePolicy.from_files([f"{key}.pub"]))
    with pytest.raises(SignatureRefused, match="is not signed; no verified commit"):
        source.sync()
    # the clone wrote none of the refused commit's files (its checkout waits for the check)
    assert [p.name for p in source.path.iterdir()] == [".git"]


def test_last_verified_commit_survives_a_restart(catalog_repo: Path, tmp_path: Path) -> None:
    key = _ssh_key(tmp_path, "release")
    policy = SignaturePolicy.from_files([f"{key}.pub"])
    signed = _signed_commit(catalog_repo, "a.txt", *_ssh_sign(key))
    CatalogSource(str(catalog_repo), verify=policy).sync()
    commit_unsigned(catalog_repo)
    restarted = CatalogSource(str(catalog_repo), verify=policy).sync()
    assert restarted.commit == signed and restarted.refused


def test_gpg_signed_head_verified_and_unknown_gpg_key_refused(
    catalog_repo: Path, tmp_path: Path, gpg_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sign = ("-c", "user.signingkey=signer@example.com", "-c", "gpg.program=gpg")
    monkeypatch.setenv("GNUPGHOME", str(gpg_home))
    signed = _signed_commit(catalog_repo, "a.txt", *sign)
    monkeypatch.delenv("GNUPGHOME")
    allowed = SignaturePolicy.from_files([_export(gpg_home, tmp_path / "signer.asc")])
    good = CatalogSource(str(catalog_repo), verify=allowed).sync()
    assert good.commit == signed and good.signer.startswith("gpg:")

    other = _ssh_key(tmp_path, "other")  # a policy that knows no GPG key at all
    result_source = CatalogSource(
        str(catalog_repo), verify=SignaturePolicy.from_files([f"{other}.pub"])
    )
    with pytest.raises(SignatureRefused, match=r"signed with GPG key .* not in the allowed keys"):
        result_source.sync()


def test_key_files_are_checked(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cannot read key file"):
        SignaturePolicy.from_files([tmp_path / "missing.pub"])
    empty = tmp_path / "empty.pub"
    empty.write_text("# nothing here\n")
    with pytest.raises(UsageError, match="no GPG or SSH public key"):
        SignaturePolicy.from_files([empty])
    junk = tmp_path / "junk.pub"
    junk.write_text("hello\n")
    with pytest.raises(UsageError, match="not an SSH public key"):
        SignaturePolicy.from_files([junk])
    with pytest.raises(UsageError, match="at least one key"):
        SignaturePolicy.from_files([])
    signers = tmp_path / "allowed_signers"
    signers.write_text('dev@example.com namespaces="git" ssh-ed25519 AAAAC3Nza\n')
    assert SignaturePolicy.from_files([signers]).ssh_signers[0].startswith("dev@example.com")
