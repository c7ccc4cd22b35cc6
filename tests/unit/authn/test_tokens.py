"""Token verification: every way a token can fail, and the ways it succeeds."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
import uuid
from collections.abc import Callable
from typing import Any

import jwt
import pytest

from mowdeck.authn import AuthenticationError, AuthSettings, Principal, TokenIssuer, TokenVerifier
from tests.unit.authn.conftest import SECRET, Keys

ACCOUNT = uuid.UUID("0000000a-0000-4000-8000-00000000000a")
ISSUER, AUDIENCE = "https://id.mowdeck.test", "mowdeck"


def claims(**changes: Any) -> dict[str, Any]:
    """Valid claims, changed; a value of None removes the claim."""
    now = int(time.time())
    base: dict[str, Any] = {
        "sub": "olga",
        "account_id": str(ACCOUNT),
        "iat": now,
        "exp": now + 600,
        "iss": ISSUER,
        "aud": AUDIENCE,
    }
    base.update(changes)
    return {k: v for k, v in base.items() if v is not None}


def b64(data: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


def ed_settings(keys: Keys, **extra: Any) -> AuthSettings:
    return AuthSettings(
        jwt_key_file=str(keys.ed_public_file), jwt_issuer=ISSUER, jwt_audience=AUDIENCE, **extra
    )


def signed(keys: Keys, **changes: Any) -> str:
    return jwt.encode(claims(**changes), keys.ed_private, algorithm="EdDSA")


def _confused(keys: Keys) -> str:
    """The classic attack: HS256 keyed with the verifier's public key (signed by hand)."""
    signing_input = f"{b64({'alg': 'HS256', 'typ': 'JWT'})}.{b64(claims())}"
    mac = hmac.new(keys.ed_public_file.read_bytes(), signing_input.encode(), hashlib.sha256)
    return f"{signing_input}.{base64.urlsafe_b64encode(mac.digest()).rstrip(b'=').decode()}"


def _tampered(keys: Keys) -> str:
    header, _, signature = signed(keys).split(".")
    return ".".join([header, b64(claims(sub="admin")), signature])


Make = Callable[[Keys], str]
FAILURES: list[tuple[str, Make, str]] = [
    ("empty", lambda _k: "", "missing"),
    ("garbage", lambda _k: "not-a-jwt", "malformed"),
    ("two-segments", lambda _k: "abc.def", "malformed"),
    ("bad-base64-header", lambda _k: "!!!." + b64(claims()) + ".sig", "malformed"),
    ("header-not-json", lambda _k: "bm90anNvbg." + b64(claims()) + ".sig", "malformed"),
    ("alg-none", lambda _k: jwt.encode(claims(), "", algorithm="none"), "algorithm"),
    ("alg-none-handmade", lambda _k: f"{b64({'alg': 'none'})}.{b64(claims())}.", "algorithm"),
    ("alg-None-casing", lambda _k: f"{b64({'alg': 'None'})}.{b64(claims())}.", "algorithm"),
    ("alg-missing", lambda _k: f"{b64({'typ': 'JWT'})}.{b64(claims())}.c2ln", "algorithm"),
    ("hs256-not-configured", lambda _k: jwt.encode(claims(), SECRET, "HS256"), "algorithm"),
    ("hs256-with-public-key-as-secret", _confused, "algorithm"),
    ("es256-not-configured", lambda k: jwt.encode(claims(), k.ec_private, "ES256"), "algorithm"),
    ("wrong-key", lambda k: jwt.encode(claims(), k.stranger, algorithm="EdDSA"), "signature"),
    ("tampered-payload", _tampered, "signature"),
    ("truncated-signature", lambda k: signed(k)[:-6], "signature"),
    ("expired", lambda k: signed(k, exp=int(time.time()) - 120), "expired"),
    ("not-yet-valid", lambda k: signed(k, nbf=int(time.time()) + 600), "not-yet-valid"),
    ("no-exp", lambda k: signed(k, exp=None), "missing-claim"),
    ("no-sub", lambda k: signed(k, sub=None), "missing-claim"),
    ("no-account-id", lambda k: signed(k, account_id=None), "missing-claim"),
    ("no-issuer", lambda k: signed(k, iss=None), "missing-claim"),
    ("account-id-not-uuid", lambda k: signed(k, account_id="acme"), "claims"),
    ("account-id-number", lambda k: signed(k, account_id=42), "claims"),
    ("blank-sub", lambda k: signed(k, sub="  "), "claims"),
    ("wrong-issuer", lambda k: signed(k, iss="https://evil.test"), "issuer"),
    ("wrong-audience", lambda k: signed(k, aud="other-service"), "audience"),
]


@pytest.mark.parametrize(
    ("make", "reason"), [(m, r) for _, m, r in FAILURES], ids=[f[0] for f in FAILURES]
)
def test_token_failures(keys: Keys, make: Make, reason: str) -> None:
    verifier = TokenVerifier(ed_settings(keys))
    with pytest.raises(AuthenticationError) as caught:
        verifier.verify(make(keys))
    assert caught.value.reason == reason


