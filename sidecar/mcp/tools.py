"""The Model Context Protocol server: whose's memory as tools an agent can call.

Two transports, one server: streamable HTTP mounted on the sidecar at `/mcp` (endpoint.py)
(identity: the API's verified bearer token, per HTTP request), and stdio
(stdio.py, `whose mcp`: identity from a token in the environment, verified per call, or a
dev identity). Each tool calls the `Memory` method the matching HTTP route calls
(memory.py: the one read path and the write path), so nothing is gated twice or
differently (docs/design.md §5, §6); refusals are the error tree's (errors.py), mapped
here once (`tool_error`: every class of the tree has its words in `WORDS`).

A tool result's text is what the model reads (answers/readout.py): attribution
sentences with their obligations, the verdict in words. Its structured content
is the API's JSON answer. A refusal is a tool error whose text starts with the
reason code and whose structured content is the API's Problem.

Over HTTP the server is stateless: every request is authenticated on its own and
no session outlives it, so no session can be carried over to another identity,
and replicas need no sticky routing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any, cast
from uuid import UUID

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.tools import Tool
from mcp.types import CallToolResult, InputRequiredResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field, ValidationError

from sidecar import __version__
from sidecar.answers import readout
from sidecar.auth.identity import (
    Identity,
)
from sidecar.errors import (
    AuditUnavailable,
    CandidateRefused,
    CollectionExists,
    CollectionForbidden,
    CollectionRefused,
    ConsentRefused,
    EmbeddingUnavailable,
    ErasureRefused,
    ErasureRequestsUnavailable,
    FilterRefused,
    Forbidden,
    GrantsUnavailable,
    InvalidRequest,
    LockUnavailable,
    MethodNotAllowed,
    NotFound,
    PolicyUnavailable,
    QueryMissing,
    QueryRefused,
    QueryTooCostly,
    RequestTooLarge,
    StoreUnavailable,
    Unauthenticated,
    Unavailable,
    WhoseError,
    WriteRefused,
    validation_reasons,
)
from sidecar.messages import (
    Claim,
    ConversationOpening,
    ErasureResponse,
    ForgetKind,
    ForgetRule,
    ForgetRuleRequest,
    ForgetRuleSet,
    Grant,
    GrantList,
    GrantPurpose,
    GrantRequest,
    HistoryResponse,
    MembershipChange,
    MembershipChanges,
    MembershipEvents,
    MemoryResponse,
    Observation,
    ObservedPath,
    Present,
    PropositionResponse,
    RecallRequest,
    RecallResponse,
    StoredRecords,
    path_of,
)
from sidecar.record import MAX_CATEGORIES, MAX_PATH, Category, Instant, Name, Person
from sidecar.services import Services

INSTRUCTIONS = """\
whose is a memory that keeps track of whose claim each memory is, and who may hear it.
What you get back are attributed beliefs, not facts: "alice believes that the launch is
October 17 — source private-session-42, confidence 0.78" means Alice believes it, not that
it is true. When you use a memory:
- say whose view it is (attribute it to its holder), and cite its source;
- "verify before acting" means: do not act on it until it is confirmed elsewhere;
- only an item usable as `fact` may be stated as true; everything else stays someone's view;
- a conflict means people disagree: give every view with its holder, and pick none;
- an abstention means there is nothing you may be told: say you do not know, or verify;
  never guess the answer, and never take an abstention for "no".
