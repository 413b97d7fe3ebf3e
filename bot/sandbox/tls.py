"""A throw-away certificate authority and a server certificate for 127.0.0.1, made at start with `cryptography`.

Stand-ins whose real clients refuse plain HTTP (azure-core will not send a bearer token to a non-https URL) are
served over TLS with the server certificate; the client is given the CA file to verify it (no system trust store
changes, nothing leaves 127.0.0.1). A CA apart from the leaf keeps strict X.509 checks (Python 3.13's
VERIFY_X509_STRICT) satisfied."""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from bot.sandbox.server import serve


@dataclass(frozen=True)
class LocalTls:
    ca_file: str  # PEM of the CA: the client's connection_verify
    cert_file: str  # the server's certificate (uvicorn ssl_certfile)
    key_file: str  # its private key (uvicorn ssl_keyfile)
    directory: str


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def local_tls(directory: str | None = None) -> LocalTls:
    """A CA and a certificate for IP 127.0.0.1 signed by it, valid for a day, written as PEM files."""
    where = directory or tempfile.mkdtemp(prefix="gemma-sre-tls-")
    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_pub = ca_key.public_key()
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name("gemma-sre sandbox CA"))
        .issuer_name(_name("gemma-sre sandbox CA"))
        .public_key(ca_pub)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )  # keyCertSign, cRLSign
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_pub), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = (
        x509.CertificateBuilder()
        .subject_name(_name("127.0.0.1"))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(True, False, False, False, False, False, False, False, False), critical=True
        )  # digitalSignature
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_pub), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    out = LocalTls(
        ca_file=os.path.join(where, "ca.pem"),
        cert_file=os.path.join(where, "server.pem"),
        key_file=os.path.join(where, "server.key"),
        directory=where,
    )
    with open(out.ca_file, "wb") as f:
        f.write(ca.public_bytes(serialization.Encoding.PEM))
    with open(out.cert_file, "wb") as f:
        f.write(leaf.public_bytes(serialization.Encoding.PEM))
    fd = os.open(out.key_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
    return out


@contextmanager
def serve_tls(app: Any) -> Iterator[tuple[str, str]]:
    """Yield (https://127.0.0.1:PORT, CA file) while `app` is served over TLS with a fresh local CA: a client's
    base URL and its connection_verify. The certificates go when it stops."""
    tls = local_tls()
    try:
        with serve(app, ssl=(tls.cert_file, tls.key_file)) as url:
            yield url, tls.ca_file
    finally:
        shutil.rmtree(tls.directory, ignore_errors=True)
