"""The query engine: Qdrant's Query API over disclosable points only.

- collection.py: the leaf-search interface every collection implements (the
  guarantees the rest relies on);
- plan.py: a request read and checked, with its bounds, before the store is asked;
- engine.py: `query` and `query/batch`, evaluated as Qdrant's planner does, over the
  leaves' allowed points;
- scoring.py: RRF, DBSF, MMR and averaged examples (pure);
- groups.py: `query/groups` (and the legacy groups), scans.py: scroll, count, facet;
- legacy.py: the older search, recommend and discover bodies as queries;
- paths.py: payload paths (`a[].b`) as Qdrant reads them;
- whose.py: the interface over today's whose collection.

docs/design.md, "The query engine", says how each kind is computed, why it is
noninterferent, what it costs and what is refused.
"""
