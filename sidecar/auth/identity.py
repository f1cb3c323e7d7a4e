"""Who is asking, once verified: the identity every decision is made for, and what
counts as a name in it. Pure: where it comes from is tokens.py."""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

# Names (sub, tenant, each group, role, scope) and list claims are bounded: the
# policy input and every audit entry carry them.
MAX_NAME_CHARS = 200
MAX_LIST_ENTRIES = 100
# Audiences name groups as "group:<name>": a principal of that name would be
# admitted wherever the group is.
GROUP_PREFIX = "group:"


@dataclass(frozen=True)
class Identity:
    id: str
    tenant: str
    groups: tuple[str, ...] = ()
    roles: tuple[str, ...] = ()
    scopes: tuple[str, ...] = ()

    def policy_view(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "tenant": self.tenant,
            "groups": list(self.groups),
            "roles": list(self.roles),
            "scopes": list(self.scopes),
        }


class Refused(Exception):
    """A token or dev identity that is not accepted, with the reason code for the 401."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def is_name(value: Any) -> TypeGuard[str]:
    # A blank or padded name would name nobody, or someone else to a stricter reader.
    return isinstance(value, str) and 0 < len(value) <= MAX_NAME_CHARS and value == value.strip()


def person_name(name: str) -> str:
    """The one form of a person's or a group's name: Unicode compatibility-normalised
    (NFKC) and case-folded, as Unicode's NFKC_Casefold. "Alice", "alice" and "alice"
    in full-width letters are one person wherever a name is read: in a token, a dev
    header, a record's observer, audience, participants or minds, and a query's filter.

    Folded, not refused (issue 35): an extractor names people as the text it reads
    spells them, and cannot know the case an identity provider keeps; and an
    attribution ("alice believes that ...") is read by people and models, for whom two
    names that differ only so are the same name: kept apart they are a way to pass one
    person off as another. What follows is that an identity provider's subjects must
    be distinct once folded (docs/identity.md)."""
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", name).casefold())


def is_principal(value: Any) -> TypeGuard[str]:
    return is_name(value) and not value.startswith(GROUP_PREFIX)


def dev_identity(
    asker: str, tenant: str, groups: Sequence[str] = (), roles: Sequence[str] = ()
) -> Identity:
    """A dev identity (headers, or `whose mcp --dev`), held to the rules of a token's
    claims: names in their one form (`person_name`), no "group:" asker, names unpadded
    and bounded, lists bounded, a group named with or without its prefix.
    Refused("invalid_dev_identity") otherwise."""
    asker = person_name(asker)
    bare = tuple(person_name(group).removeprefix(GROUP_PREFIX) for group in groups)
    if (
        not is_principal(asker)
        or not is_name(tenant)
        or len(groups) > MAX_LIST_ENTRIES
        or len(roles) > MAX_LIST_ENTRIES
        or not all(is_name(name) for name in (*bare, *roles))
    ):
        raise Refused("invalid_dev_identity")
    return Identity(id=asker, tenant=tenant, groups=bare, roles=tuple(roles))