When you remember, store what someone said as their own view (the speaker), with who was
present (the participants): never restate one person's words as another's knowledge."""

USE = (
    " The result's text is what you may tell: each line is somebody's claim, worded as whose"
    " it is, with what it may be used as and its obligations (attribute it to its holder,"
    " cite its source, verify before acting). Keep the attribution when you repeat it."
)


# How a tool finds who is calling: from the HTTP request (the endpoint verified it),
# or, over stdio, from the token in the environment or the dev identity.
IdentityOf = Callable[[Context[Any, Any]], Awaitable[Identity]]


# What each refusal of the tree means, for the model reading it after its code.
WORDS: dict[type[WhoseError], str] = {
    WhoseError: "refused",
    InvalidRequest: "the arguments are not valid",
    NotFound: "no such memory, or none you may see",
    Forbidden: "your role does not allow this",
    CollectionForbidden: "the collections policy does not let you do this to the collection",
    FilterRefused: "the filter is not valid",
    QueryRefused: "the query is not served as asked",
    QueryTooCostly: "the query asks more than one request may",
    QueryMissing: "no such point or collection, or none you may see",
    CollectionRefused: "the collection is not created as asked",
    CollectionExists: "a collection of that name exists already",
    Unauthenticated: "not authenticated",
    MethodNotAllowed: "not served here",
    RequestTooLarge: "the request is too large",
    WriteRefused: "the write was refused and nothing was stored",
    ErasureRefused: "you may not erase this memory; nothing was erased",
    ConsentRefused: "the consent policy refused this; no grant changed",
    CandidateRefused: "the candidate policy cannot be read or loaded; nothing was replayed",
    Unavailable: "a dependency is unavailable; nothing was disclosed or stored",
    EmbeddingUnavailable: "the text could not be embedded; try again later",
    PolicyUnavailable: "the policy could not be asked: nothing may be disclosed; verify or abstain",
    StoreUnavailable: "the memory store is unavailable; try again later",
    LockUnavailable: "the memory is busy; try again later",
    AuditUnavailable: "the audit log cannot be read now",
    ErasureRequestsUnavailable: "erasure requests cannot be started or read now",
    GrantsUnavailable: "grants cannot be given, revoked or read now",
}


def tool_error(exc: WhoseError) -> CallToolResult:
    """A refusal as a tool error: its code and words for the model, and as structured
    content the problem the HTTP API answers (errors.py, messages.Problem)."""
    words = next(WORDS[cls] for cls in type(exc).__mro__ if cls in WORDS)
    body = exc.body()
    return CallToolResult(
        content=[TextContent(type="text", text=readout.refusal(exc.code, words, body["reasons"]))],
        structured_content=body,
        is_error=True,
    )


def _invalid(exc: ValidationError, arguments: object) -> CallToolResult:
    return tool_error(InvalidRequest("arguments", validation_reasons(exc.errors(), arguments)))


def _result(text: str, answer: BaseModel) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content=answer.model_dump(mode="json", exclude_none=True),
    )


class _Server(MCPServer[Any]):
    """An MCPServer whose refusals all have the API's shape (a reason code first), and
    which knows where a call finds the sidecar (`services`) and its caller."""

    def __init__(
        self,
        tools: list[Tool],
        services: Callable[[], Services],
        identity_of: IdentityOf,
        **kwargs: Any,
    ) -> None:
        super().__init__(tools=tools, **kwargs)
        self._ours = {tool.name: tool for tool in tools}
        self.services = services
        self.identity_of = identity_of

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        tool = self._ours.get(name)
        if tool is not None:
            # Checked here rather than by the SDK, so that a bad argument is refused like
            # the HTTP API refuses it: `invalid_request` with every reason.
            try:
                tool.fn_metadata.validate_arguments(arguments)
            except ValidationError as exc:
                return _invalid(exc, arguments)
        return await super().call_tool(name, arguments, context)


async def _guarded(
    ctx: Context[Any, Any], answer: Callable[[Services, Identity], Awaitable[CallToolResult]]
) -> CallToolResult:
    """Identity first, then the call; every refusal as a tool error with its code."""
    server = cast(_Server, ctx.mcp_server)  # build() made it
    try:
        who = await server.identity_of(ctx)
        return await answer(server.services(), who)
    except ValidationError as exc:
        # A request model built from arguments already checked: its own rules.
        return _invalid(exc, None)
    except WhoseError as exc:
        return tool_error(exc)


# --- the tools: each calls the Memory method its HTTP route calls --------------------


async def remember(
    ctx: Context[Any, Any],
    speaker: Annotated[Present, Field(description="Who said it (a person, not a group).")],
    source_id: Annotated[
        Name, Field(description="Where it was said, e.g. the session or thread id.")
    ],
    claims: Annotated[
        list[Claim],
        Field(
            min_length=1,
            max_length=100,
            description="What the speaker claimed: each a proposition {text, key, value};"
            " with `about` and `attitude` when it is about someone else's mind"
            ' ("I think Bob knows"); `hedged` when said with doubt.',
        ),
    ],
    participants: Annotated[
        list[Present] | None,
        Field(
            max_length=1000,
            description="Everyone else who was present and heard it. Omit it in a "
            "conversation opened with members (open_conversation): its members then "
            "heard it.",
        ),
    ] = None,
    channel: Annotated[Name | None, Field(description="e.g. dm, meeting, channel.")] = None,
    said_at: Annotated[Instant | None, Field(description="When it was said.")] = None,
    access_scope: Annotated[
        Name | None, Field(description="A clearance every hearer must hold.")
    ] = None,
) -> Annotated[CallToolResult, StoredRecords]:
    """Remember what someone said, as the speaker's statement.

    Each claim is stored as what the speaker said (never a fact, nor anyone else's
    belief), visible to the speaker and the participants only; each participant heard
    it. A claim about someone else's mind stays the speaker's view of that mind: "Alice
    thinks Bob knows" never becomes "Bob knows". Send what was said, by whom, with whom
    present; do not rewrite it as a fact."""

    async def answer(svc: Services, who: Identity) -> CallToolResult:
        observation = Observation(
            speaker=speaker,
            source_id=source_id,
            channel=channel,
            participants=participants,
            said_at=said_at,
            access_scope=access_scope,
            claims=claims,
        )
        written = await svc.memory.observe(who, [observation], "mcp.remember")
        return _result(readout.stored(written), written)

    return await _guarded(ctx, answer)


async def open_conversation(
    ctx: Context[Any, Any],
    source_id: Annotated[Name, Field(description="The conversation, e.g. the session id.")],
    members: Annotated[
        list[Present],
        Field(min_length=1, max_length=100, description="Who is in it from the start."),
    ],
    at: Annotated[Instant, Field(description="When they were there from.")],
) -> Annotated[CallToolResult, MembershipEvents]:
    """Open a conversation with its members. What is then said in it without
    `participants` (remember) is heard by whoever is a member when it is said, and
    stays attributed to its speaker in each hearer's memory."""

    async def answer(svc: Services, who: Identity) -> CallToolResult:
        opening = ConversationOpening(source_id=source_id, members=members, at=at)
        events = await svc.memory.open_conversation(who, opening)
        return _result(readout.membership(events), events)

    return await _guarded(ctx, answer)


