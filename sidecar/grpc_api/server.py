"""The gRPC listener: Qdrant's services (services.py) on WHOSE_GRPC_PORT, in the API's
process and event loop, over the services the API's lifespan opened.

Bound before the store opens, as the HTTP listeners are (serving.py), so a port in use
is one line naming the setting; started once the services are open; stopped with the
API. `grpc.so_reuseport` is off: gRPC turns it on by default, and a second sidecar on
the same port would then share it silently (the kernel spreading calls over both)
instead of refusing to start.
"""

from __future__ import annotations

from collections.abc import Callable

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
    add_to(server, services)
    where = address(settings.host, settings.grpc_port)
    try:
        if settings.grpc_tls_cert_file and settings.grpc_tls_key_file:
            key = settings.grpc_tls_key_file.read_bytes()
            chain = settings.grpc_tls_cert_file.read_bytes()
            credentials = grpc.ssl_server_credentials([(key, chain)])
            port = server.add_secure_port(where, credentials)
        else:
            port = server.add_insecure_port(where)
    except RuntimeError as exc:
        # gRPC logs why (in use, no such address); its exception does not say.
        raise CannotBind(f"{where} is in use or cannot be bound: change WHOSE_GRPC_PORT") from exc
    return server, port
