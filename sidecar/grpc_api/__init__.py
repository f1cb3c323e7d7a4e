"""Qdrant's gRPC API (the `Points`, `Collections` and `Qdrant` services), for stacks that
set `prefer_grpc=True`: a second transport over the Qdrant dialect's one surface.

Each method turns its protobuf request into the REST dialect's body (with
qdrant-client's own conversions, `convert.py`), calls the very handler the REST route
calls (http/qdrant/), and turns the answer back; so both transports make the same
decisions, refusals and noninterference, and only the wire differs. Refusals are
mapped to gRPC status codes once, in `refusals.py`; what is not served answers
UNIMPLEMENTED with the reason (`services.py`). The listener is `server.py`.
Named `grpc_api`, not `grpc`: the package must not shadow the `grpc` library.
"""