def test_leeway_accepts_a_token_just_expired(keys: Keys) -> None:
    verifier = TokenVerifier(ed_settings(keys, jwt_leeway_seconds=30))
    token = signed(keys, exp=int(time.time()) - 5)
    assert verifier.verify(token) == Principal("olga", ACCOUNT)


def _jwks_settings(keys: Keys, tmp_path: Any) -> AuthSettings:
    jwks = {
        "keys": [
            {
                **json.loads(jwt.algorithms.ECAlgorithm.to_jwk(keys.ec_private.public_key())),
                "kid": "ec-1",
                "use": "sig",
            },
            {
                **json.loads(jwt.algorithms.OKPAlgorithm.to_jwk(keys.ed_private.public_key())),
                "kid": "ed-1",
            },
        ]
    }
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps(jwks))
    return AuthSettings(jwt_jwks_file=str(path), jwt_algorithms=("EdDSA", "ES256"))


@pytest.mark.parametrize(
    "case",
    [
        ("ec", "ES256", "ec-1", True),
        ("ed", "EdDSA", "ed-1", True),
        ("ed", "EdDSA", None, True),
        ("ed", "EdDSA", "ec-1", False),
        ("ed", "EdDSA", "gone", False),
    ],
    ids=["es256-by-kid", "eddsa-by-kid", "eddsa-without-kid", "kid-of-other-alg", "unknown-kid"],
)
def test_jwks_chooses_the_key(
    keys: Keys, tmp_path: Any, case: tuple[str, str, str | None, bool]
) -> None:
    private, alg, kid, ok = case
    verifier = TokenVerifier(_jwks_settings(keys, tmp_path))
    key = keys.ec_private if private == "ec" else keys.ed_private
    headers = {"kid": kid} if kid else None
    token = jwt.encode(claims(iss=None, aud=None), key, algorithm=alg, headers=headers)
    if ok:
        assert verifier.verify(token).account_id == ACCOUNT
    else:
        with pytest.raises(AuthenticationError) as caught:
            verifier.verify(token)
        assert caught.value.reason == "unknown-key"


ROUND_TRIPS = [
    ("hs256-secret", lambda _k: AuthSettings(jwt_secret=SECRET), "HS256"),
    (
        "eddsa-private-key-only",
        lambda k: AuthSettings(jwt_private_key_file=str(k.ed_private_file)),
        "EdDSA",
    ),
    (
        "es256-private-key-only",
        lambda k: AuthSettings(jwt_private_key_file=str(k.ec_private_file)),
        "ES256",
    ),
    (
        "eddsa-with-issuer-audience-kid",
        lambda k: AuthSettings(
            jwt_private_key_file=str(k.ed_private_file),
            jwt_key_file=str(k.ed_public_file),
            jwt_issuer=ISSUER,
            jwt_audience=AUDIENCE,
            jwt_key_id="k1",
        ),
        "EdDSA",
    ),
    (
        "private-key-preferred-over-secret",
        lambda k: AuthSettings(jwt_private_key_file=str(k.ed_private_file), jwt_secret=SECRET),
        "EdDSA",
    ),
]


@pytest.mark.parametrize(
    ("make_settings", "alg"), [(s, a) for _, s, a in ROUND_TRIPS], ids=[r[0] for r in ROUND_TRIPS]
)
def test_minted_tokens_verify_with_the_same_settings(
    keys: Keys, make_settings: Callable[[Keys], AuthSettings], alg: str
) -> None:
    settings = make_settings(keys)
    issuer = TokenIssuer(settings)
    token = issuer.mint("olga", ACCOUNT, 120)
    assert issuer.algorithm == alg
    assert jwt.get_unverified_header(token)["alg"] == alg
    assert TokenVerifier(settings).verify(token) == Principal("olga", ACCOUNT)
    payload = jwt.decode(token, options={"verify_signature": False})
    assert payload["exp"] - payload["iat"] == 120


def test_minted_token_expires_after_its_ttl(keys: Keys) -> None:
    settings = AuthSettings(jwt_secret=SECRET, jwt_leeway_seconds=0)
    token = TokenIssuer(settings).mint("olga", ACCOUNT, 60, now=time.time() - 61)
    with pytest.raises(AuthenticationError) as caught:
        TokenVerifier(settings).verify(token)
    assert caught.value.reason == "expired"


@pytest.mark.parametrize(
    ("user", "ttl"), [("", 60), ("olga", 0), ("olga", -5)], ids=["no-user", "zero-ttl", "neg-ttl"]
)
def test_mint_refuses_nonsense(user: str, ttl: float) -> None:
    with pytest.raises(ValueError, match="must"):
        TokenIssuer(AuthSettings(jwt_secret=SECRET)).mint(user, ACCOUNT, ttl)
