"""The shape declaration, held to the policy's text: what a rule reads is never ignored.

The disclosure policy declares which record fields no rule reads (`shape.ignores`) and
which times the rules only compare with the instant asked about (`shape.instants`);
records alike in all else share a decision (policy/shape.py). A security team that adds
a rule reading an ignored field (`record.confidence < 0.5`) and forgets the list would
have records share a decision that one of them should not get. So the sidecar reads the
policy it loaded, every package the disclosure rules reach, and takes off the lists
whatever the text reads otherwise:

- an ignored field whose name appears as a field access (`.name`) or a string (`"name"`,
  an `object.get` key) is read: it stays in the shape. `id` is the exception the keying
  needs: `name[record.id] contains …` heads, `{record.id: …}` keys, lookups into the
  batch's own denial sets, and the ids of identities (`asker.id`);
- a variable read whole (`walk(record)`, `object.keys(r)`) or by a computed name
  (`object.get(r, name, …)`, `r[name]`) takes everything off both lists;
- an instant used other than compared (`time.parse_rfc3339_ns(x.at) <= t`), tested for
  presence, or tested for being unreadable is kept exact in the shape (arithmetic on it,
  an age, say, is not a comparison).

Taking a field off a list only makes shapes finer (a field kept exact is always sound),
so a wrong guess here costs sharing, never a decision. The text check is a net under the
declaration, not a proof: docs/design.md says what a policy author promises, and
tests/oracle/test_shapes.py checks the shipped policy on generated worlds.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from sidecar.policy.shape import Path, ShapeSpec

_ROOT = "whose.disclosure"
# Fields named `id` that are identities, not records.
_IDENTITIES = ("asker", "member", "identity", "person", "hearer", "writer", "teller", "principal")
_ID_USE = re.compile(r"([A-Za-z_][\w.]*)\.id\b")
_ID_KEYS = (
    # A rule head keyed by record: `name[record.id] contains reason if`.
    re.compile(r"^\s*\w+\[\s*[\w.]+\.id\s*\]\s*(contains|:=|=|if|\{)", re.M),
    # An object comprehension keyed by record: `{record.id: decision(record) | …}`.
    re.compile(r"\{\s*[\w.]+\.id\s*:"),
    # A record's own denials, looked up by its id.
    re.compile(r"object\.get\(\s*(denied_by_id|by_record)\s*,\s*[\w.]+\.id\s*,"),
)
# Whole-object reads of a variable (a record, for all the text says): whatever the
# declaration, every field may be read.
_OPAQUE = re.compile(
    r"\b(walk|json\.(filter|remove|patch|marshal|marshal_with_options)|yaml\.marshal"
    r"|object\.(keys|filter|remove|union|union_n|subset))\(\s*(?!data\.)[a-z_]\w*\s*[,)]"
    # A field looked up by a computed name (the batch's own denial sets aside).
    r"|object\.get\(\s*(?!data\.|denied_by_id\b|by_record\b)[a-z_]\w*\s*,\s*[a-z_]\w*\s*,"
    r"|(?<![.\w])[a-z_]\w*\[\s*[a-z_]\w*\s*\]"
)
_INSTANT_USES = (
    # Compared: `time.parse_rfc3339_ns(record.valid_at) <= t`, not after arithmetic.
    r"(?<![-+*/%]\s)(?<![-+*/%])time\.parse_rfc3339_ns\(\s*[\w.]+\.{name}\s*\)\s*(<=|<|>=|>)",
    # Unreadable: `not time.parse_rfc3339_ns(record.invalid_at)` alone on its line.
    r"not\s+time\.parse_rfc3339_ns\(\s*[\w.]+\.{name}\s*\)\s*$",
    # Present or absent: `record.invalid_at` / `not item.at`, alone or as a rule's body.
    r"(^|\bif)\s*(not\s+)?[\w.]+\.{name}\s*$",
)


@dataclass(frozen=True)
class Checked:
    """The declaration as the text bears it out, and what was taken off, and why."""

    spec: ShapeSpec
    kept: dict[str, str]


def check(spec: ShapeSpec, sources: Mapping[str, str]) -> Checked:
    """`spec` without what the disclosure rules (in `sources`, file name -> Rego) read."""
    code = _reachable(sources)
    opaque = _OPAQUE.search(code)
    if opaque is not None:
        why = f"a whole record may be read: {_line_of(code, opaque.start())}"
        every = {".".join(path): why for path in (*spec.ignores, *spec.instants)}
        return Checked(ShapeSpec((), ()), every)
    kept: dict[str, str] = {}
    ignores = _unread(spec.ignores, _read_ignored, code, kept)
    instants = _unread(spec.instants, _used_otherwise, code, kept)
    return Checked(ShapeSpec(ignores, instants), kept)


def _unread(
    paths: tuple[Path, ...],
    reason_of: Callable[[Path, str], str | None],
    code: str,
    kept: dict[str, str],
) -> tuple[Path, ...]:
    """The paths `reason_of` finds nothing against; the others go into `kept`, with why."""
    left = []
    for path in paths:
        reason = reason_of(path, code)
        if reason is None:
            left.append(path)
        else:
            kept[".".join(path)] = reason
    return tuple(left)


def _read_ignored(path: Path, code: str) -> str | None:
    # The field itself (its parents are read for their other fields).
    name = path[-1]
    if name == "id":
        line = _id_read(code)
        return None if line is None else f"read: {line}"
    quoted = rf"(\"{name}\"|`{name}`)"
    access = rf"\.\s*{name}\b|\[\s*{quoted}\s*\]|object\.get\([^)]*{quoted}"
    found = re.search(access, code)
    return None if found is None else f"read: {_line_of(code, found.start())}"


def _id_read(code: str) -> str | None:
    """The first use of a record's id other than as the key the batch needs."""
    spans = [(m.start(), m.end()) for pattern in _ID_KEYS for m in pattern.finditer(code)]
    for use in _ID_USE.finditer(code):
        receiver = use.group(1).split(".")[-1]
        if receiver in _IDENTITIES or use.group(1) in ("input.asker", "input.writer"):
            continue
        if any(a <= use.start() < b for a, b in spans):
            continue
        return _line_of(code, use.start())
    return None


