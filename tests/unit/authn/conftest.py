"""Keys on disk for the authentication tests."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519

SECRET = "dev-secret-with-at-least-32-bytes!!"


@dataclass(frozen=True)
class Keys:
    """An Ed25519 pair, a P-256 pair and a stranger's Ed25519 key, as objects and files."""

    ed_private: ed25519.Ed25519PrivateKey
    ec_private: ec.EllipticCurvePrivateKey
    stranger: ed25519.Ed25519PrivateKey
    ed_private_file: Path
    ed_public_file: Path
    ec_public_file: Path
    ec_private_file: Path


def _pem_private(key: ed25519.Ed25519PrivateKey | ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _pem_public(key: ed25519.Ed25519PrivateKey | ec.EllipticCurvePrivateKey) -> bytes:
    return key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


@pytest.fixture(scope="session")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Keys:
    """Fresh keys for the session."""
    root = tmp_path_factory.mktemp("keys")
    ed, ecp = ed25519.Ed25519PrivateKey.generate(), ec.generate_private_key(ec.SECP256R1())
    files = {
        "ed_private_file": (root / "ed.pem", _pem_private(ed)),
        "ed_public_file": (root / "ed.pub.pem", _pem_public(ed)),
        "ec_private_file": (root / "ec.pem", _pem_private(ecp)),
        "ec_public_file": (root / "ec.pub.pem", _pem_public(ecp)),
    }
    for path, data in files.values():
        path.write_bytes(data)
    return Keys(
        ed_private=ed,
        ec_private=ecp,
        stranger=ed25519.Ed25519PrivateKey.generate(),
        **{name: path for name, (path, _) in files.items()},
    )
