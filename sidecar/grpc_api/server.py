"""The gRPC listener: Qdrant's services (services.py) on WHOSE_GRPC_PORT, in the API's
process and event loop, over the services the API's lifespan opened.

Bound before the store opens, as the HTTP listeners are (serving.py), so a port in use
is one line naming the setting; started once the services are open; stopped with the
API. `grpc.so_reuseport` is off: gRPC turns it on by default, and a second sidecar on
the same port would then share it silently (the kernel spreading calls over both)
instead of refusing to start.

With WHOSE_GRPC_TLS_CERT_FILE and WHOSE_GRPC_TLS_KEY_FILE the listener speaks TLS only.
The pair is checked here as a TLS server loads it (Python's ssl, the same PEM rules):
gRPC takes any bytes and fails later in add_secure_port with no reason but lines its core
writes to stderr, which would read as a port that cannot be bound.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from pathlib import Path

import grpc

from sidecar.grpc_api.services import add_to
from sidecar.services import Services
from sidecar.settings import Settings


class CannotBind(OSError):
    """The gRPC port could not be bound; the message names the setting."""


def address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def bind(settings: Settings, services: Callable[[], Services]) -> tuple[grpc.aio.Server, int]:
    """The gRPC server with its port bound (not yet serving), and that port."""
    assert settings.grpc_port is not None
    server = grpc.aio.server(
        options=[
            ("grpc.so_reuseport", 0),
            # The REST dialect's body limit (WHOSE_MAX_BODY_BYTES), for a message.
            ("grpc.max_receive_message_length", settings.max_body_bytes),
        ]
    )
    credentials = None
    if settings.grpc_tls_cert_file and settings.grpc_tls_key_file:
        credentials = tls_credentials(settings.grpc_tls_cert_file, settings.grpc_tls_key_file)
    add_to(server, services)
    where = address(settings.host, settings.grpc_port)
    try:
        if credentials is not None:
            port = server.add_secure_port(where, credentials)
        else:
            port = server.add_insecure_port(where)
    except RuntimeError as exc:
        # gRPC logs why (in use, no such address); its exception does not say.
        raise CannotBind(f"{where} is in use or cannot be bound: change WHOSE_GRPC_PORT") from exc
    return server, port


def tls_credentials(cert_file: Path, key_file: Path) -> grpc.ServerCredentials:
    """The listener's certificate chain and key; ValueError naming the setting when they
    cannot serve (unreadable, not PEM, an encrypted key, a key not the certificate's)."""
    chain = _read(cert_file, "WHOSE_GRPC_TLS_CERT_FILE")
    key = _read(key_file, "WHOSE_GRPC_TLS_KEY_FILE")
    try:
        ssl.create_default_context().load_verify_locations(
            cadata=chain.decode("ascii", errors="ignore")
        )
    except ssl.SSLError:
        raise ValueError(f"WHOSE_GRPC_TLS_CERT_FILE {cert_file} holds no PEM certificate") from None
    try:
        # password: an encrypted key would otherwise have OpenSSL prompt on the terminal.
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(
            cert_file, key_file, password=_encrypted
        )
    except (ssl.SSLError, _Encrypted) as exc:
        raise ValueError(
            f"WHOSE_GRPC_TLS_KEY_FILE {key_file} is not the unencrypted PEM private key"
            f" of the certificate in WHOSE_GRPC_TLS_CERT_FILE ({_reason(exc)})"
        ) from None
    return grpc.ssl_server_credentials([(key, chain)])


class _Encrypted(Exception):
    pass


def _encrypted() -> bytes:
    raise _Encrypted("the key is encrypted")


def _reason(exc: Exception) -> str:
    if isinstance(exc, ssl.SSLError) and exc.reason:
        return str(exc.reason).lower().replace("_", " ")
    return str(exc) if isinstance(exc, _Encrypted) else "not a PEM private key"


def _read(path: Path, setting: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise ValueError(f"{setting} {path} cannot be read: {exc.strerror or exc}") from None
