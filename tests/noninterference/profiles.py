"""How much the noninterference property checks, per Hypothesis profile (tests/conftest.py).

`ci` (the default profile, what `make test` runs) fits in under a minute on two
cores: two thirds for the embedded backend, a third for fewer examples on a Qdrant
server (each store call crosses HTTP); `long` sends at least 50 requests per example,
so its 2 100 examples compare more than 100 000 request pairs:

    WHOSE_HYPOTHESIS_PROFILE=long .venv/bin/pytest tests/noninterference/test_property.py

WHOSE_NI_EXAMPLES, WHOSE_NI_CONTROL_EXAMPLES and WHOSE_NI_CONFIG_EXAMPLES
(test_configs.py) override the numbers of examples, WHOSE_NI_TENANTS the size of the
prepared directory (one tenant per example run, shrinking included). Read when asked,
not at import: a conftest imports this module before pytest's --hypothesis-profile
option is applied.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, Phase, settings

from tests.noninterference.strategies import Plan

# ci: 120 and 40 (500 and 150, then 250 and 75, as the suite was sized to fit in 12
# minutes in CI: the same property and strategies, fewer worlds per run; every example
# still draws a whole world and a request sequence, and the long profile is unchanged).
EXAMPLES = {"ci": 120, "long": 2100}
SERVER_EXAMPLES = {"ci": 40, "long": 600}
CONTROL_EXAMPLES = {"ci": 8, "long": 200}
# test_configs.py (policy data drawn per example; the embedded store only).
CONFIG_EXAMPLES = {"ci": 40, "long": 600}
# test_grants.py (grants and categories drawn per example; both store backends).
GRANT_EXAMPLES = {"ci": 30, "long": 500}
SIZES: dict[str, dict[str, tuple[int, int]]] = {
    "ci": {"ops": (1, 16)},
    "long": {"ops": (50, 70), "shared": (0, 6), "hidden": (1, 4)},
}


def profile() -> str:
    return settings.get_current_profile_name()


def plan() -> Plan:
    return Plan.from_env(**SIZES.get(profile(), SIZES["ci"]))


def examples(backend: str = "edge") -> int:
    table = SERVER_EXAMPLES if backend == "server" else EXAMPLES
    default = table.get(profile(), settings().max_examples)
    return int(os.environ.get("WHOSE_NI_EXAMPLES") or default)


def control_examples() -> int:
    return int(os.environ.get("WHOSE_NI_CONTROL_EXAMPLES") or CONTROL_EXAMPLES.get(profile(), 8))


def config_examples() -> int:
    default = CONFIG_EXAMPLES.get(profile(), CONFIG_EXAMPLES["ci"])
    return int(os.environ.get("WHOSE_NI_CONFIG_EXAMPLES") or default)


def grant_examples() -> int:
    default = GRANT_EXAMPLES.get(profile(), GRANT_EXAMPLES["ci"])
    return int(os.environ.get("WHOSE_NI_GRANT_EXAMPLES") or default)


def tenants() -> int:
    """Every example run takes a fresh tenant, and so does each run of shrinking (a
    few hundred at most) and each focused test. (A larger directory costs each
    local OPA more time to load at start.)"""
    default = max(3000, examples() + control_examples() + 1000)
    return int(os.environ.get("WHOSE_NI_TENANTS") or default)


def hypothesis_settings(examples: int) -> settings:
    """The properties' Hypothesis settings, `examples` of them."""
    return settings(
        max_examples=examples,
        deadline=None,
        # The explain phase prints fixtures and multi-line cases badly; the failure
        # message names the request, both answers and the world.
        phases=[phase for phase in Phase if phase is not Phase.explain],
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.filter_too_much,
            HealthCheck.large_base_example,
        ],
    )
