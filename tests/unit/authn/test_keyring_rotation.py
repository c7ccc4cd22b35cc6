"""Key rotation: a changed JWKS or key file is re-read, old keys stay valid for the overlap."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ed25519
from jwt.algorithms import OKPAlgorithm

from mowdeck.authn import AuthenticationError, AuthSettings, TokenVerifier
from mowdeck.kit.settings import SettingsError
from tests.unit.authn.conftest import Keys, _pem_public

ACCOUNT = uuid.UUID("0000000b-0000-4000-8000-00000000000b")
OVERLAP = 600.0


class Clock:
    """Monotonic seconds the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _jwk(key: ed25519.Ed25519PrivateKey, kid: str) -> dict[str, Any]:
    jwk: dict[str, Any] = OKPAlgorithm.to_jwk(key.public_key(), as_dict=True)
    return {**jwk, "kid": kid, "alg": "EdDSA", "use": "sig"}


def _replace(path: Path, data: bytes) -> None:
    # Written beside and renamed over, as a deployment tool (or a ConfigMap) does.
    spare = path.with_suffix(".new")
    spare.write_bytes(data)
    spare.replace(path)


def _write_jwks(path: Path, **keys: ed25519.Ed25519PrivateKey) -> None:
    _replace(path, json.dumps({"keys": [_jwk(k, kid) for kid, k in keys.items()]}).encode())


def _token(key: ed25519.Ed25519PrivateKey, kid: str | None = None) -> str:
    claims = {"sub": "olga", "account_id": str(ACCOUNT), "exp": int(time.time()) + 3600}
    headers = {"kid": kid} if kid else None
    return jwt.encode(claims, key, algorithm="EdDSA", headers=headers)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def key_a() -> ed25519.Ed25519PrivateKey:
    return ed25519.Ed25519PrivateKey.generate()


@pytest.fixture
def key_b() -> ed25519.Ed25519PrivateKey:
    return ed25519.Ed25519PrivateKey.generate()


def _verifier(clock: Clock, **settings: Any) -> TokenVerifier:
    values: dict[str, Any] = {"jwt_key_check_seconds": 0, "jwt_key_overlap_seconds": OVERLAP}
    return TokenVerifier(AuthSettings(**(values | settings)), clock=clock)


def _accepts(verifier: TokenVerifier, token: str) -> bool:
    try:
        verifier.verify(token)
    except AuthenticationError:
        return False
    return True


def test_a_jwks_rotation_keeps_the_old_key_for_the_overlap_only(
    tmp_path: Path, clock: Clock, key_a: ed25519.Ed25519PrivateKey, key_b: ed25519.Ed25519PrivateKey
) -> None:
    jwks = tmp_path / "jwks.json"
    _write_jwks(jwks, a=key_a)
    verifier = _verifier(clock, jwt_jwks_file=str(jwks))
    old, new = _token(key_a, "a"), _token(key_b, "b")
    assert _accepts(verifier, old)
    assert not _accepts(verifier, new)

    _write_jwks(jwks, a=key_a, b=key_b)
    assert _accepts(verifier, old)
    assert _accepts(verifier, new)

    _write_jwks(jwks, b=key_b)
    assert _accepts(verifier, new), "the change is seen, the overlap starts"
    clock.now += OVERLAP - 1
    assert _accepts(verifier, old), "a key gone from the file verifies during the overlap"
    assert _accepts(verifier, new)

    clock.now += 2
    with pytest.raises(AuthenticationError) as refused:
        verifier.verify(old)
    assert refused.value.reason == "unknown-key"
    assert _accepts(verifier, new)


def test_a_key_that_comes_back_is_no_longer_on_its_way_out(
    tmp_path: Path, clock: Clock, key_a: ed25519.Ed25519PrivateKey, key_b: ed25519.Ed25519PrivateKey
) -> None:
    jwks = tmp_path / "jwks.json"
    _write_jwks(jwks, a=key_a)
    verifier = _verifier(clock, jwt_jwks_file=str(jwks))
    _write_jwks(jwks, b=key_b)
    assert _accepts(verifier, _token(key_a, "a"))
    _write_jwks(jwks, a=key_a, b=key_b)
    assert _accepts(verifier, _token(key_a, "a"))
    clock.now += OVERLAP * 2
    assert _accepts(verifier, _token(key_a, "a")), "a key in the file never expires"


@pytest.mark.parametrize(
    "broken",
    [b"{not json", b'{"keys": "no"}', None],
    ids=["not-json", "not-a-jwks", "file-removed"],
)
def test_a_broken_file_keeps_the_last_good_keys_and_logs(
    tmp_path: Path,
    clock: Clock,
    key_a: ed25519.Ed25519PrivateKey,
    broken: bytes | None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    jwks = tmp_path / "jwks.json"
    _write_jwks(jwks, a=key_a)
    verifier = _verifier(clock, jwt_jwks_file=str(jwks))
    if broken is None:
        jwks.unlink()
    else:
        _replace(jwks, broken)
    clock.now += OVERLAP * 2
    assert _accepts(verifier, _token(key_a, "a"))
    assert "jwt keys not reloaded" in capsys.readouterr().out


def test_the_first_load_still_refuses_a_broken_file(tmp_path: Path, clock: Clock) -> None:
    jwks = tmp_path / "jwks.json"
    jwks.write_bytes(b"{not json")
    with pytest.raises(SettingsError):
        _verifier(clock, jwt_jwks_file=str(jwks))


def test_a_replaced_key_file_is_read_again(
    tmp_path: Path, clock: Clock, keys: Keys, key_b: ed25519.Ed25519PrivateKey
) -> None:
    pem = tmp_path / "key.pub.pem"
    _replace(pem, keys.ed_public_file.read_bytes())
    verifier = _verifier(clock, jwt_key_file=str(pem))
    old, new = _token(keys.ed_private), _token(key_b)
    assert _accepts(verifier, old)
    _replace(pem, _pem_public(key_b))
    assert _accepts(verifier, new)
    assert _accepts(verifier, old)
    clock.now += OVERLAP + 1
    assert not _accepts(verifier, old)


def test_files_are_looked_at_no_more_often_than_configured(
    tmp_path: Path, clock: Clock, key_a: ed25519.Ed25519PrivateKey, key_b: ed25519.Ed25519PrivateKey
) -> None:
    jwks = tmp_path / "jwks.json"
    _write_jwks(jwks, a=key_a)
    verifier = _verifier(clock, jwt_jwks_file=str(jwks), jwt_key_check_seconds=5)
    _write_jwks(jwks, a=key_a, b=key_b)
    clock.now += 4
    assert not _accepts(verifier, _token(key_b, "b"))
    clock.now += 1
    assert _accepts(verifier, _token(key_b, "b"))
