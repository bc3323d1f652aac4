"""Opt-in commit signature verification against an allowed set of GPG and SSH keys.

Like Flux's ``spec.verify``: when enabled, the catalog source only moves to a
head commit signed by one of the allowed keys; anything else is refused with a
reason and the last verified commit stays in force (``CatalogSource.sync``).
Keys are public-key files: ASCII-armored GPG keys, or SSH public keys (one per
line, ``ssh-ed25519 AAAA... comment``, or ``allowed_signers`` lines). They are
turned into a private GnuPG home and an ``allowed_signers`` file in a private
temporary directory, so the user's own keyring and Git config play no part.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import git

from reconciler.model.errors import SourceError, UsageError
from reconciler.source.runner import run

_SSH_KEY_TYPES = ("ssh-", "ecdsa-", "sk-ssh-", "sk-ecdsa-")
_GPG = ("gpg", "--batch", "--quiet", "--no-autostart")
_PGP_ARMOR = "-----BEGIN PGP PUBLIC KEY BLOCK-----"


class SignatureRefused(SourceError):
    """The head commit is unsigned or not signed by an allowed key."""

    reason = "VerificationFailed"


@dataclass(frozen=True)
class Verdict:
    """The outcome of verifying one commit; ``reason`` is a sentence for people."""

    commit: str
    ok: bool
    reason: str
    signer: str = ""


@dataclass(frozen=True)
class SignaturePolicy:
    """The allowed keys, as file contents (read once, so later file edits need a restart)."""

    gpg_keys: tuple[str, ...] = ()
    ssh_signers: tuple[str, ...] = ()

    @classmethod
    def from_files(cls, paths: Iterable[str | Path]) -> SignaturePolicy:
        gpg: list[str] = []
        ssh: list[str] = []
        for raw in paths:
            path = Path(raw)
            try:
                text = path.read_text(encoding="utf-8")
            except OSError as e:
                raise UsageError(f"{path}: cannot read key file ({e.strerror})") from e
            if _PGP_ARMOR in text:
                gpg.append(text)
                continue
            lines = [ln.strip() for ln in text.splitlines() if ln.strip() and ln[0] != "#"]
            if not lines:
                raise UsageError(f"{path}: no GPG or SSH public key in this file")
            ssh.extend(_allowed_signer(line, f"{path}:{i}") for i, line in enumerate(lines, 1))
        if not gpg and not ssh:
            raise UsageError("--verify-signatures needs at least one key file")
        return cls(tuple(gpg), tuple(ssh))

    @property
    def fingerprint(self) -> str:
        data = "\0".join((*self.gpg_keys, "--", *self.ssh_signers))
        return hashlib.sha256(data.encode("utf-8")).hexdigest()[:16]


def _allowed_signer(line: str, where: str) -> str:
    fields = line.split()
    if fields[0].startswith(_SSH_KEY_TYPES):
        if len(fields) < 2:
            raise UsageError(f"{where}: SSH public key without key data")
        return f'allowed@reconciler namespaces="git" {fields[0]} {fields[1]}'
    if len(fields) >= 3:
        return line  # already an allowed_signers line: principals [options] keytype key
    raise UsageError(f"{where}: not an SSH public key or allowed_signers line")


class SignatureVerifier:
    """Verifies commits of a repository against a ``SignaturePolicy``."""

    def __init__(self, policy: SignaturePolicy) -> None:
        self._policy = policy
        # A private temp dir rather than the cache dir: gpg needs a short home path
        # (its agent socket path is limited to ~100 bytes) and the keyring is derived data.
        self._home = Path(tempfile.mkdtemp(prefix="reconciler-trust-"))
        atexit.register(shutil.rmtree, self._home, True)
        self._gnupg = self._home / "gnupg"
        self._signers = self._home / "allowed_signers"
        self._prepared = False

    def verify(self, repo: git.Repo, commit: str) -> Verdict:
        """Check ``commit``'s signature; a bad signature is a ``Verdict``, not an exception."""
        self._prepare()
        output = run(
            repo,
            [
                "-c",
                f"gpg.ssh.allowedSignersFile={self._signers}",
                "log",
                "-1",
                "--format=%G?%x1f%GK%x1f%GF",
                commit,
            ],
            env={"GNUPGHOME": str(self._gnupg)},
            timeout=60,
            what=f"verify {commit[:12]}",
        )
        code, key, fingerprint = ([*output.strip().split("\x1f"), "", ""])[:3]
        return _verdict(commit, code, key, fingerprint)

    def _prepare(self) -> None:
        if self._prepared:
            return
        self._gnupg.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(self._gnupg, 0o700)
        self._signers.write_text("".join(f"{s}\n" for s in self._policy.ssh_signers))
        for key in self._policy.gpg_keys:
            self._import_gpg(key)
        self._prepared = True

    def _import_gpg(self, armored: str) -> None:
        try:
            # --no-autostart: importing public keys needs no agent, and none is left running
            proc = subprocess.run(
                [*_GPG, "--homedir", str(self._gnupg), "--import"],
                input=armored.encode("utf-8"),
                capture_output=True,
                timeout=60,
                check=False,
            )
        except FileNotFoundError as e:
            raise SourceError("gpg is not installed; it is needed to verify GPG keys") from e
        if proc.returncode != 0:
            detail = proc.stderr.decode("utf-8", "replace").strip().splitlines()[-1:]
            raise UsageError(f"cannot import GPG key: {'; '.join(detail) or 'gpg failed'}")


def _verdict(commit: str, code: str, key: str, fingerprint: str) -> Verdict:
    """Read ``%G?``: for GPG, U (good, untrusted) is fine because only allowed keys are
    in the private keyring; for SSH, U means no allowed principal has this key."""
    short = commit[:12]
    ssh = key.startswith("SHA256:")
    kind = "SSH" if ssh else "GPG"
    if code == "G" or (code == "U" and not ssh):
        return Verdict(commit, True, "signature verified", f"{kind.lower()}:{fingerprint or key}")
    if code == "N":
        return Verdict(commit, False, f"commit {short} is not signed")
    if code in ("U", "E"):
        return Verdict(
            commit,
            False,
            f"commit {short} is signed with {kind} key {key}, which is not in the allowed keys",
        )
    if code == "B":
        return Verdict(commit, False, f"commit {short} has a bad {kind} signature")
    if code in ("X", "Y", "R"):
        return Verdict(
            commit, False, f"commit {short} is signed with an expired or revoked {kind} key {key}"
        )
    return Verdict(commit, False, f"commit {short}: signature not verified ({code or '?'})")