async def change_membership(
    ctx: Context[Any, Any],
    source_id: Annotated[Name, Field(description="The conversation.")],
    changes: Annotated[
        list[MembershipChange],
        Field(
            min_length=1,
            max_length=100,
            description="Each {person, change: join | leave, at}; with `corrects` (an "
            "event id), what happened instead of that event (`none`: nothing did).",
        ),
    ],
) -> Annotated[CallToolResult, MembershipEvents]:
    """Record who joined or left a conversation, and when (a late joiner did not hear
    what was said before; whoever left does not hear what follows). Who heard a claim
    decides whose memory holds it, attributed to its speaker."""

    async def answer(svc: Services, who: Identity) -> CallToolResult:
        body = MembershipChanges(changes=changes)
        events = await svc.memory.change_membership(who, source_id, body)
        return _result(readout.membership(events), events)

    return await _guarded(ctx, answer)


async def recall(
    ctx: Context[Any, Any],
    query: Annotated[str, Field(min_length=1, max_length=4000, description="The question.")],
    about: Annotated[Name | None, Field(description="Only views of this proposition key.")] = None,
    as_of: Annotated[
        Instant | None, Field(description="The instant asked about (default: now).")
    ] = None,
    audience: Annotated[
        list[Name],
        Field(
            max_length=100,
            description="Everyone who will hear your answer besides you (people, or"
            " group:<name>): only what all of them may hear comes back.",
        ),
    ] = [],  # noqa: B006 (pydantic copies defaults)
    limit: Annotated[
        int,
        Field(
            description="At most this many items (1 to the sidecar's limit, 100 by default).",
            # The bound is the sidecar's setting, refused as every transport refuses it
            # (memory.py); the schema says how far the setting may go.
            json_schema_extra={"minimum": 1, "maximum": 1000},
        ),
    ] = 10,
    observer: Annotated[
        Person | None, Field(description="Only views held by this person (whose mind).")
    ] = None,
    observed: Annotated[
        ObservedPath | None,
        Field(
            description="Only views of this mind: a person, or a chain of them after the "
            "observer, outermost first ([b, c]: the observer's view of b's view of c's)."
        ),
    ] = None,
    speech_act: Annotated[
        bool | None,
        Field(description="true: only what someone said or heard said; false: only beliefs."),
    ] = None,
    heard: Annotated[
        bool,
        Field(
            description="Only what was heard, from anyone: with observer alone, what the "
            "observer heard anyone say; with observed, what the observer thinks the "
            "chain's last mind heard anyone say. Needs observer."
        ),
    ] = False,
) -> Annotated[CallToolResult, RecallResponse]:
    """Recall memories relevant to a question, as attributed beliefs or an abstention.

    The verdict says how to answer: `answer` (an authoritative fact), `attributed`
    (only beliefs: present each as its holder's), `conflict` (people disagree: give
    every view), `abstain` (nothing you may be told: say you do not know, or verify).
    If others will hear your answer, name them in `audience`."""

    async def answer(svc: Services, who: Identity) -> CallToolResult:
        request = RecallRequest(
            query=query,
            about=about,
            as_of=as_of,
            audience=audience,
            limit=limit,
            observer=observer,
            observed=observed,
            speech_act=speech_act,
            heard=heard,
        )
        recalled = await svc.memory.recall(who, request, "mcp.recall")
        return _result(readout.recall(recalled), recalled)

    return await _guarded(ctx, answer)


