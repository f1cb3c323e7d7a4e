"""The security team's console: a few server-rendered pages over the security surface
(oversight.py), off unless an operator turns it on (`WHOSE_CONSOLE=ops` or `api`).

Pages: the audit as a filterable table, a decision explained rule by rule, the policy
in force and its packages, and a candidate policy's impact. Each page is one call of
the surface, which checks the role (`auditor` for the audit, `policy-admin` for the
rest) and stays inside the caller's tenant, exactly as the JSON routes do; so the
console shows nothing a caller could not read through the API: ids, names, reasons,
never a record's content.

Identity: the login form takes a token (the API's bearer token), verifies it as the
API does, and keeps it in an HttpOnly, SameSite=Strict cookie scoped to /console; every
page verifies it again (an expired token ends the session). Every form that changes
something (an upload, logging out) also carries a second random value that must equal
a cookie's (double submit), so another site cannot post one even where SameSite is not
honoured. Every value shown is escaped (`html.escape`): a record id, an asker's name
or a reason holding markup is shown as text. The pages carry a Content-Security-Policy
that allows no script at all.
"""

from __future__ import annotations

import html
import json
import secrets
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Annotated, get_args
from urllib.parse import urlencode

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import ValidationError

from sidecar.audit import Outcome
from sidecar.auth.identity import Identity, Refused
from sidecar.errors import InvalidRequest, Unauthenticated, WhoseError
from sidecar.messages import ExplainRequest, Flip, FlipGroup, ImpactReport, ImpactWindow
from sidecar.oversight import AUDITOR, POLICY_ADMIN
from sidecar.services import Services

PREFIX = "/console"
SESSION = "whose_console"
CSRF = "whose_console_csrf"
# Starlette's bound on one uploaded part (the candidate bundle).
MAX_UPLOAD_BYTES = 32 * 1024 * 1024
_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
_STYLE = """body{font-family:system-ui,sans-serif;margin:1.5rem;color:#222}
table{border-collapse:collapse;margin:.5rem 0}td,th{border:1px solid #ccc;padding:.25rem .5rem;
text-align:left;vertical-align:top;font-size:.9rem}th{background:#f3f3f3}nav a{margin-right:1rem}
.disclosed{background:#fde2e2}.withheld{background:#e2ecfd}code{font-size:.85rem}
form.filters input{width:9rem}"""


def e(value: object) -> str:
    """Escaped for HTML text and attribute values alike."""
    return html.escape("" if value is None else str(value), quote=True)


def _page(title: str, body: str, status: int = 200, nav: bool = True) -> HTMLResponse:
    links = (
        '<nav><a href="/console/">audit</a><a href="/console/policy">policy in force</a>'
        '<a href="/console/impact">impact of a candidate</a></nav>'
        if nav
        else ""
    )
    document = (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{e(title)} · whose'
        f"</title><style>{_STYLE}</style></head><body>{links}<h1>{e(title)}</h1>{body}"
        "</body></html>"
    )
    return HTMLResponse(document, status_code=status, headers=_HEADERS)


