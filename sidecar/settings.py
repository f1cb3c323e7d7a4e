"""Configuration: `WHOSE_*` environment variables, overridden by CLI flags."""

from __future__ import annotations

import ipaddress
import shutil
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

REPO_ROOT = Path(__file__).resolve().parent.parent
# The operations listener's default port, from the API's: 8080 -> 9180.
OPS_PORT_OFFSET = 1100
# Qdrant's gRPC port, which qdrant-client dials with prefer_grpc=True by default.
GRPC_PORT = 6334


def _default_opa_library() -> Path:
    # `make install` builds OPA's evaluator as a shared library into bin/ (native/linkedopa).
    return REPO_ROOT / "bin" / "libwhoseopa.so"


def _default_opa_binary() -> Path:
    # `make` builds a pinned OPA into bin/; fall back to one on PATH.
    local = REPO_ROOT / "bin" / "opa"
    if local.exists():
        return local
    return Path(shutil.which("opa") or local)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="WHOSE_", extra="ignore")

    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535)
    # The operations listener (health, readiness, metrics): never the API's port, so
    # per-record metrics stay off the listener callers reach. Default host: `host`;
    # default port: the API's + OPS_PORT_OFFSET (9180 beside 8080), so moving the API
    # (`WHOSE_PORT=18080`) moves both and a second sidecar on one machine needs one
    # setting. Read it as `operations_port`.
    ops_host: str | None = None
    ops_port: int | None = Field(default=None, ge=0, le=65535)
    # Qdrant's gRPC API (sidecar/grpc_api/), on `host`: Qdrant's own 6334 by default,
    # the port a client with `prefer_grpc=True` dials unless told another, so a stack
    # changes only its URL; `off` (or `none`, or empty) serves none. A fixed port, not
    # derived from the API's: a client assumes 6334 whatever the REST port, so a second
    # sidecar on one machine names its own (and its clients their `grpc_port`).
    grpc_port: int | None = Field(default=GRPC_PORT, ge=0, le=65535)
    # TLS for the gRPC listener: both files (PEM) or neither (plaintext; put a
    # TLS-terminating proxy in front off loopback, docs/rag-proxy.md).
    grpc_tls_cert_file: Path | None = None
    grpc_tls_key_file: Path | None = None
    data_dir: Path = Path("data")
    # Header identity (X-Whose-Asker ...) for local development, loopback only.
    dev: bool = False
    # The security team's console (http/console.py): off, or on the operations or the
    # API listener; either way every page needs an auditor's or policy admin's token.
    console: Literal["off", "ops", "api"] = "off"
    # Worker processes behind the two listeners (workers.py); more than one needs the
    # server store and Redis.
    workers: int = Field(default=1, ge=1, le=64)

    # Policy: an OPA server URL, or None for the embedded default's own OPA: OPA's
    # evaluator linked into this process ("linked", policy/linked_opa.py), or a local
    # `opa run --server` on a private socket ("server", policy/local_opa.py).
    opa_url: str | None = None
    local_opa: Literal["linked", "server"] = "linked"
    opa_library: Path = Field(default_factory=_default_opa_library)
    opa_binary: Path = Field(default_factory=_default_opa_binary)
    policy_dir: Path = REPO_ROOT / "rego"
    opa_timeout_s: float = Field(default=1.0, gt=0)

    # Store: "edge" keeps Qdrant's engine in-process under data_dir; "server" talks to
    # a Qdrant server or cluster at qdrant_url.
    store: Literal["edge", "server"] = "edge"
    # One URL, or several nodes' URLs separated by commas: a call that fails on one
    # node is tried again on the next (store/server.py).
    qdrant_url: str | None = None
    qdrant_api_key: SecretStr | None = None
    # A collection the sidecar creates: shards (None: Qdrant's default, one per node
    # in a cluster), copies of each shard, and how many must take a write.
    qdrant_shards: int | None = Field(default=None, ge=1, le=1000)
    qdrant_replication: int = Field(default=1, ge=1, le=100)
    qdrant_write_consistency: int = Field(default=1, ge=1, le=100)
    # One call to Qdrant (whole seconds: qdrant-client rounds up), and how many more
    # times a transient failure is tried (writes only when nothing was sent).
    qdrant_timeout_s: int = Field(default=5, ge=1, le=60)
    qdrant_retries: int = Field(default=2, ge=0, le=5)
    collection: str = "whose_memories"
    # Stack collections (store/stacks.py: a RAG stack's own collections, with its own
    # vectors) one tenant may have at once; creating one more is refused by name.
    max_collections: int = Field(default=64, ge=1, le=10_000)
    # The dense vectors' dimension: the hashing embedder's, or (set by embed_dim) the
    # configured model's.
    vector_size: int = Field(default=384, ge=8, le=4096)

    # Text embedding (sidecar/embed/): an OpenAI-compatible endpoint (embed_url: the base
    # URL, requests go to <url>/embeddings), or an ONNX model in a local folder
    # (embed_model_dir, in-process through fastembed), else the offline hashing
    # embedder. The model and dimension are recorded with the collection.
    embed_url: str | None = None
    embed_model: str | None = None
    embed_api_key: SecretStr | None = None
    embed_dim: int | None = Field(default=None, ge=8, le=4096)
    embed_model_dir: Path | None = None
    # One request to the endpoint, how many more times a transient failure is tried,
    # and texts per request (a write's records are embedded in batches of this many).
    embed_timeout_s: float = Field(default=10.0, gt=0, le=120)
    embed_retries: int = Field(default=2, ge=0, le=5)
    embed_batch: int = Field(default=64, ge=1, le=2048)
    optimize_interval_s: float = Field(default=10.0, gt=0)
    # Vector search (both backends, store/__init__.py `Search`): exact when the filter
    # matches at most search_exact_below points (0: Qdrant decides alone), else HNSW
    # with beam width search_hnsw_ef (None: Qdrant's default, 100).
    search_exact_below: int = Field(default=20_000, ge=0, le=10_000_000)
    search_hnsw_ef: int | None = Field(default=None, ge=1, le=10_000)
    # A search whose filter admits many points first looks at the query's own
    # neighbourhood (store/planner.py, both backends); one it cannot prove is exact
    # up to search_unproven_exact_below points (about 40 ms at 90 000 of 384
    # dimensions on the 2-core bench machine: docs/performance.md), above it HNSW.
    search_neighbourhood: bool = True
    search_unproven_exact_below: int = Field(default=200_000, ge=0, le=10_000_000)
    # An exact search of many points on the embedded engine first scans under the
    # asker's audience alone, one indexed condition, and proves its answer from the
    # nearest of those (store/planner.py, "the sieve"); false: the whole filter at once.
    search_sieve: bool = True
    # The embedded engine's search threads. 1: a search runs on the thread that asks,
    # which holds the GIL for the whole call anyway (bench/edge_gil.py); a pool split
    # each search across threads that only the engine could use, and cost 0.5-1.5 ms
    # of CPU a recall more on 2 cores, for no lower latency (docs/performance.md).
    search_threads: int = Field(default=1, ge=1, le=256)
    # Hybrid search (store/hybrid.py): the weight of BM25's share against the dense
    # score; None: 4.0 with the hashing embedder, 1.0 with a model (bench/retrieval.py).
    lexical_weight: float | None = Field(default=None, ge=0, le=100)

    # Redis: supersession locks shared by replicas. Unset: in-process locks, which is
    # right only while a single process owns the store (the embedded default).
    redis_url: str | None = None
    lock_ttl_s: float = Field(default=10.0, gt=0)
    lock_wait_s: float = Field(default=5.0, gt=0)

    # Decision cache: in Redis when redis_url is set, else in-process (cache_size entries).
    # A cached decision is reused within one time bucket at most (see policy/cache.py).
    cache_size: int = Field(default=100_000, ge=0)
    cache_bucket_s: float = Field(default=5.0, gt=0, le=3600)
    # Decide once for records the policy cannot tell apart (policy/shape.py): what a
    # decision reads is computed from the compiled policy (policy/readset.py), and a
    # policy whose reads cannot be bounded shares nothing (docs/design.md, "Deciding
    # shapes"). False decides and caches every record alone.
    decide_shapes: bool = True

    # Audit log: a Redis Stream trimmed to about audit_maxlen entries, or without Redis
    # data_dir/audit.sqlite3 holding at most audit_max_entries (oldest deleted first);
    # audit_queue bounds what waits to be written.
    audit_stream: str = "whose:audit"
    audit_maxlen: int = Field(default=1_000_000, ge=1)
    audit_max_entries: int = Field(default=100_000, ge=1)
    audit_queue: int = Field(default=10_000, ge=1)
    # While Redis is down, entries wait in data_dir/audit-spill.jsonl up to this size;
    # past it they are dropped and counted (a full volume would take the pod with it).
    audit_spill_max_bytes: int = Field(default=32 * 2**20, ge=0)

    # Logs: one JSON object per line (with decision_id on disclosures), or plain text;
    # "auto": text when stderr is a terminal (a person reads it), JSON otherwise (a
    # collector does).
    log_format: Literal["auto", "json", "text"] = "auto"
    log_level: str = "INFO"

    # Recall bounds: the first round fetches about 1.5 * limit / (the asker's recent
    # allow rate) candidates, or limit * overfetch_factor before there is a rate;
    # each further round doubles, until max_rounds or max_candidates stops it.
    overfetch_factor: int = Field(default=4, ge=1, le=50)
    max_rounds: int = Field(default=4, ge=1, le=10)
    max_candidates: int = Field(default=1000, ge=1, le=10_000)
    max_limit: int = Field(default=100, ge=1, le=1000)
    # Minds a view may nest after its holder (A's view of B's view of C's …), in
    # records, recall's `observed` and `minds`; at least 4 (orders 0-4 of the
    # theory-of-mind benchmarks). `max_mind_views`: the views one `minds` answer,
    # or one recall of a chain of minds, derives at most (a 16-witness event implies
    # 16 · 15⁴ views of depth 4; a chain without an observer, one a hearer).
    max_mind_depth: int = Field(default=4, ge=4, le=16)
    max_mind_views: int = Field(default=1000, ge=10, le=10_000)
    # Derive a store filter from the policy (OPA's Compile API); off: over-fetch only.
    pushdown: bool = True
    # Largest request body accepted (413 body_too_large above it): room for a batch
    # of MAX_BATCH records with 384-dimension vectors; raise it with vector_size.
    max_body_bytes: int = Field(default=16 * 2**20, ge=1024)
    # The proxy's count examines at most this many matching points (see http/qdrant/routes.py).
    max_count_scan: int = Field(default=10_000, ge=1, le=1_000_000)

    # The query engine (reads/query/, docs/design.md "The query engine"): Qdrant's Query
    # API over what the asker may see. Each bound is checked on the request before the
    # store is asked (400 query_too_costly, naming it): how deep prefetches nest and
    # how many there are in one query; a level's limit (a prefetch's, MMR's
    # candidates); the candidates one request may examine (decide) in all, across its
    # branches; point ids and vectors used as examples; queries in one batch; groups
    # and points per group; values one facet returns, and points one facet examines.
    query_max_depth: int = Field(default=4, ge=1, le=64)
    query_max_prefetches: int = Field(default=16, ge=1, le=256)
    query_max_level_limit: int = Field(default=1000, ge=1, le=10_000)
    query_max_candidates: int = Field(default=5000, ge=1, le=100_000)
    query_max_examples: int = Field(default=64, ge=1, le=1000)
    query_max_batch: int = Field(default=16, ge=1, le=256)
    query_max_groups: int = Field(default=100, ge=1, le=10_000)
    query_max_group_size: int = Field(default=100, ge=1, le=10_000)
    facet_max_limit: int = Field(default=1000, ge=1, le=100_000)
    facet_max_scan: int = Field(default=10_000, ge=1, le=1_000_000)

    # Erasure requests (writes/erasure_requests.py): records one step reads, and how
    # often the server looks for requests left running (by a restart, another replica).
    erasure_step: int = Field(default=200, ge=1, le=1000)
    erasure_poll_s: float = Field(default=30.0, gt=0)
    # Grants (policy/grants.py): how many one subject may have at once (each read
    # passes the grants that may reach its hearers to the policy).
    grants_per_subject: int = Field(default=100, ge=1, le=1000)
    # Forget rules (writes/forget_rules.py): how many standing rules one person may have
    # set (every write of the tenant is matched against them all).
    forget_rules_per_setter: int = Field(default=100, ge=1, le=1000)
    # Conversations (writes/membership.py): the membership events one writer may record
    # in one conversation (every observation in it reads them all).
    conversation_max_events: int = Field(default=10_000, ge=1, le=100_000)
    # Retention (writes/retention.py): seconds between two sweeps in the server (0: no
    # sweep; `whose sweep` still runs one), and the records one sweep may erase and
    # examine in all.
    retention_interval_s: float = Field(default=3600.0, ge=0)
    retention_max_erased: int = Field(default=1000, ge=1, le=100_000)
    retention_max_examined: int = Field(default=10_000, ge=1, le=1_000_000)

    # Verified identity, from exactly one key source: an HS256 secret, a PEM public
    # key, a JWKS file, a JWKS URL, or OpenID Connect discovery from jwt_issuer.
    jwt_hs256_secret: SecretStr | None = None
    jwt_public_key_file: Path | None = None
    jwt_jwks_file: Path | None = None
    jwt_jwks_url: str | None = None
    jwt_oidc: bool = False
    jwt_issuer: str | None = None
    jwt_audience: str | None = None
    # A longer bearer token is refused (401 token_too_large) before it is parsed.
    jwt_max_token_bytes: int = Field(default=8192, ge=1024, le=65536)
    # Remote keys (JWKS URL or OIDC): how long a fetched key set is used before it is
    # fetched again, the least time between two fetches (an unknown kid fetches at
    # once, but no more often), and the bounds of one fetch.
    jwt_jwks_max_age_s: float = Field(default=300.0, gt=0)
    jwt_jwks_min_refresh_s: float = Field(default=30.0, ge=0)
    jwt_jwks_timeout_s: float = Field(default=5.0, gt=0, le=60)
    jwt_jwks_max_bytes: int = Field(default=262_144, ge=1024, le=16 * 2**20)

    # The MCP endpoint's public URL (`https://memory.example.com/mcp`), named in its
    # protected-resource metadata; unset: on a loopback bind the loopback name the
    # request came in on, elsewhere the bind address (an unchecked Host header is
    # never echoed). Set it behind a proxy that terminates TLS or rewrites the host.
    mcp_resource_url: str | None = None

    @property
    def operations_port(self) -> int:
        """The operations listener's port: WHOSE_OPS_PORT, else the API's + the offset
        (an ephemeral port when the API's is)."""
        if self.ops_port is not None:
            return self.ops_port
        return self.port + OPS_PORT_OFFSET if self.port else 0

    @field_validator("grpc_port", mode="before")
    @classmethod
    def _grpc_off(cls, value: object) -> object:
        if isinstance(value, str) and value.strip().lower() in ("", "off", "none"):
            return None
        return value

    @model_validator(mode="after")
    def _grpc_tls_pair(self) -> Settings:
        if (self.grpc_tls_cert_file is None) != (self.grpc_tls_key_file is None):
            raise ValueError(
                "set both WHOSE_GRPC_TLS_CERT_FILE and WHOSE_GRPC_TLS_KEY_FILE, or neither"
            )
        return self

    @model_validator(mode="after")
    def _operations_port_exists(self) -> Settings:
        if self.operations_port > 65535:
            raise ValueError(
                f"WHOSE_PORT={self.port} leaves no default for WHOSE_OPS_PORT"
                f" ({self.port} + {OPS_PORT_OFFSET} > 65535): set WHOSE_OPS_PORT"
            )
        same_host = (self.ops_host or self.host) == self.host
        if same_host and self.port and self.operations_port == self.port:
            raise ValueError(
                f"WHOSE_OPS_PORT={self.port} is WHOSE_PORT too: the API and operations"
                " listeners need ports of their own"
            )
        return self

    @model_validator(mode="after")
    def _dense_dimension(self) -> Settings:
        """A configured model's dimension is the vectors' (`WHOSE_VECTOR_SIZE` may only
        repeat it); the hashing embedder keeps `vector_size`."""
        if self.embed_dim is not None:
            if "vector_size" in self.model_fields_set and self.vector_size != self.embed_dim:
                raise ValueError(
                    f"WHOSE_VECTOR_SIZE={self.vector_size} but WHOSE_EMBED_DIM={self.embed_dim}:"
                    " set only WHOSE_EMBED_DIM"
                )
            self.vector_size = self.embed_dim
        return self


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