async def get_memory(
    ctx: Context[Any, Any],
    id: Annotated[UUID, Field(description="A memory id from an earlier result.")],
    as_of: Annotated[
        Instant | None,
        Field(description="The version of this memory that applied at this instant."),
    ] = None,
) -> Annotated[CallToolResult, MemoryResponse]:
    """One memory by id, attributed; `not_found` if it does not exist or you may not
    see it (the two are the same answer)."""

    async def answer(svc: Services, who: Identity) -> CallToolResult:
        found = await svc.memory.get(who, id, as_of, "mcp.get_memory")
        return _result(readout.memory(found), found)

    return await _guarded(ctx, answer)


async def history(
    ctx: Context[Any, Any],
    id: Annotated[UUID, Field(description="A memory id from an earlier result.")],
) -> Annotated[CallToolResult, HistoryResponse]:
    """How a holder's view changed: the versions of one memory you may see, oldest
    first, each marked current or superseded."""

    async def answer(svc: Services, who: Identity) -> CallToolResult:
        versions = await svc.memory.history(who, id, "mcp.history")
        return _result(readout.history(versions), versions)

    return await _guarded(ctx, answer)


async def what_do_people_think(
    ctx: Context[Any, Any],
    key: Annotated[
        str,
        Field(min_length=1, max_length=200, description="A proposition key, e.g. launch.date."),
    ],
    audience: Annotated[
        list[Name],
        Field(max_length=100, description="Everyone who will hear your answer besides you."),
    ] = [],  # noqa: B006 (pydantic copies defaults)
    depth: Annotated[
        int,
        Field(
            ge=1,
            le=MAX_PATH,
            description="How deep the minds nest: 2 adds what each thinks others think "
            "others think.",
        ),
    ] = 1,
    observer: Annotated[Person | None, Field(description="Only this holder's views.")] = None,
    observed: Annotated[
        ObservedPath | None,
        Field(description="Only views of this mind, or chain of minds, after the observer."),
    ] = None,
) -> Annotated[CallToolResult, PropositionResponse]:
    """Every view you may see of one proposition, each with its holder, and the
    authoritative fact if there is one; disagreements are listed as conflicts. Each
    holder's views come with what they think others think, nested to `depth`."""

    async def answer(svc: Services, who: Identity) -> CallToolResult:
        found = await svc.memory.views(
            who,
            key,
            audience,
            "mcp.what_do_people_think",
            depth=depth,
            observer=observer,
            observed=path_of(observed),
        )
        return _result(readout.propositions(found), found)

    return await _guarded(ctx, answer)


