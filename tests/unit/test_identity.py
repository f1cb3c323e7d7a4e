"""Identity: a verified token, or dev headers only in dev mode.

Tokens here are real: signed with real HMAC secrets and real RSA / EC / Ed25519
keys. Those whose JSON no well-behaved library would write (duplicate members,
NaN) are assembled by hand and signed with PyJWT's own algorithm objects.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from starlette.requests import Request

from sidecar.auth.identity import Identity
from sidecar.auth.tokens import Authenticator
from sidecar.errors import Unauthenticated
from sidecar.settings import Settings

SECRET = "a-test-secret-of-at-least-32-bytes!!"


def request(headers: dict[str, str]) -> Request:
    raw = [(k.lower().encode(), v.encode()) for k, v in headers.items()]
    return Request({"type": "http", "method": "GET", "path": "/", "headers": raw})


def token(claims: dict[str, Any], key: Any = SECRET, algorithm: str = "HS256") -> str:
    base = {"sub": "alice", "tenant": "acme", "exp": int(time.time()) + 60}
    return jwt.encode(base | claims, key, algorithm=algorithm)


def bearer(raw_token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {raw_token}"}


async def identify(auth: Authenticator, headers: dict[str, str]) -> Identity:
    return await auth(request(headers))


async def reason(auth: Authenticator, headers: dict[str, str]) -> str:
    with pytest.raises(Unauthenticated) as refused:
        await identify(auth, headers)
    assert refused.value.reasons == [refused.value.reason]
    return refused.value.reason


@pytest.fixture
def auth() -> Authenticator:
    return Authenticator(Settings(jwt_hs256_secret=SECRET, jwt_issuer="idp", jwt_audience="whose"))


def good(**claims: Any) -> dict[str, str]:
    return bearer(token({"iss": "idp", "aud": "whose"} | claims))


def b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def hand_signed(
    header_json: str, payload_json: str, key: Any = SECRET, algorithm: str = "HS256"
) -> str:
    """A token from JSON text exactly as given (duplicates and all), validly signed."""
    signing_input = f"{b64(header_json.encode())}.{b64(payload_json.encode())}"
    alg = jwt.get_algorithm_by_name(algorithm)
    signature = alg.sign(signing_input.encode(), alg.prepare_key(key))
    return f"{signing_input}.{b64(signature)}"


# Fixed dates far ahead: parameters are built at collection, and the whole suite runs
# for longer than any "now + 10 minutes" would last.
EXP = 4_102_444_800  # 2100-01-01
HS_HEADER = '{"alg":"HS256","typ":"JWT"}'


def raw_token(header: str, payload: str) -> str:
    return f"{b64(header.encode())}.{b64(payload.encode())}.c2ln"


def payload_json(extra: str = "") -> str:
    return f'{{"sub":"alice","tenant":"acme","iss":"idp","aud":"whose","exp":{EXP}{extra}}}'


# --- what a good token gives ---------------------------------------------------------


async def test_verified_token_gives_identity_with_claims(auth: Authenticator) -> None:
    who = await identify(auth, good(groups=["group:launch-team", "ops"], roles=["auditor"]))
    assert who == Identity("alice", "acme", groups=("launch-team", "ops"), roles=("auditor",))


async def test_roles_and_scopes_are_taken_verbatim(auth: Authenticator) -> None:
    # Only groups are matched by bare name; a role or scope named "group:x" is that name.
    who = await identify(auth, good(roles=["group:admins"], scopes=["group:read"]))
    assert who.roles == ("group:admins",)
    assert who.scopes == ("group:read",)


async def test_token_in_api_key_header_is_accepted(auth: Authenticator) -> None:
    raw = good()["Authorization"].removeprefix("Bearer ")
    assert (await identify(auth, {"api-key": raw})).id == "alice"


async def test_hand_signed_helper_makes_tokens_the_sidecar_accepts(auth: Authenticator) -> None:
    # Guards the refusals below: they differ from this token only where they say.
    assert (await identify(auth, bearer(hand_signed(HS_HEADER, payload_json())))).id == "alice"


# --- strict claims ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("claims", "expected"),
    [
        ({"exp": int(time.time()) - 10}, "token_expired"),
        ({"nbf": EXP - 1}, "invalid_token"),
        ({"iss": "someone-else"}, "invalid_token"),
        ({"aud": "another-service"}, "invalid_token"),
        ({"tenant": ""}, "invalid_token"),
        ({"tenant": "  "}, "invalid_token"),
        ({"sub": "  "}, "invalid_token"),
        ({"sub": " alice"}, "invalid_token"),
        # NumericDate is a JSON number (RFC 7519 §2): PyJWT would int() a string.
        ({"exp": str(EXP)}, "invalid_token"),
        ({"exp": True}, "invalid_token"),
        ({"exp": None}, "invalid_token"),
        ({"nbf": "0"}, "invalid_token"),
        ({"nbf": False}, "invalid_token"),
        ({"nbf": None}, "invalid_token"),
        ({"iat": str(int(time.time()))}, "invalid_token"),
        ({"iat": True}, "invalid_token"),
        ({"iat": None}, "invalid_token"),
        # An audience that is present names someone, or the token is malformed.
        ({"aud": ["whose", ""]}, "invalid_token"),
        ({"aud": ["whose", 7]}, "invalid_token"),
        # Principals: bounded, and never a group's name.
        ({"sub": "group:launch-team"}, "invalid_token"),
        ({"sub": "a" * 201}, "invalid_token"),
        ({"tenant": "t" * 201}, "invalid_token"),
        ({"tenant": 42}, "invalid_token"),
        ({"tenant": "acme "}, "invalid_token"),
    ],
)
async def test_bad_claims_are_refused(
    auth: Authenticator, claims: dict[str, Any], expected: str
) -> None:
    assert await reason(auth, good(**claims)) == expected


async def test_names_at_the_bound_are_accepted() -> None:
    # 100 groups of 200 characters need more than the default token size bound.
    roomy = Settings(jwt_hs256_secret=SECRET, jwt_max_token_bytes=65536)
    claims = {"sub": "a" * 200, "tenant": "t" * 200, "groups": ["g" * 200] * 100}
    who = await identify(Authenticator(roomy), bearer(token(claims)))
    assert (len(who.id), len(who.tenant), len(who.groups)) == (200, 200, 100)


@pytest.mark.parametrize("claim", ["groups", "roles", "scopes"])
@pytest.mark.parametrize(
    "value",
    [
        "a,b",
        "a",
        None,
        {"a": 1},
        [1],
        [True],
        [None],
        [{"name": "a"}],
        [["a"]],
        [""],
        [" a"],
        ["a "],
        ["x" * 201],
        ["a"] * 101,
    ],
    ids=repr,
)
async def test_list_claims_must_be_arrays_of_names(
    auth: Authenticator, claim: str, value: Any
) -> None:
    assert await reason(auth, good(**{claim: value})) == "invalid_token"


@pytest.mark.parametrize("group", ["group:", "group: x", "group:x "])
async def test_a_group_prefix_must_leave_a_name(auth: Authenticator, group: str) -> None:
    assert await reason(auth, good(groups=[group])) == "invalid_token"


@pytest.mark.parametrize("aud", [[], ""])
async def test_an_empty_audience_is_refused_with_or_without_a_configured_one(aud: Any) -> None:
    configured = Authenticator(Settings(jwt_hs256_secret=SECRET, jwt_audience="whose"))
    unconfigured = Authenticator(Settings(jwt_hs256_secret=SECRET))
    for auth in (configured, unconfigured):
        assert await reason(auth, bearer(token({"aud": aud}))) == "invalid_token"


@pytest.mark.parametrize("aud", [7, {"whose": True}, [["whose"]]], ids=repr)
async def test_an_audience_of_the_wrong_type_is_refused(aud: Any) -> None:
    auth = Authenticator(Settings(jwt_hs256_secret=SECRET))
    assert await reason(auth, bearer(token({"aud": aud}))) == "invalid_token"


async def test_audience_list_naming_us_is_accepted(auth: Authenticator) -> None:
    assert (await identify(auth, good(aud=["other", "whose"]))).id == "alice"


@pytest.mark.parametrize(
    "payload",
    [
        # Two tenants: Python keeps the last, another parser the first.
        payload_json(',"tenant":"globex"'),
        payload_json(',"sub":"mallory"'),
        payload_json(',"exp":4102444801'),
        # A duplicate inside a nested object is as ambiguous.
        payload_json(',"ctx":{"a":1,"a":2}'),
    ],
)
async def test_duplicate_payload_members_are_refused(auth: Authenticator, payload: str) -> None:
    assert await reason(auth, bearer(hand_signed(HS_HEADER, payload))) == "invalid_token"


@pytest.mark.parametrize(
    "header",
    ['{"alg":"HS256","alg":"HS256"}', '{"alg":"HS256","kid":"a","kid":"b","typ":"JWT"}'],
)
async def test_duplicate_header_members_are_refused(auth: Authenticator, header: str) -> None:
    assert await reason(auth, bearer(hand_signed(header, payload_json()))) == "invalid_token"


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity", "1e999"])
async def test_non_finite_dates_are_refused(auth: Authenticator, constant: str) -> None:
    # Python's json reads NaN and Infinity; they are not JSON, and 1e999 is infinite.
    payload = '{"sub":"alice","tenant":"acme","iss":"idp","aud":"whose","exp":' + constant + "}"
    assert await reason(auth, bearer(hand_signed(HS_HEADER, payload))) == "invalid_token"


@pytest.mark.parametrize(
    "raw",
    [
        "e30.e30.",
        "not-a-token",
        "a.b.c.d",
        "!!!.e30.sig",
        # A header that is JSON but not an object, or names no alg.
        raw_token("[]", "{}"),
        raw_token("{}", "{}"),
        raw_token('{"alg": 5}', "{}"),
        raw_token('{"alg": "HS256", "kid": 5}', "{}"),
        raw_token('{"alg": "HS256", "kid": ""}', "{}"),
        # Not UTF-8.
        f"{b64(HS_HEADER.encode('utf-16'))}.{b64(b'{}')}.sig",
        f"{b64(b'[' * 3000)}.{b64(b'{}')}.sig",
    ],
)
async def test_malformed_tokens_are_401_never_500(auth: Authenticator, raw: str) -> None:
    assert await reason(auth, bearer(raw)) == "invalid_token"


async def test_padded_segments_are_read_as_pyjwt_reads_them(auth: Authenticator) -> None:
    # Some issuers pad base64url with "="; PyJWT accepts that, so the strict reading must too.
    header = base64.urlsafe_b64encode(b'{"alg":"HS256"}').decode()
    payload = base64.urlsafe_b64encode(payload_json().encode()).decode()
    assert header.endswith("=") or payload.endswith("=")
    signing_input = f"{header}.{payload}"
    alg = jwt.get_algorithm_by_name("HS256")
    signature = b64(alg.sign(signing_input.encode(), alg.prepare_key(SECRET)))
    assert (await identify(auth, bearer(f"{signing_input}.{signature}"))).id == "alice"


async def test_a_token_over_the_size_bound_is_refused_before_parsing(auth: Authenticator) -> None:
    # Validly signed and otherwise perfect, only too long.
    padded = token({"iss": "idp", "aud": "whose", "pad": "x" * 9000})
    assert len(padded) > 8192
    assert await reason(auth, bearer(padded)) == "token_too_large"
    # Not even base64: still refused by size alone, without reading it.
    assert await reason(auth, bearer("!" * 8193)) == "token_too_large"
    fits = token({"iss": "idp", "aud": "whose", "pad": "x" * 5000})
    assert len(fits) <= 8192
    assert (await identify(auth, bearer(fits))).id == "alice"


async def test_the_size_bound_is_a_setting() -> None:
    roomy = Authenticator(Settings(jwt_hs256_secret=SECRET, jwt_max_token_bytes=16384))
    assert (await identify(roomy, bearer(token({"pad": "x" * 9000})))).id == "alice"


async def test_token_for_another_service_is_refused_even_without_configured_audience() -> None:
    lenient = Authenticator(Settings(jwt_hs256_secret=SECRET))
    assert (await identify(lenient, bearer(token({})))).id == "alice"
    foreign = token({"aud": "some-other-service"})
    assert await reason(lenient, bearer(foreign)) == "invalid_token"


async def test_missing_tenant_and_missing_exp_are_refused(auth: Authenticator) -> None:
    base = {"sub": "alice", "iss": "idp", "aud": "whose"}
    no_tenant = jwt.encode(base | {"exp": EXP}, SECRET, algorithm="HS256")
    no_exp = jwt.encode(base | {"tenant": "acme"}, SECRET, algorithm="HS256")
    for forged in (no_tenant, no_exp):
        assert await reason(auth, bearer(forged)) == "invalid_token"


async def test_wrong_key_and_alg_none_are_refused(auth: Authenticator) -> None:
    wrong_key = token({"iss": "idp", "aud": "whose"}, key="another-secret-of-32-bytes-or-more!")
    unsigned = token({"iss": "idp", "aud": "whose"}, key="", algorithm="none")
    for forged in (wrong_key, unsigned):
        assert await reason(auth, bearer(forged)) == "invalid_token"


# --- dev headers -----------------------------------------------------------------------


async def test_dev_headers_are_ignored_outside_dev_mode(auth: Authenticator) -> None:
    assert await reason(auth, {"X-Whose-Asker": "bob", "X-Whose-Tenant": "acme"}) == (
        "missing_token"
    )


async def test_dev_headers_in_dev_mode() -> None:
    dev = Authenticator(Settings(dev=True))
    headers = {
        "X-Whose-Asker": "bob",
        "X-Whose-Tenant": "acme",
        "X-Whose-Groups": "a, group:b",
        "X-Whose-Roles": "auditor,group:odd",
    }
    who = await identify(dev, headers)
    assert who == Identity("bob", "acme", groups=("a", "b"), roles=("auditor", "group:odd"))
    assert await reason(dev, {"X-Whose-Asker": "bob"}) == "missing_dev_identity"


async def test_a_token_beside_dev_headers_is_refused_not_outranked() -> None:
    # A token for bob with X-Whose-Asker: alice was answered as alice (issue 35).
    dev = Authenticator(Settings(dev=True, jwt_hs256_secret=SECRET))
    bobs = token({"sub": "bob"})
    assert (await identify(dev, bearer(bobs))).id == "bob"
    for mixed in (
        bearer(bobs) | {"X-Whose-Asker": "alice", "X-Whose-Tenant": "acme"},
        {"api-key": bobs, "X-Whose-Asker": "alice", "X-Whose-Tenant": "acme"},
        bearer(bobs) | {"X-Whose-Groups": "admins"},
    ):
        assert await reason(dev, mixed) == "ambiguous_identity"


@pytest.mark.parametrize(
    "headers",
    [
        {"X-Whose-Asker": "group:launch-team"},
        {"X-Whose-Asker": "b" * 201},
        {"X-Whose-Asker": " bob"},
        {"X-Whose-Tenant": "t" * 201},
        {"X-Whose-Groups": "group:"},
        {"X-Whose-Groups": ",".join(["g"] * 101)},
        {"X-Whose-Roles": "r" * 201},
    ],
    ids=repr,
)
async def test_dev_headers_follow_the_token_rules(headers: dict[str, str]) -> None:
    dev = Authenticator(Settings(dev=True))
    base = {"X-Whose-Asker": "bob", "X-Whose-Tenant": "acme"}
    assert await reason(dev, base | headers) == "invalid_dev_identity"


async def test_dev_mode_without_a_key_refuses_tokens() -> None:
    dev = Authenticator(Settings(dev=True))
    assert await reason(dev, bearer(token({}))) == "token_not_accepted"


def test_no_identity_provider_refuses_to_start() -> None:
    with pytest.raises(ValueError, match="no identity provider"):
        Authenticator(Settings())


# --- configuration ------------------------------------------------------------------------


def _rsa(bits: int = 2048) -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=bits)


def _public_pem(private: Any) -> bytes:
    return private.public_key().public_bytes(  # type: ignore[no-any-return]
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def _signed(private: Any, algorithm: str, headers: dict[str, Any] | None = None) -> str:
    claims = {"sub": "alice", "tenant": "acme", "exp": int(time.time()) + 60}
    return jwt.encode(claims, private, algorithm=algorithm, headers=headers)


def _pem_file(tmp_path: Path, private: Any) -> Path:
    pem = tmp_path / "key.pem"
    pem.write_bytes(_public_pem(private))
    return pem


@pytest.mark.parametrize(
    "sources",
    [
        {"jwt_hs256_secret": SECRET, "jwt_jwks_url": "https://idp.example/jwks"},
        {"jwt_hs256_secret": SECRET, "jwt_public_key_file": Path("/nonexistent.pem")},
        {"jwt_jwks_file": Path("/x.json"), "jwt_oidc": True, "jwt_issuer": "https://i"},
        {"jwt_jwks_url": "https://idp.example/jwks", "jwt_oidc": True, "jwt_issuer": "https://i"},
    ],
    ids=lambda s: "+".join(k for k in s if k != "jwt_issuer"),
)
def test_several_key_sources_refuse_to_start(sources: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="several identity key sources"):
        Authenticator(Settings(**sources))


def test_oidc_needs_an_issuer() -> None:
    with pytest.raises(ValueError, match="needs WHOSE_JWT_ISSUER"):
        Authenticator(Settings(jwt_oidc=True))


@pytest.mark.parametrize(
    "settings",
    [
        {"jwt_jwks_url": "http://idp.example.com/jwks.json"},
        {"jwt_jwks_url": "ftp://127.0.0.1/jwks.json"},
        {"jwt_jwks_url": "jwks.json"},
        {"jwt_oidc": True, "jwt_issuer": "http://idp.example.com"},
    ],
    ids=repr,
)
def test_keys_are_fetched_over_https_only_off_loopback(settings: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="https://"):
        Authenticator(Settings(**settings))


def test_remote_sources_do_not_fetch_at_start() -> None:
    # Nothing listens on this port: construction must not care (the first token will).
    Authenticator(Settings(jwt_jwks_url="http://127.0.0.1:9/jwks.json"))
    Authenticator(Settings(jwt_oidc=True, jwt_issuer="http://127.0.0.1:9"))


@pytest.mark.parametrize(
    ("make_key", "algorithm"),
    [
        (_rsa, "RS256"),
        (lambda: ec.generate_private_key(ec.SECP256R1()), "ES256"),
        (lambda: ec.generate_private_key(ec.SECP384R1()), "ES384"),
        (lambda: ec.generate_private_key(ec.SECP521R1()), "ES512"),
        (ed25519.Ed25519PrivateKey.generate, "EdDSA"),
    ],
    ids=["RS256", "ES256", "ES384", "ES512", "EdDSA"],
)
async def test_public_key_verifies_the_algorithm_of_its_type_and_curve(
    tmp_path: Path, make_key: Callable[[], Any], algorithm: str
) -> None:
    private = make_key()
    auth = Authenticator(Settings(jwt_public_key_file=_pem_file(tmp_path, private)))
    assert (await identify(auth, bearer(_signed(private, algorithm)))).id == "alice"


async def test_an_ec_key_refuses_another_curves_algorithm(tmp_path: Path) -> None:
    private = ec.generate_private_key(ec.SECP384R1())
    auth = Authenticator(Settings(jwt_public_key_file=_pem_file(tmp_path, private)))
    p256 = ec.generate_private_key(ec.SECP256R1())
    assert await reason(auth, bearer(_signed(p256, "ES256"))) == "invalid_token"


def test_a_short_rsa_public_key_refuses_to_start(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="1024 bits"):
        Authenticator(Settings(jwt_public_key_file=_pem_file(tmp_path, _rsa(1024))))


def test_a_file_that_is_no_public_key_refuses_to_start(tmp_path: Path) -> None:
    pem = tmp_path / "key.pem"
    pem.write_bytes(
        _rsa().private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    with pytest.raises(ValueError, match="not a PEM public key"):
        Authenticator(Settings(jwt_public_key_file=pem))


async def test_hs_rs_confusion_is_refused(tmp_path: Path) -> None:
    # The classic attack: sign HS256 with the server's *public* key as the HMAC secret.
    private = _rsa()
    auth = Authenticator(Settings(jwt_public_key_file=_pem_file(tmp_path, private)))
    claims = '{"sub":"alice","tenant":"acme","exp":' + str(EXP) + "}"
    forged = hand_signed(HS_HEADER, claims, key=SECRET)
    # PyJWT refuses to HMAC-sign with a PEM, so sign the PEM bytes by hand, as an attacker would.
    import hashlib
    import hmac

    signing_input = forged.rsplit(".", 1)[0]
    mac = hmac.new(_public_pem(private), signing_input.encode(), hashlib.sha256).digest()
    assert await reason(auth, bearer(f"{signing_input}.{b64(mac)}")) == "invalid_token"


@pytest.mark.parametrize("secret", ["", "short", "x" * 31])
def test_a_short_hs256_secret_refuses_to_start(secret: str) -> None:
    with pytest.raises(ValueError, match="at least 32 bytes"):
        Authenticator(Settings(jwt_hs256_secret=secret))


def test_no_issuer_and_no_audience_is_warned_about(caplog: pytest.LogCaptureFixture) -> None:
    Authenticator(Settings(jwt_hs256_secret=SECRET))
    assert "WHOSE_JWT_AUDIENCE" in caplog.text
    caplog.clear()
    Authenticator(Settings(jwt_hs256_secret=SECRET, jwt_audience="whose"))
    assert caplog.text == ""


# --- JWKS files ----------------------------------------------------------------------------


def jwk(private: Any, kid: str | None = None, **members: Any) -> dict[str, Any]:
    """The public JWK of a private key, with kid and any other members."""
    public = private.public_key()
    data: dict[str, Any]
    if isinstance(private, rsa.RSAPrivateKey):
        data = jwt.algorithms.RSAAlgorithm.to_jwk(public, as_dict=True)
    elif isinstance(private, ec.EllipticCurvePrivateKey):
        data = jwt.algorithms.ECAlgorithm.to_jwk(public, as_dict=True)
    else:
        data = jwt.algorithms.OKPAlgorithm.to_jwk(public, as_dict=True)
    if kid is not None:
        data["kid"] = kid
    return data | members


def jwks_auth(tmp_path: Path, *keys: dict[str, Any]) -> Authenticator:
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps({"keys": list(keys)}))
    return Authenticator(Settings(jwt_jwks_file=path))


def refused_jwks(tmp_path: Path, text: str) -> str:
    path = tmp_path / "jwks.json"
    path.write_text(text)
    with pytest.raises(ValueError, match="WHOSE_JWT_JWKS_FILE") as refused:
        Authenticator(Settings(jwt_jwks_file=path))
    return str(refused.value)


async def test_jwks_picks_the_key_by_kid_and_refuses_unknown_kids(tmp_path: Path) -> None:
    first, second = _rsa(), _rsa()
    auth = jwks_auth(tmp_path, jwk(first, "one"), jwk(second, "two"))
    for private, kid in ((first, "one"), (second, "two")):
        assert (await identify(auth, bearer(_signed(private, "RS256", {"kid": kid})))).id == (
            "alice"
        )
    wrong_kid = _signed(first, "RS256", {"kid": "two"})
    assert await reason(auth, bearer(wrong_kid)) == "invalid_token"
    for unknown in (_signed(first, "RS256", {"kid": "three"}), _signed(first, "RS256")):
        assert await reason(auth, bearer(unknown)) == "unknown_key"


async def test_jwks_skips_keys_that_are_not_for_signatures(tmp_path: Path) -> None:
    signing, encryption, wrapping = _rsa(), _rsa(), _rsa()
    auth = jwks_auth(
        tmp_path,
        jwk(signing, "sig", use="sig", key_ops=["verify"]),
        jwk(encryption, "enc", use="enc"),
        jwk(wrapping, "wrap", key_ops=["wrapKey", "encrypt"]),
    )
    assert (await identify(auth, bearer(_signed(signing, "RS256", {"kid": "sig"})))).id == "alice"
    for private, kid in ((encryption, "enc"), (wrapping, "wrap")):
        assert await reason(auth, bearer(_signed(private, "RS256", {"kid": kid}))) == (
            "unknown_key"
        )


async def test_an_encryption_key_may_share_a_signing_keys_kid(tmp_path: Path) -> None:
    signing, encryption = _rsa(), _rsa()
    auth = jwks_auth(tmp_path, jwk(signing, "k"), jwk(encryption, "k", use="enc"))
    assert (await identify(auth, bearer(_signed(signing, "RS256", {"kid": "k"})))).id == "alice"


async def test_jwks_honours_the_keys_alg(tmp_path: Path) -> None:
    private = _rsa()
    auth = jwks_auth(tmp_path, jwk(private, "k", alg="PS384"))
    assert (await identify(auth, bearer(_signed(private, "PS384", {"kid": "k"})))).id == "alice"
    # The same key, the token's header asking for another algorithm.
    for algorithm in ("RS256", "PS256", "RS384"):
        forged = _signed(private, algorithm, {"kid": "k"})
        assert await reason(auth, bearer(forged)) == "invalid_token"


@pytest.mark.parametrize(
    ("make_key", "algorithm"),
    [
        (lambda: ec.generate_private_key(ec.SECP256R1()), "ES256"),
        (lambda: ec.generate_private_key(ec.SECP384R1()), "ES384"),
        (lambda: ec.generate_private_key(ec.SECP521R1()), "ES512"),
        (ed25519.Ed25519PrivateKey.generate, "EdDSA"),
    ],
    ids=["P-256", "P-384", "P-521", "Ed25519"],
)
async def test_jwks_default_alg_by_key_type_and_curve(
    tmp_path: Path, make_key: Callable[[], Any], algorithm: str
) -> None:
    private = make_key()
    auth = jwks_auth(tmp_path, jwk(private, "k"))
    assert (await identify(auth, bearer(_signed(private, algorithm, {"kid": "k"})))).id == "alice"


@pytest.mark.parametrize(
    ("make_entry", "message"),
    [
        (lambda: {"kty": "oct", "k": "c2VjcmV0", "kid": "s"}, "symmetric"),
        (lambda: jwk(_rsa(1024), "short"), "1024 bits"),
        (lambda: jwk(_rsa(), "k", alg="none"), "alg 'none'"),
        (lambda: jwk(_rsa(), "k", alg="HS256"), "alg 'HS256'"),
        (lambda: jwk(_rsa(), "k", alg="ES256"), "'k'"),
        (lambda: jwk(ec.generate_private_key(ec.SECP384R1()), "k", alg="ES256"), "ES384"),
        (lambda: jwk(ec.generate_private_key(ec.SECP256K1()), "k"), "secp256k1"),
        (lambda: jwk(_rsa(), ""), "kid must be"),
        (lambda: jwk(_rsa(), "k") | {"e": 3}, "'k'"),
        (lambda: "not a key", "not a JSON object"),
    ],
    ids=[
        "oct",
        "rsa-1024",
        "alg-none",
        "alg-hs256",
        "alg-of-another-family",
        "alg-of-another-curve",
        "secp256k1",
        "empty-kid",
        "malformed",
        "not-an-object",
    ],
)
def test_unusable_keys_in_a_jwks_file_refuse_to_start(
    tmp_path: Path, make_entry: Callable[[], Any], message: str
) -> None:
    text = json.dumps({"keys": [jwk(_rsa(), "good"), make_entry()]})
    assert message in refused_jwks(tmp_path, text)


def test_a_private_key_in_a_jwks_file_refuses_to_start(tmp_path: Path) -> None:
    private = _rsa()
    full = jwt.algorithms.RSAAlgorithm.to_jwk(private, as_dict=True) | {"kid": "k"}
    del full["key_ops"]  # PyJWT marks it ["sign"], which alone would skip it
    assert "public key" in refused_jwks(tmp_path, json.dumps({"keys": [full]}))


def test_two_keys_with_one_kid_refuse_to_start(tmp_path: Path) -> None:
    text = json.dumps({"keys": [jwk(_rsa(), "k"), jwk(_rsa(), "k")]})
    assert "share kid 'k'" in refused_jwks(tmp_path, text)


def test_several_keys_need_kids(tmp_path: Path) -> None:
    text = json.dumps({"keys": [jwk(_rsa(), "k"), jwk(_rsa())]})
    assert "every key needs a kid" in refused_jwks(tmp_path, text)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"keys": []}', "no usable signature key"),
        ('{"keys": {}}', "not a JWKS"),
        ("[]", "not a JWKS"),
        ('{"keys": [], "keys": []}', "duplicate member"),
        ("{", "not a JSON document"),
    ],
)
def test_a_jwks_file_that_is_no_key_set_refuses_to_start(
    tmp_path: Path, text: str, message: str
) -> None:
    assert message in refused_jwks(tmp_path, text)


def test_a_jwks_with_only_encryption_keys_refuses_to_start(tmp_path: Path) -> None:
    text = json.dumps({"keys": [jwk(_rsa(), "e", use="enc")]})
    assert "no usable signature key" in refused_jwks(tmp_path, text)


async def test_a_single_key_without_kid_verifies_every_token(tmp_path: Path) -> None:
    private = _rsa()
    auth = jwks_auth(tmp_path, jwk(private))
    for headers in (None, {"kid": "whatever"}):
        assert (await identify(auth, bearer(_signed(private, "RS256", headers)))).id == "alice"


async def test_a_name_is_read_in_its_one_form(auth: Authenticator) -> None:
    # Case and Unicode compatibility forms fold (auth/identity.py person_name, issue 35):
    # an attribution reads the same for both spellings, so they are one person.
    spelt = token({"sub": "Alice", "iss": "idp", "aud": "whose", "groups": ["group:Team", "OPS"]})
    who = await identify(auth, bearer(spelt))
    assert (who.id, who.groups) == ("alice", ("team", "ops"))
    dev = Authenticator(Settings(dev=True))
    headers = {"X-Whose-Asker": "ALICE", "X-Whose-Tenant": "acme", "X-Whose-Groups": "Team"}
    assert await identify(dev, headers) == Identity("alice", "acme", groups=("team",))
    # Folding may not make a group of a person, nor pad a name.
    assert await reason(dev, {"X-Whose-Asker": "GROUP:x", "X-Whose-Tenant": "acme"}) == (
        "invalid_dev_identity"
    )
