"""The gRPC listener over TLS (WHOSE_GRPC_TLS_CERT_FILE, WHOSE_GRPC_TLS_KEY_FILE): a
client trusting the sidecar's certificate is answered, as one person, by the generated
stubs and by the unmodified qdrant-client; a plaintext client, or one trusting another
certificate, is not answered at all (nothing is served in clear); certificate files that
cannot serve stop the sidecar at start-up in one line naming the setting.

The certificates are made here (`cryptography`), self-signed for 127.0.0.1 and localhost.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from qdrant_client import QdrantClient
from qdrant_client import grpc as qgrpc
from qdrant_client.http import models as qm

from sidecar.grpc_api.server import tls_credentials
from tests.acceptance.proxy_world import JWT_ENV, token
from tests.conftest import GRPC, REPO, free_ports
from tests.factories import served

COLLECTION = "tls-kb"
# Generous: the suite runs on two busy cores.
TIMEOUT = 30


def certificate(folder: Path, name: str) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and localhost, and its key (PEM files)."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = folder / f"{name}.crt", folder / f"{name}.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_file, key_file


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return certificate(tmp_path_factory.mktemp("tls"), "sidecar")


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("grpc-tls")


@pytest.fixture(scope="module")
def base(data_dir: Path, tls: tuple[Path, Path]) -> Iterator[str]:
    cert_file, key_file = tls
    env = JWT_ENV | {
        "WHOSE_GRPC_TLS_CERT_FILE": str(cert_file),
        "WHOSE_GRPC_TLS_KEY_FILE": str(key_file),
    }
    with served(data_dir, env, dev=False, grpc=True) as url:
        yield url


def secure(base: str, roots: Path, host: str = "127.0.0.1") -> grpc.Channel:
    credentials = grpc.ssl_channel_credentials(root_certificates=roots.read_bytes())
    return grpc.secure_channel(f"{host}:{GRPC[base]}", credentials)


def as_(who: str, how: str = "api-key") -> tuple[tuple[str, str]]:
    value = token(who) if how == "api-key" else f"Bearer {token(who)}"
    return ((how, value),)


def stubs(channel: grpc.Channel) -> tuple[Any, Any, Any]:
    """qdrant-client's generated stubs (untyped) on `channel`: Qdrant, Collections, Points."""
    return (
        qgrpc.QdrantStub(channel),  # type: ignore[no-untyped-call]
        qgrpc.CollectionsStub(channel),  # type: ignore[no-untyped-call]
        qgrpc.PointsStub(channel),  # type: ignore[no-untyped-call]
    )


def healthy(channel: grpc.Channel) -> str:
    version: str = (
        stubs(channel)[0].HealthCheck(qgrpc.HealthCheckRequest(), timeout=TIMEOUT).version
    )
    return version


def test_a_client_trusting_the_certificate_is_answered(
    base: str, tls: tuple[Path, Path], data_dir: Path
) -> None:
    cert_file, _ = tls
    with secure(base, cert_file) as channel:
        assert healthy(channel)
        _, collections, points = stubs(channel)
        collections.Create(
            qgrpc.CreateCollection(
                collection_name=COLLECTION,
                vectors_config=qgrpc.VectorsConfig(
                    params=qgrpc.VectorParams(size=4, distance=qgrpc.Distance.Cosine)
                ),
            ),
            metadata=as_("alice"),
            timeout=TIMEOUT,
        )
        point = qgrpc.PointStruct(
            id=qgrpc.PointId(num=1),
            vectors=qgrpc.Vectors(vector=qgrpc.Vector(data=[0.5, 1.0, 1.5, 2.0])),
            payload={
                "content": qgrpc.Value(string_value="the launch is on October 17"),
                "source": qgrpc.Value(string_value="notes.md"),
                "audience": qgrpc.Value(
                    list_value=qgrpc.ListValue(values=[qgrpc.Value(string_value="alice")])
                ),
            },
        )
        points.Upsert(
            qgrpc.UpsertPoints(collection_name=COLLECTION, points=[point], wait=True),
            metadata=as_("alice"),
            timeout=TIMEOUT,
        )
        count = qgrpc.CountPoints(collection_name=COLLECTION, exact=True)
        # The same person by either metadata; another sees nothing of hers.
        assert points.Count(count, metadata=as_("alice"), timeout=TIMEOUT).result.count == 1
        bearer = as_("alice", "authorization")
        assert points.Count(count, metadata=bearer, timeout=TIMEOUT).result.count == 1
        assert points.Count(count, metadata=as_("bob"), timeout=TIMEOUT).result.count == 0
        listed = collections.List(
            qgrpc.ListCollectionsRequest(), metadata=as_("alice"), timeout=TIMEOUT
        )
        assert COLLECTION in [c.name for c in listed.collections]
        # Still a verified token over TLS: none is still refused.
        with pytest.raises(grpc.RpcError) as caught:
            points.Count(count, timeout=TIMEOUT)
        assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED

    # The certificate names localhost too.
    with secure(base, cert_file, "localhost") as channel:
        assert healthy(channel)

    # The log names the listener as TLS.
    assert f"grpcs://127.0.0.1:{GRPC[base]}" in (data_dir / "sidecar.log").read_text()