async def forget(
    ctx: Context[Any, Any],
    id: Annotated[UUID, Field(description="A memory id from an earlier result.")],
    history: Annotated[
        bool, Field(description="Forget every version of it, not only this one.")
    ] = False,
    reason: Annotated[
        Name | None,
        Field(description="Why, in a few words (kept in the audit log, e.g. a ticket id)."),
    ] = None,
) -> Annotated[CallToolResult, ErasureResponse]:
    """Forget a memory for good: it is erased, not marked, and cannot be recalled
    again by anyone. Use it for a memory that is wrong or that its holder asked to
    have forgotten; to record a change of mind, remember the new view instead
    (history is kept). A memory is its holder's: only its holder or writer may
    forget it, never someone else's attributed view (`erasure_refused` otherwise);
    `not_found` if it does not exist or you may not see it (the same answer)."""

    async def answer(svc: Services, who: Identity) -> CallToolResult:
        erased = await svc.memory.forget(who, id, "mcp.forget", history=history, reason=reason)
        return _result(readout.erased(erased), erased)

    return await _guarded(ctx, answer)


async def grant_access(
    ctx: Context[Any, Any],
    reader: Annotated[Person, Field(description="Who may see them: a person, or group:<name>.")],
    categories: Annotated[
        list[Category],
        Field(
            min_length=1,
            max_length=MAX_CATEGORIES,
            description="Which of the subject's memories, by category (e.g. appointments).",
        ),
    ],
    subject: Annotated[Person | None, Field(description="Whose memories; absent: yours.")] = None,
    until: Annotated[Instant | None, Field(description="When it ends; absent: never.")] = None,
    purpose: Annotated[
        GrantPurpose | None, Field(description="Only reads for this purpose; absent: any.")
    ] = None,
    reason: Annotated[
        Name | None, Field(description="Why, in a few words (kept in the audit log).")
    ] = None,
) -> Annotated[CallToolResult, Grant]:
    """Let someone see a person's memories of some categories ("my sister may get the
    appointment times only, until Friday"), from the next recall on, for every memory
    already stored. Only the subject (or someone the consent policy lets act for
    them) may grant (`consent_refused` otherwise, with every reason). What the reader
    then recalls stays attributed: whose view each memory is, never a fact."""

    async def answer(svc: Services, who: Identity) -> CallToolResult:
        request = GrantRequest(
            subject=subject,
            reader=reader,
            categories=categories,
            until=until,
            purpose=purpose,
            reason=reason,
        )
        given = await svc.memory.grant(who, request)
        return _result(readout.grant(given), given)

    return await _guarded(ctx, answer)


async def revoke_access(
    ctx: Context[Any, Any],
    grant_id: Annotated[UUID, Field(description="A grant id from grant_access or list_grants.")],
) -> Annotated[CallToolResult, Grant]:
    """Take a grant back ("take my mother's access away"): from the next recall on,
    it shows nothing. `not_found` for a grant you may not revoke and are no party to.
    It changes who may recall the memories, never their attribution."""

    async def answer(svc: Services, who: Identity) -> CallToolResult:
        revoked = await svc.memory.revoke_grant(who, grant_id)
        return _result(readout.grant(revoked, revoked=True), revoked)

    return await _guarded(ctx, answer)


async def list_grants(ctx: Context[Any, Any]) -> Annotated[CallToolResult, GrantList]:
    """The grants in force that you gave, that are about you, or that name you: who
    may recall whose attributed memories, of which categories, until when."""

    async def answer(svc: Services, who: Identity) -> CallToolResult:
        listed = await svc.memory.list_grants(who)
        return _result(readout.grants(listed), listed)

    return await _guarded(ctx, answer)


