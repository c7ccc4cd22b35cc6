"""Auth settings: read from the environment, and refused when unusable."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from mowdeck.authn import AuthSettings, TokenIssuer, TokenVerifier, load_auth_settings
from mowdeck.kit.settings import SettingsError
from tests.unit.authn.conftest import SECRET, Keys


def test_reads_the_environment(keys: Keys) -> None:
    settings = load_auth_settings(
        {
            "MOWDECK_JWT_ALGORITHMS": '["EdDSA"]',
            "MOWDECK_JWT_KEY_FILE": str(keys.ed_public_file),
            "MOWDECK_JWT_ISSUER": "iss",
            "MOWDECK_JWT_AUDIENCE": "aud",
            "MOWDECK_JWT_LEEWAY_SECONDS": "5",
        }
    )
    assert settings == AuthSettings(
        jwt_algorithms=("EdDSA",),
        jwt_key_file=str(keys.ed_public_file),
        jwt_issuer="iss",
        jwt_audience="aud",
        jwt_leeway_seconds=5.0,
    )
    assert TokenVerifier(settings).algorithms == ("EdDSA",)


@pytest.mark.parametrize(
    ("settings", "algorithms"),
    [
        (lambda _k: AuthSettings(jwt_secret=SECRET), ("HS256",)),
        (lambda k: AuthSettings(jwt_key_file=str(k.ed_public_file)), ("EdDSA",)),
        (lambda k: AuthSettings(jwt_key_file=str(k.ec_public_file)), ("ES256",)),
        (
            lambda k: AuthSettings(jwt_key_file=str(k.ed_public_file), jwt_secret=SECRET),
            ("EdDSA", "HS256"),
        ),
    ],
    ids=["secret-means-hs256", "ed25519-means-eddsa", "p256-means-es256", "both"],
)
def test_default_algorithms_follow_the_keys(
    keys: Keys, settings: Callable[[Keys], AuthSettings], algorithms: tuple[str, ...]
) -> None:
    assert TokenVerifier(settings(keys)).algorithms == algorithms


def _rsa_file(tmp_path: Path) -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    path = tmp_path / "rsa.pub.pem"
    path.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return str(path)


REFUSED: list[tuple[str, Callable[[Keys, Path], AuthSettings], str]] = [
    ("nothing-configured", lambda _k, _p: AuthSettings(), "no JWT key"),
    ("short-secret", lambda _k, _p: AuthSettings(jwt_secret="short"), "32 bytes"),
    ("alg-none", lambda _k, _p: AuthSettings(jwt_secret=SECRET, jwt_algorithms=("none",)), "none"),
    ("rs256", lambda _k, _p: AuthSettings(jwt_secret=SECRET, jwt_algorithms=("RS256",)), "RS256"),
    (
        "hs256-without-secret",
        lambda k, _p: AuthSettings(jwt_key_file=str(k.ed_public_file), jwt_algorithms=("HS256",)),
        "no key configured for HS256",
    ),
    ("rsa-key", lambda _k, p: AuthSettings(jwt_key_file=_rsa_file(p)), "Ed25519"),
    ("missing-file", lambda _k, p: AuthSettings(jwt_key_file=str(p / "nope.pem")), "cannot read"),
    (
        "private-key-as-public",
        lambda k, _p: AuthSettings(jwt_key_file=str(k.ed_private_file)),
        "not a PEM public key",
    ),
]


@pytest.mark.parametrize("make", [r[1] for r in REFUSED], ids=[r[0] for r in REFUSED])
def test_unusable_settings_are_refused(
    keys: Keys, tmp_path: Path, make: Callable[[Keys, Path], AuthSettings]
) -> None:
    expected = next(r[2] for r in REFUSED if r[1] is make)
    with pytest.raises(SettingsError, match=expected):
        TokenVerifier(make(keys, tmp_path))


def test_minting_needs_a_private_key_or_secret(keys: Keys) -> None:
    with pytest.raises(SettingsError, match="no signing key"):
        TokenIssuer(AuthSettings(jwt_key_file=str(keys.ed_public_file)))
