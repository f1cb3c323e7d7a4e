"""Who the load runs as, and the request headers that say so.

Two modes, chosen by configuration (no code change between them):

- **dev** (default): the `X-Whose-Asker` / `X-Whose-Tenant` headers that `whose serve --dev`
  accepts on loopback. Tenant from `WHOSE_LOAD_TENANT` (default `loadtest`).
- **bearer**: as soon as any token is configured, every identity must have one, and requests
  carry `Authorization: Bearer <token>` (the tenant is then the token's claim). Tokens come
  from `WHOSE_LOAD_TOKEN_<NAME>` (name upper-cased, `-` as `_`: `WHOSE_LOAD_TOKEN_EXTRACTOR_BOT`)
  or from a JSON file `{"alice": "eyJ…", …}` named by `WHOSE_LOAD_TOKENS_FILE`; the
  environment wins over the file.

Imported by the locustfile and the seeding CLI alike; it does not import locust.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

DEFAULT_ASKERS = ("alice", "bob", "carol")
DEFAULT_EXTRACTOR = "extractor-bot"
DEFAULT_GROUP = "group:launch-team"
# A tenant of its own (the demo directory gives it the demo tenant's people), so a load run
# against `make serve` writes nothing into `acme`, where the README's story lives.
TENANT = "loadtest"


def token_variable(name: str) -> str:
    return "WHOSE_LOAD_TOKEN_" + name.upper().replace("-", "_")


@dataclass(frozen=True)
class Identities:
    """The principals of the mix and how to present each one."""

    askers: tuple[str, ...]
    extractor: str
    group: str
    tenant: str
    tokens: Mapping[str, str]

    @property
    def mode(self) -> str:
        return "bearer" if self.tokens else "dev"

    def headers(self, name: str) -> dict[str, str]:
        if not self.tokens:
            return {"X-Whose-Asker": name, "X-Whose-Tenant": self.tenant}
        token = self.tokens.get(name)
        if token is None:
            raise LookupError(f"no token for {name}: set {token_variable(name)}")
        return {"Authorization": f"Bearer {token}"}

    def can_act_as(self, name: str) -> bool:
        return not self.tokens or name in self.tokens

    def check(self) -> None:
        """In bearer mode, every principal of the mix needs a token: fail before the run."""
        missing = [n for n in (*self.askers, self.extractor) if not self.can_act_as(n)]
        if missing:
            names = ", ".join(token_variable(n) for n in missing)
            raise SystemExit(f"bearer mode, but no token for {missing}: set {names}")


def from_env(env: Mapping[str, str] | None = None) -> Identities:
    env = os.environ if env is None else env
    askers = tuple(
        a.strip() for a in env.get("WHOSE_LOAD_ASKERS", ",".join(DEFAULT_ASKERS)).split(",")
    )
    askers = tuple(a for a in askers if a)
    if not askers:
        raise SystemExit("WHOSE_LOAD_ASKERS names no principal")
    extractor = env.get("WHOSE_LOAD_EXTRACTOR", DEFAULT_EXTRACTOR)
    tokens: dict[str, str] = {}
    if file := env.get("WHOSE_LOAD_TOKENS_FILE"):
        loaded = json.loads(Path(file).read_text())
        if not isinstance(loaded, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in loaded.items()
        ):
            raise SystemExit(f"{file}: expected a JSON object of principal -> token")
        tokens.update(loaded)
    for name in (*askers, extractor):
        if token := env.get(token_variable(name), "").strip():
            tokens[name] = token
    return Identities(
        askers=askers,
        extractor=extractor,
        group=env.get("WHOSE_LOAD_GROUP", DEFAULT_GROUP),
        tenant=env.get("WHOSE_LOAD_TENANT", TENANT),
        tokens=tokens,
    )