def _used_otherwise(path: Path, code: str) -> str | None:
    name = path[-1]
    allowed = [re.compile(p.format(name=re.escape(name)), re.M) for p in _INSTANT_USES]
    covered = [(m.start(), m.end()) for pattern in allowed for m in pattern.finditer(code)]
    for use in re.finditer(rf"\.\s*{re.escape(name)}\b|\"{re.escape(name)}\"", code):
        if not any(a <= use.start() < b for a, b in covered):
            return f"used otherwise: {_line_of(code, use.start())}"
    return None


def _line_of(code: str, at: int) -> str:
    start = code.rfind("\n", 0, at) + 1
    end = code.find("\n", at)
    return code[start : end if end != -1 else len(code)].strip()


# --- which text: the disclosure packages and what they reach -------------------------


def _reachable(sources: Mapping[str, str]) -> str:
    """The code (comments and the shape declaration left out) of every package the
    disclosure package reaches by import or by `data.whose.…` reference."""
    packages: dict[str, list[str]] = {}
    for name, text in sources.items():
        if name.endswith("_test.rego"):
            continue
        code = _without_comments(text)
        found = re.search(r"^\s*package\s+([\w.]+)", code, re.M)
        if found:
            packages.setdefault(found.group(1), []).append(code)
    seen: set[str] = set()
    todo = [p for p in packages if p == _ROOT or p.startswith(_ROOT + ".")]
    while todo:
        package = todo.pop()
        if package in seen:
            continue
        seen.add(package)
        for code in packages[package]:
            for ref in re.findall(r"data\.(whose(?:\.\w+)+)", code):
                todo += [p for p in packages if ref == p or ref.startswith(p + ".")]
    return "\n".join(
        _without_declaration(code) for package in sorted(seen) for code in packages[package]
    )


def _without_comments(text: str) -> str:
    lines = []
    for line in text.splitlines():
        quoted = False
        for i, char in enumerate(line):
            if char == '"' and (i == 0 or line[i - 1] != "\\"):
                quoted = not quoted
            elif char == "#" and not quoted:
                line = line[:i]
                break
        lines.append(line.rstrip())
    return "\n".join(lines)


def _without_declaration(code: str) -> str:
    """The code without the `shape := {…}` rule, whose lists name the fields."""
    found = re.search(r"^shape\s*:?=\s*\{", code, re.M)
    if not found:
        return code
    depth, at = 0, found.end() - 1
    for at in range(found.end() - 1, len(code)):
        depth += {"{": 1, "}": -1}.get(code[at], 0)
        if depth == 0:
            break
    return code[: found.start()] + code[at + 1 :]