def unanswered(channel: grpc.Channel) -> grpc.RpcError:
    with channel, pytest.raises(grpc.RpcError) as caught:
        stubs(channel)[2].Count(
            qgrpc.CountPoints(collection_name=COLLECTION), metadata=as_("alice"), timeout=TIMEOUT
        )
    return caught.value


def test_nothing_is_served_in_clear_nor_to_a_client_trusting_another_certificate(
    base: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    error = unanswered(grpc.insecure_channel(f"127.0.0.1:{GRPC[base]}"))
    assert error.code() == grpc.StatusCode.UNAVAILABLE, error
    other, _ = certificate(tmp_path_factory.mktemp("other"), "other")
    error = unanswered(secure(base, other))
    assert error.code() == grpc.StatusCode.UNAVAILABLE, error


def test_the_unmodified_qdrant_client_over_tls(base: str, tls: tuple[Path, Path]) -> None:
    cert_file, _ = tls
    # https=True for gRPC; the root it trusts given as qdrant-client takes it (grpc_options),
    # not through the process's GRPC_DEFAULT_SSL_ROOTS_FILE_PATH.
    alice = QdrantClient(
        host="127.0.0.1",
        port=int(base.rsplit(":", 1)[1]),
        grpc_port=GRPC[base],
        prefer_grpc=True,
        https=True,
        api_key=token("alice"),
        grpc_options={"root_certificates": cert_file.read_bytes()},
        check_compatibility=False,
        timeout=TIMEOUT,
    )
    name = "tls-client"
    assert alice.create_collection(
        name, vectors_config=qm.VectorParams(size=4, distance=qm.Distance.COSINE)
    )
    points = [
        qm.PointStruct(
            id=i,
            vector=[1.0, i, 2.0, 0.5],
            payload={"content": f"note {i}", "audience": r, "source": "notes.md"},
        )
        for i, r in ((1, ["alice"]), (2, ["alice", "bob"]))
    ]
    assert alice.upsert(name, points, wait=True).status == qm.UpdateStatus.COMPLETED
    assert alice.count(name).count == 2
    bob = QdrantClient(
        host="127.0.0.1",
        grpc_port=GRPC[base],
        prefer_grpc=True,
        https=True,
        api_key=token("bob"),
        grpc_options={"root_certificates": cert_file.read_bytes()},
        check_compatibility=False,
        timeout=TIMEOUT,
    )
    assert [p.id for p in bob.scroll(name)[0]] == [2]


# --- certificate files that cannot serve ----------------------------------------------


def refusal(tmp_path: Path, env: dict[str, str]) -> str:
    """`whose serve` with `env`: exit status 2 and the one line it prints."""
    command = [sys.executable, "-m", "sidecar", "serve", "--dev", "--data-dir", str(tmp_path)]
    port, ops_port, grpc_port = free_ports(3)
    command += ["--port", str(port), "--ops-port", str(ops_port), "--grpc-port", str(grpc_port)]
    result = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "WHOSE_LOG_LEVEL": "WARNING", **env},
        cwd=REPO,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_unusable_certificate_files_stop_the_start_in_one_line(
    tmp_path: Path, tls: tuple[Path, Path]
) -> None:
    cert_file, key_file = tls
    _, other_key = certificate(tmp_path, "other")
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    cert, key = "WHOSE_GRPC_TLS_CERT_FILE", "WHOSE_GRPC_TLS_KEY_FILE"

    # Before: gRPC's own lines on stderr, then "... cannot be bound: change WHOSE_GRPC_PORT".
    line = refusal(tmp_path / "garbage", {cert: str(garbage), key: str(key_file)})
    assert line == f"configuration error: {cert} {garbage} holds no PEM certificate"
    # The other refusals are the same ValueError, and the same one line (one start is ~3 s).
    mismatch = f"{key} {other_key} is not the unencrypted PEM private key of the certificate"
    mismatch += f" in {cert} (key values mismatch)"
    with pytest.raises(ValueError, match=f"^{re.escape(mismatch)}$"):
        tls_credentials(cert_file, other_key)
    # One setting of the two: tests/unit/test_grpc_api.py.


def test_each_unusable_file_is_named(tmp_path: Path, tls: tuple[Path, Path]) -> None:
    cert_file, key_file = tls
    missing = tmp_path / "missing.pem"
    with pytest.raises(ValueError, match=re.escape(f"CERT_FILE {missing} cannot be read")):
        tls_credentials(missing, key_file)
    with pytest.raises(ValueError, match=re.escape(f"KEY_FILE {tmp_path} cannot be read")):
        tls_credentials(cert_file, tmp_path)
    # An encrypted key (gRPC takes none): named, and OpenSSL never prompts for a password.
    encrypted = tmp_path / "encrypted.key"
    key = serialization.load_pem_private_key(key_file.read_bytes(), None)
    encrypted.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"secret"),
        )
    )
    with pytest.raises(ValueError, match=r"KEY_FILE .*encrypted\.key .*\(the key is encrypted\)"):
        tls_credentials(cert_file, encrypted)
    assert tls_credentials(cert_file, key_file) is not None