def _table(head: Sequence[str], rows: Iterable[Sequence[str]], cls: str = "") -> str:
    """A table of cells already escaped (or built from escaped parts)."""
    header = "".join(f"<th>{e(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{e(cls)}"><thead><tr>{header}</tr></thead><tbody>{body}</tbody></table>'


def _refused(exc: WhoseError) -> HTMLResponse:
    from sidecar.http.refusals import NATIVE_STATUS

    status = next(NATIVE_STATUS[c] for c in type(exc).__mro__ if c in NATIVE_STATUS)
    if isinstance(exc, Unauthenticated):
        body = (
            '<p>Not signed in, or the token has expired. <a href="/console/login">Sign in</a>.</p>'
        )
    else:
        reasons = ", ".join(e(r) for r in exc.reasons)
        body = f"<p>Refused: <code>{e(exc.code)}</code> {reasons}</p>"
    return _page("refused", body, status)


def router(services: Callable[[], Services | None]) -> APIRouter:
    """The console's pages, reaching the services through `services` (None while the
    sidecar starts)."""
    pages = APIRouter(prefix=PREFIX, include_in_schema=False)

    def running() -> Services:
        svc = services()
        if svc is None:
            raise WhoseError("the sidecar is starting")
        return svc

    async def caller(request: Request) -> Identity:
        token = request.cookies.get(SESSION)
        if not token:
            raise Unauthenticated("missing_token")
        try:
            return await running().authenticate.verify(token)
        except Refused as refused:
            raise Unauthenticated(refused.reason) from None

    def csrf_field(request: Request) -> str:
        return f'<input type="hidden" name="csrf" value="{e(request.cookies.get(CSRF, ""))}">'

    def check_csrf(request: Request, sent: str) -> None:
        kept = request.cookies.get(CSRF, "")
        if not kept or not secrets.compare_digest(kept.encode(), sent.encode()):
            raise InvalidRequest("csrf", ["csrf_token_mismatch"])

    @pages.get("/login")
    async def login_form() -> HTMLResponse:
        return _page(
            "sign in",
            '<form method="post" action="/console/login"><label>Token (auditor or '
            'policy-admin) <input type="password" name="token" autocomplete="off" required>'
            '</label> <button type="submit">Sign in</button></form>',
            nav=False,
        )

    @pages.post("/login")
    async def login(request: Request, token: Annotated[str, Form()]) -> Response:
        try:
            who = await running().authenticate.verify(token.strip())
        except Refused as refused:
            return _refused(Unauthenticated(refused.reason))
        if not {AUDITOR, POLICY_ADMIN} & set(who.roles):
            # Nothing is kept: no cookie for a token that could read no page.
            return _page("refused", "<p>This token holds neither role.</p>", 403, nav=False)
        answer = RedirectResponse("/console/", status_code=303, headers=_HEADERS)
        secure = request.url.scheme == "https"
        for name, value, http_only in (
            (SESSION, token.strip(), True),
            (CSRF, secrets.token_urlsafe(32), False),
        ):
            answer.set_cookie(
                name,
                value,
                httponly=http_only,
                samesite="strict",
                secure=secure,
                path=PREFIX,
            )
        return answer

    @pages.post("/logout")
    async def logout(request: Request, csrf: Annotated[str, Form()] = "") -> Response:
        try:
            check_csrf(request, csrf)
        except WhoseError as exc:
            return _refused(exc)
        answer = RedirectResponse("/console/login", status_code=303, headers=_HEADERS)
        for name in (SESSION, CSRF):
            answer.delete_cookie(name, path=PREFIX)
        return answer

    @pages.get("/")
    async def audit(
        request: Request,
        asker: str = "",
        record: str = "",
        outcome: str = "",
        reason: str = "",
        since: str = "",
        until: str = "",
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    ) -> HTMLResponse:
        try:
            who = await caller(request)
            wanted: Outcome | None = None
            for known in get_args(Outcome):
                if outcome == known:
                    wanted = known
            if outcome and wanted is None:
                raise InvalidRequest("outcome", ["unknown_outcome"])
            page = await running().oversight.audit(
                who,
                asker=asker or None,
                record=record or None,
                outcome=wanted,
                since=_instant(since),
                until=_instant(until),
                limit=limit,
            )
        except (WhoseError, ValueError) as exc:
            return _refused(exc if isinstance(exc, WhoseError) else InvalidRequest(str(exc)))
        rows = []
        for entry in page.entries:
            decided = [(r, "allowed") for r in entry.allowed] + [
                (r, "withheld") for r in entry.withheld
            ]
            for audited, outcome_ in decided:
                if reason and not any(reason in r for r in audited.reasons):
                    continue
                why = ""
                if entry.purpose in ("recall", "get", "history"):
                    query = {
                        "record": audited.id,
                        "asker": entry.asker,
                        "purpose": entry.purpose,
                        "as_of": (entry.as_of or entry.time).isoformat(),
                        "audience": ",".join(entry.audience),
                    }
                    why = f'<a href="/console/why?{e(urlencode(query))}">why</a>'
                rows.append(
                    [
                        e(entry.time.isoformat(timespec="seconds")),
                        e(entry.asker),
                        e(entry.purpose),
                        e(entry.route),
                        f"<code>{e(audited.id)}</code>",
                        e(outcome_),
                        e(audited.usable_as),
                        "<br>".join(e(r) for r in audited.reasons),
                        why,
                    ]
                )
        filters = "".join(
            f'<label>{e(name)} <input name="{e(name)}" value="{e(value)}"></label> '
            for name, value in (
                ("asker", asker),
                ("record", record),
                ("outcome", outcome),
                ("reason", reason),
                ("since", since),
                ("until", until),
            )
        )
        form = (
            f'<form class="filters" method="get" action="/console/">{filters}'
            '<button type="submit">Filter</button></form>'
            "<p><small>outcome: allowed or withheld; since and until: RFC 3339. The audit "
            "keeps each decision's reasons; the rule behind them is on its why page."
            "</small></p>"
        )
        head = ["time", "asker", "purpose", "route", "record", "outcome", "use", "reasons", ""]
        logout = (
            f'<form method="post" action="/console/logout">{csrf_field(request)}'
            '<button type="submit">Sign out</button></form>'
        )
        return _page(f"audit of {who.tenant}", form + _table(head, rows, "audit") + logout)

    @pages.get("/why")
    async def why(
        request: Request,
        record: str,
        asker: str,
        purpose: str = "recall",
        as_of: str = "",
        audience: str = "",
    ) -> HTMLResponse:
        try:
            who = await caller(request)
            asked = ExplainRequest.model_validate(
                {
                    "asker": asker,
                    "record_id": record,
                    "purpose": purpose,
                    "as_of": as_of or None,
                    "audience": [a for a in audience.split(",") if a],
                }
            )
            explained = await running().oversight.explain(who, asked)
        except ValidationError:
            return _refused(InvalidRequest("invalid", ["invalid_request"]))
        except WhoseError as exc:
            return _refused(exc)
        decision = explained.decision
        verdict = "allowed" if decision.allow else "withheld"
        summary = _table(
            ["record", "asker", "purpose", "as of", "decision", "use", "reasons", "revision"],
            [
                [
                    f"<code>{e(record)}</code>",
                    e(asker),
                    e(purpose),
                    e(as_of),
                    e(verdict),
                    e(decision.usable_as),
                    "<br>".join(e(r) for r in decision.reasons),
                    e(explained.policy_revision),
                ]
            ],
            "decision",
        )
        rules = _table(
            ["rule", "reasons"],
            [[e(r.rule), "<br>".join(e(x) for x in r.reasons)] for r in explained.rules],
            "rules",
        )
        shown = json.dumps(explained.input, indent=1, sort_keys=True)
        return _page(
            "why",
            summary
            + "<h2>rule by rule</h2>"
            + rules
            + "<h2>what the policy read (no content)</h2>"
            + f"<pre>{e(shown)}</pre>",
        )

    @pages.get("/policy")
    async def policy(request: Request) -> HTMLResponse:
        try:
            found = await running().oversight.policy_in_force(await caller(request))
        except WhoseError as exc:
            return _refused(exc)
        packages = _table(
            ["package", "what it is for"],
            [[f"<code>{e(p.name)}</code>", e(p.description)] for p in found.packages],
            "packages",
        )
        return _page(
            "policy in force",
            f'<p>revision <code class="revision">{e(found.revision)}</code></p>{packages}',
        )

    @pages.get("/impact")
    async def impact_form(request: Request) -> HTMLResponse:
        try:
            running().oversight.may_analyse(await caller(request))
        except WhoseError as exc:
            return _refused(exc)
        return _page("impact of a candidate", _impact_form(csrf_field(request)))

    @pages.post("/impact")
    async def impact(request: Request) -> HTMLResponse:
        try:
            who = await caller(request)
            form = await request.form(max_files=1, max_fields=20, max_part_size=MAX_UPLOAD_BYTES)
            check_csrf(request, str(form.get("csrf") or ""))
            upload = form.get("bundle")
            if upload is None or isinstance(upload, str):
                raise InvalidRequest("bundle", ["bundle_required"])
            window = ImpactWindow(
                since=_instant(str(form.get("since") or "")),
                until=_instant(str(form.get("until") or "")),
                asker=str(form.get("asker") or "") or None,
                max_decisions=int(str(form.get("max_decisions") or 1000)),
            )
            built = await running().oversight.impact(who, await upload.read(), window)
        except WhoseError as exc:
            return _refused(exc)
        except (ValueError, ValidationError):
            return _refused(InvalidRequest("invalid", ["invalid_request"]))
        return _page("impact of a candidate", _report(built) + _impact_form(csrf_field(request)))

    return pages


def _instant(value: str) -> datetime | None:
    value = value.strip()
    return datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None


def _impact_form(csrf: str) -> str:
    return (
        '<form method="post" action="/console/impact" enctype="multipart/form-data">'
        f"{csrf}<p><label>Candidate bundle (.tar.gz, as <code>opa build</code> makes it) "
        '<input type="file" name="bundle" required></label></p><p>'
        '<label>since <input name="since" placeholder="RFC 3339"></label> '
        '<label>until <input name="until" placeholder="RFC 3339"></label> '
        '<label>asker <input name="asker"></label> '
        '<label>at most <input name="max_decisions" value="1000" size="6"> decisions</label>'
        '</p><button type="submit">Replay the audit under it</button></form>'
    )


def _side(allow: bool, usable_as: str, reasons: Sequence[str]) -> str:
    verdict = "allowed" if allow else "withheld"
    return f"{e(verdict)} as {e(usable_as)}<br>" + "<br>".join(e(r) for r in reasons)


def _report(built: ImpactReport) -> str:
    flips = built.flips
    head = (
        f"<p>candidate <code>{e(built.candidate_revision)}</code> against "
        f"<code>{e(built.current_revision)}</code>: {e(built.decisions)} decisions replayed "
        f"from {e(built.entries_read)} audit entries in {e(built.seconds)} s"
        + (f", stopped by {e(built.truncated)}" if built.truncated else "")
        + "</p>"
        + _table(
            [
                "newly disclosed",
                "newly withheld",
                "changed use",
                "erased (skipped)",
                "not stored",
                "grants unknown",
            ],
            [
                [
                    e(flips.newly_disclosed),
                    e(flips.newly_withheld),
                    e(flips.changed_use),
                    e(built.skipped.erased),
                    e(built.skipped.not_stored),
                    e(built.skipped.grants_unknown),
                ]
            ],
            "counts",
        )
    )

    def groups(title: str, found: list[FlipGroup]) -> str:
        rows = [
            [e(g.key), e(g.newly_disclosed), e(g.newly_withheld), e(g.changed_use)] for g in found
        ]
        table = _table([title, "newly disclosed", "newly withheld", "changed use"], rows)
        return f"<h3>by {e(title)}</h3>" + table

    def row(flip: Flip) -> list[str]:
        return [
            e(flip.kind.replace("_", " ")),
            f"<code>{e(flip.record_id)}</code>",
            e(flip.asker),
            e(flip.source_id),
            e(flip.purpose),
            e(flip.as_of.isoformat(timespec="seconds")),
            _side(flip.current.allow, flip.current.usable_as, flip.current.reasons),
            _side(flip.candidate.allow, flip.candidate.usable_as, flip.candidate.reasons),
            "<br>".join(e(r) for r in flip.rules),
        ]

    flipped = _table(
        ["flip", "record", "asker", "source", "purpose", "as of", "now", "candidate", "rules"],
        [row(f) for f in built.examples],
        "flips",
    )
    return (
        head
        + "<h2>flips</h2>"
        + flipped
        + groups("rule", built.by_rule)
        + groups("asker", built.by_asker)
        + groups("source", built.by_source)
    )