async def never_keep(
    ctx: Context[Any, Any],
    kind: Annotated[
        ForgetKind,
        Field(
            description="`value`: a literal such as a PIN; `key`: every claim of a "
            "proposition key; `pattern`: a shape, `#` a digit and `@` a letter."
        ),
    ],
    value: Annotated[str | None, Field(max_length=200, description="The value.")] = None,
    key: Annotated[Name | None, Field(description="The proposition key.")] = None,
    pattern: Annotated[str | None, Field(max_length=64, description="The shape.")] = None,
    subject: Annotated[
        Person | None, Field(description="Whose it is: you, unless you are an erasure officer.")
    ] = None,
    reason: Annotated[
        Name | None, Field(description="Why, in a few words (kept in the audit log).")
    ] = None,
) -> Annotated[CallToolResult, ForgetRuleSet]:
    """Never keep something again ("never keep my PIN"): what matches is forgotten now
    (the memories you may erase), and every later memory that carries it is refused
    or kept with it masked, until the rule is lifted. Memories attributed to other
    people are erased now only by an erasure officer's rule. The answer never repeats
    the value (`erasure_refused` when the forgetting policy does not let you)."""

    async def answer(svc: Services, who: Identity) -> CallToolResult:
        request = ForgetRuleRequest(
            kind=kind, value=value, key=key, pattern=pattern, subject=subject, reason=reason
        )
        made = await svc.memory.set_forget_rule(who, request)
        return _result(readout.forget_rule_set(made), made)

    return await _guarded(ctx, answer)


async def lift_forget_rule(
    ctx: Context[Any, Any],
    rule_id: Annotated[UUID, Field(description="The rule id `never_keep` answered.")],
) -> Annotated[CallToolResult, ForgetRule]:
    """Lift a standing forget rule: later memories are no longer checked against it;
    nothing already forgotten comes back (attributed memories stay their holders').
    `not_found` for a rule you may not see."""

    async def answer(svc: Services, who: Identity) -> CallToolResult:
        lifted = await svc.memory.lift_forget_rule(who, rule_id)
        return _result(readout.forget_rule_lifted(lifted), lifted)

    return await _guarded(ctx, answer)


def build(services: Callable[[], Services], identity_of: IdentityOf) -> MCPServer[Any]:
    """The MCP server with whose's tools; `services` and `identity_of` say where a call
    finds the sidecar and its caller."""
    read_only = ToolAnnotations(read_only_hint=True, open_world_hint=False)
    tools = [
        Tool.from_function(
            remember,
            description=(remember.__doc__ or "") + USE.replace("tell", "check"),
            annotations=ToolAnnotations(
                read_only_hint=False, destructive_hint=False, open_world_hint=False
            ),
        ),
        *(
            Tool.from_function(
                fn,
                description=fn.__doc__ or "",
                annotations=ToolAnnotations(
                    read_only_hint=False, destructive_hint=False, open_world_hint=False
                ),
            )
            for fn in (open_conversation, change_membership)
        ),
        *(
            Tool.from_function(fn, description=(fn.__doc__ or "") + USE, annotations=read_only)
            for fn in (recall, get_memory, history, what_do_people_think)
        ),
        Tool.from_function(
            forget,
            description=forget.__doc__ or "",
            annotations=ToolAnnotations(
                read_only_hint=False,
                destructive_hint=True,
                idempotent_hint=False,
                open_world_hint=False,
            ),
        ),
        *(
            Tool.from_function(
                fn,
                description=fn.__doc__ or "",
                annotations=ToolAnnotations(
                    read_only_hint=False, destructive_hint=False, open_world_hint=False
                ),
            )
            for fn in (grant_access, revoke_access)
        ),
        Tool.from_function(
            list_grants, description=list_grants.__doc__ or "", annotations=read_only
        ),
        Tool.from_function(
            never_keep,
            description=never_keep.__doc__ or "",
            annotations=ToolAnnotations(
                read_only_hint=False,
                destructive_hint=True,
                idempotent_hint=False,
                open_world_hint=False,
            ),
        ),
        Tool.from_function(
            lift_forget_rule,
            description=lift_forget_rule.__doc__ or "",
            annotations=ToolAnnotations(
                read_only_hint=False,
                destructive_hint=False,
                idempotent_hint=False,
                open_world_hint=False,
            ),
        ),
    ]
    return _Server(
        tools,
        services,
        identity_of,
        name="whose",
        title="whose: attributed memory",
        instructions=INSTRUCTIONS,
        version=__version__,
        # The SDK configures the root logger only if nothing has (logs.configure has, in
        # `whose serve` and `whose mcp`); then it should not make a caller chattier.
        log_level="WARNING",
    )
