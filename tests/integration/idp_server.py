"""A real identity provider on loopback for the JWKS tests: discovery, keys, rotation.

A stdlib HTTP server in a thread serves `/.well-known/openid-configuration` and
`/jwks.json` from state the test changes while it runs (which keys, which issuer,
how slow, how large, a status code), counts the requests it answers, and can be
stopped and started again on the same port (a provider outage).
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from tests.conftest import free_port

ISSUED_FOR = "whose"


@dataclass
class SigningKey:
    """A private key the provider signs with; its public JWK is what it publishes."""

    kid: str
    private: Any
    algorithm: str

    @classmethod
    def rsa(cls, kid: str, algorithm: str = "RS256") -> SigningKey:
        return cls(kid, rsa.generate_private_key(public_exponent=65537, key_size=2048), algorithm)

    @classmethod
    def ec(cls, kid: str) -> SigningKey:
        return cls(kid, ec.generate_private_key(ec.SECP256R1()), "ES256")

    def jwk(self, **members: Any) -> dict[str, Any]:
        public = self.private.public_key()
        algorithm: Any = (
            jwt.algorithms.RSAAlgorithm
            if isinstance(self.private, rsa.RSAPrivateKey)
            else jwt.algorithms.ECAlgorithm
        )
        data: dict[str, Any] = algorithm.to_jwk(public, as_dict=True)
        return data | {"kid": self.kid, "use": "sig", "alg": self.algorithm} | members

    def token(self, issuer: str, sub: str = "alice", **claims: Any) -> str:
        now = int(time.time())
        body = {"iss": issuer, "aud": ISSUED_FOR, "sub": sub, "tenant": "acme", "iat": now}
        return jwt.encode(
            body | {"exp": now + 600} | claims,
            self.private,
            algorithm=self.algorithm,
            headers={"kid": self.kid},
        )


@dataclass
class IdpState:
    keys: list[dict[str, Any]] = field(default_factory=list)
    # What the discovery document says the issuer is (None: the provider's own URL).
    issuer: str | None = None
    # Overrides: a raw JWKS body, a status, a delay before answering, a jwks_uri.
    jwks_body: bytes | None = None
    status: int = 200
    delay_s: float = 0.0
    jwks_uri: str | None = None
    redirect_to: str | None = None
    requests: Counter[str] = field(default_factory=Counter)


class LocalIdp:
    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.state = IdpState()
        self.lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def jwks_url(self) -> str:
        return f"{self.url}/jwks.json"

    def publish(self, *keys: SigningKey) -> None:
        with self.lock:
            self.state.keys = [key.jwk() for key in keys]

    def count(self, path: str = "/jwks.json") -> int:
        with self.lock:
            return self.state.requests[path]

    def start(self) -> LocalIdp:
        idp = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                with idp.lock:
                    state = idp.state
                    state.requests[self.path] += 1
                    delay, status = state.delay_s, state.status
                    body = idp._body(self.path)
                    redirect = state.redirect_to
                if delay:
                    time.sleep(delay)
                if redirect is not None:
                    self.send_response(302)
                    self.send_header("Location", redirect)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if body is None:
                    status, body = 404, b"{}"
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                # The client may have given up (a timeout test): nothing to tell it.
                with contextlib.suppress(OSError):
                    self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        server.daemon_threads = True
        server.block_on_close = False
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """The provider goes down: its port refuses connections until start() again."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def _body(self, path: str) -> bytes | None:
        state = self.state
        if path == "/.well-known/openid-configuration":
            document = {
                "issuer": state.issuer if state.issuer is not None else self.url,
                "jwks_uri": state.jwks_uri or self.jwks_url,
                "id_token_signing_alg_values_supported": ["RS256", "ES256"],
            }
            return json.dumps(document).encode()
        if path == "/jwks.json":
            if state.jwks_body is not None:
                return state.jwks_body
            return json.dumps({"keys": state.keys}).encode()
        return None
