// What the disclosure decision reads of a record, from OPA's own compiled policy.
//
// The sidecar decides once for records the policy cannot tell apart (docs/design.md,
// "Deciding shapes"). Which records those are is computed here, from the compiler's
// rules, never from Rego text: an abstract interpretation that walks from the
// entrypoint through every rule, function, import, package, `with`, `else`,
// `every` and comprehension it reaches, following each value that comes from a
// record. It answers:
//
//   - reads: the record paths the decision may depend on (a path element "*" is any
//     element or key of what is above it: its keys and its length are read too);
//   - instants: times the rules only parse and set against the instant asked about
//     (input.now, input.as_of, or what they are parsed into), or test for presence
//     or for being readable; a shape may replace them by their side of that instant;
//   - compared: every time set against the instant asked about, kept exact or not
//     (the cache's bucket-boundary check must cover each);
//   - unbounded: why the record's paths cannot be bounded (the record passed whole
//     to a builtin, read by a computed name, its id used other than as the key of
//     its own decision): then nothing is shared by shape;
//   - uncacheable: why no decision may be reused at all under this policy: one
//     record's decision depends on other records of the batch, the instant asked
//     about is used other than in a comparison with a record's time (arithmetic on
//     it, say), a builtin answers differently from call to call, or the analysis
//     met something it cannot follow.
//
// Soundness leans one way only: whatever the analysis cannot follow reads more (a
// whole path, the whole record) or disables caching; it never reads less.
package main

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/storage"
)

// star is any element of a collection (and, read, its keys and length).
const star = "*"

// analysisBudget bounds the expressions visited (memoised rules and functions are
// visited once per distinct argument): past it, the policy is not analysed.
const analysisBudget = 2_000_000

type path []string

func (p path) with(k string) path {
	q := make(path, len(p)+1)
	copy(q, p)
	q[len(p)] = k
	return q
}

func (p path) String() string {
	if len(p) == 0 {
		return "(the record)"
	}
	return strings.Join(p, ".")
}

func (p path) key() string { return strings.Join(p, "\x00") }

// tags: which records a value depends on. Bit 0 is "the record of its key" (inside
// per-record collections), bits 1..62 are records bound while a body is analysed,
// bit 63 is "several records" (the batch, a position in it, an aggregate over it).
type tags uint64

const (
	selfTag    tags = 1
	manyTag    tags = 1 << 63
	maxRecord       = 62
	recordBits      = ^(selfTag | manyTag)
)

func bit(i int) tags { return tags(1) << uint(i) }

// at or above bit i: the records bound within a scope that began at i.
func localFrom(i int) tags { return recordBits &^ (bit(i) - 1) }

type kind uint8

const (
	kBottom  kind = iota // undefined: never produced
	kClean               // depends on no record and not on the instant asked about
	kEmpty               // an empty collection literal
	kInput               // the input document
	kRecords             // the batch (input.records)
	kRec                 // a record's subtree at `path`
	kID                  // a record's id
	kNowText             // the instant asked about, as text (input.now, input.as_of)
	kNow                 // the instant asked about, parsed (nanoseconds)
	kInstant             // a record's time at `path`, parsed
	kKeyed               // a collection keyed by record id, each entry of its own record
	kObj                 // an object with constant keys
	kColl                // a collection (array, set, object with computed keys)
	kPkg                 // a package or a prefix of data
	kOpaque              // anything else; `t` says which records it depends on
)

type val struct {
	k      kind
	t      tags
	path   path
	elem   *val            // kKeyed, kColl
	set    bool            // kKeyed: a set of ids (its elements are the ids)
	fields map[string]*val // kObj
	node   *ast.TreeNode   // kPkg
	ref    []string        // kPkg: its path below data
}

var (
	bottom = &val{k: kBottom}
	clean  = &val{k: kClean}
	empty  = &val{k: kEmpty}
)

func opaque(t tags) *val {
	if t == 0 {
		return clean
	}
	return &val{k: kOpaque, t: t}
}

// withTags: v, known to hold only under the records of t as well.
func withTags(v *val, t tags) *val {
	if t == 0 || v.t&t == t {
		return v
	}
	if v.k == kClean || v.k == kEmpty {
		return opaque(t)
	}
	c := *v
	c.t |= t
	return &c
}

// retag renames record bits (from -> to) throughout v.
func retag(v *val, rename func(tags) tags) *val {
	if v == nil {
		return nil
	}
	c := *v
	c.t = rename(v.t)
	if v.elem != nil && v.k != kKeyed {
		c.elem = retag(v.elem, rename)
	}
	if v.fields != nil {
		c.fields = make(map[string]*val, len(v.fields))
		for k, f := range v.fields {
			c.fields[k] = retag(f, rename)
		}
	}
	return &c
}

// renameBits maps each bit of `from` set in a tag set to the bits of `to`.
func renameBits(from tags, to tags) func(tags) tags {
	return func(t tags) tags {
		if t&from == 0 {
			return t
		}
		return (t &^ from) | to
	}
}

func (v *val) key() string {
	var b strings.Builder
	v.write(&b)
	return b.String()
}

func (v *val) write(b *strings.Builder) {
	fmt.Fprintf(b, "%d:%x", v.k, uint64(v.t))
	if v.path != nil {
		b.WriteString("@" + v.path.key())
	}
	if v.set {
		b.WriteString("s")
	}
	if v.elem != nil {
		b.WriteString("[")
		v.elem.write(b)
		b.WriteString("]")
	}
	if v.fields != nil {
		names := make([]string, 0, len(v.fields))
		for k := range v.fields {
			names = append(names, k)
		}
		sort.Strings(names)
		b.WriteString("{")
		for _, k := range names {
			fmt.Fprintf(b, "%q:", k)
			v.fields[k].write(b)
			b.WriteString(",")
		}
		b.WriteString("}")
	}
	if v.ref != nil {
		b.WriteString("<" + strings.Join(v.ref, ".") + ">")
	}
}

// --- with: documents replaced for one expression ---------------------------------

type override struct {
	path []string // from the root: "input", ... or "data", ...
	v    *val
}

type env []override

func (e env) key() string {
	var b strings.Builder
	for _, o := range e {
		b.WriteString(strings.Join(o.path, ".") + "=" + o.v.key() + ";")
	}
	return b.String()
}

// at: the value replacing exactly `p`, if one does.
func (e env) at(p []string) (*val, bool) {
	for i := len(e) - 1; i >= 0; i-- {
		if equalPath(e[i].path, p) {
			return e[i].v, true
		}
	}
	return nil, false
}

func equalPath(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// --- scopes ------------------------------------------------------------------------

type scope struct {
	parent *scope
	vars   map[ast.Var]*val
	from   int  // the first record bit bound in this scope
	cond   tags // what the body so far holds under
}

func (s *scope) lookup(v ast.Var) (*val, bool) {
	for c := s; c != nil; c = c.parent {
		if x, ok := c.vars[v]; ok {
			return x, true
		}
	}
	return nil, false
}

func (s *scope) bind(v ast.Var, x *val) { s.vars[v] = x }

// --- the analysis --------------------------------------------------------------------

type analysis struct {
	c     *ast.Compiler
	dir   string // the bundle's directory, left out of where things are
	store storage.Store
	txn   storage.Transaction
	env   env
	next  int // the last record bit handed out
	steps int
	at    string // where the expression being analysed is

	memo map[string]*val
	busy map[string]bool

	reads      map[string]path // read whole
	tested     map[string]path // tested for presence
	parsed     map[string]path // parsed as a time
	compared   map[string]path // parsed and set against the instant asked about
	otherwise  map[string]string
	unbounded  []string
	uncachable []string
}

// ReadSet is the analysis' answer (see the top of this file).
type ReadSet struct {
	Reads       [][]string `json:"reads"`
	Instants    [][]string `json:"instants"`
	Compared    [][]string `json:"compared"`
	Unbounded   []string   `json:"unbounded"`
	Uncacheable []string   `json:"uncacheable"`
}

func (e *engine) readSet(entry string) (set *ReadSet, err error) {
	// A construct the analysis mishandles must not take the process with it.
	defer func() {
		if r := recover(); r != nil {
			set, err = nil, fmt.Errorf("the analysis failed: %v", r)
		}
	}()
	ctx := context.Background()
	txn, err := e.store.NewTransaction(ctx)
	if err != nil {
		return nil, err
	}
	defer e.store.Abort(ctx, txn)
	a := &analysis{
		c:         e.compiler,
		dir:       strings.TrimSuffix(e.dir, "/") + "/",
		store:     e.store,
		txn:       txn,
		memo:      map[string]*val{},
		busy:      map[string]bool{},
		reads:     map[string]path{},
		tested:    map[string]path{},
		parsed:    map[string]path{},
		compared:  map[string]path{},
		otherwise: map[string]string{},
	}
	a.entrypoint(entry)
	return a.answer(), nil
}

const maxReasons = 8

func (a *analysis) noShapes(why string) {
	why = a.where(why)
	for _, known := range a.unbounded {
		if known == why {
			return
		}
	}
	if len(a.unbounded) < maxReasons {
		a.unbounded = append(a.unbounded, why)
	}
}

func (a *analysis) noCache(why string) {
	why = a.where(why)
	for _, known := range a.uncachable {
		if known == why {
			return
		}
	}
	if len(a.uncachable) < maxReasons {
		a.uncachable = append(a.uncachable, why)
	}
}

func (a *analysis) where(why string) string {
	if a.at == "" {
		return why
	}
	return why + " (" + a.at + ")"
}

func (a *analysis) entrypoint(entry string) {
	ref := []string{}
	for _, part := range strings.Split(strings.Trim(entry, "/"), "/") {
		ref = append(ref, part)
	}
	v := a.data(ref)
	a.at = ""
	if v.k != kObj {
		a.noCache("the entrypoint is not an object of per-record decisions")
		return
	}
	decisions, ok := v.fields["decisions"]
	if !ok || decisions.k != kKeyed || decisions.set {
		a.noCache("the entrypoint's decisions are not keyed by each record's id")
	} else {
		// What a decision holds is read too: a record's field (or its id) put in a
		// reason as it is would differ from record to record of a shape.
		a.use(decisions.elem, "in its decision")
	}
	for name, field := range v.fields {
		if name != "decisions" && (field.t != 0 || field.k == kKeyed || field.k == kRecords) {
			a.noCache("the entrypoint's " + name + " depends on the records")
		}
	}
}

func (a *analysis) answer() *ReadSet {
	// A time only tested for presence is read like any other field; one parsed and
	// used otherwise too, or read below, is kept exact.
	for k, p := range a.tested {
		if _, ok := a.parsed[k]; !ok {
			a.reads[k] = p
		}
	}
	for k, p := range a.parsed {
		if _, ok := a.otherwise[k]; ok {
			a.reads[k] = p
		}
	}
	// A time is kept exact where any read reaches it or below it, a "*" on either side
	// matching any key: beside `meta.x` read as it is, `meta.*` set against the instant
	// cannot be held by its side (meta.x is one of its values). Until nothing changes,
	// since a time made exact is a read too.
	for changed := true; changed; {
		changed = false
		for k, p := range a.parsed {
			if _, exact := a.reads[k]; exact {
				continue
			}
			for _, r := range a.reads {
				if overlaps(r, p) {
					a.reads[k] = p
					changed = true
					break
				}
			}
		}
	}
	reads := minimal(a.reads)
	// Every time left is reached by no read (any a read covers was made exact above).
	var instants [][]string
	for k, p := range a.parsed {
		if _, exact := a.reads[k]; !exact {
			instants = append(instants, p)
		}
	}
	compared := make([][]string, 0, len(a.compared))
	for _, p := range a.compared {
		compared = append(compared, p)
	}
	sortPaths(instants)
	sortPaths(compared)
	return &ReadSet{
		Reads:       reads,
		Instants:    nonNil(instants),
		Compared:    compared,
		Unbounded:   nonNilStrings(a.unbounded),
		Uncacheable: nonNilStrings(a.uncachable),
	}
}

// minimal: the paths read, without those under another one read whole.
func minimal(paths map[string]path) [][]string {
	all := make([][]string, 0, len(paths))
	for _, p := range paths {
		all = append(all, p)
	}
	sortPaths(all)
	var kept [][]string
	for _, p := range all {
		if !covered(kept, p) {
			kept = append(kept, p)
		}
	}
	return nonNil(kept)
}

// overlaps: whether `a` and `b` may name one value or one within the other: they agree
// on every key they both have, a "*" on either side matching any key.
func overlaps(a, b []string) bool {
	n := len(a)
	if len(b) < n {
		n = len(b)
	}
	for i := 0; i < n; i++ {
		if a[i] != b[i] && a[i] != star && b[i] != star {
			return false
		}
	}
	return true
}

// covered: whether `p` lies at or under one of `paths` (a "*" covers any key).
func covered(paths [][]string, p []string) bool {
	for _, q := range paths {
		if len(q) <= len(p) {
			match := true
			for i := range q {
				if q[i] != p[i] && q[i] != star {
					match = false
					break
				}
			}
			if match {
				return true
			}
		}
	}
	return false
}

func sortPaths(paths [][]string) {
	sort.Slice(paths, func(i, j int) bool {
		if len(paths[i]) != len(paths[j]) {
			return len(paths[i]) < len(paths[j])
		}
		return strings.Join(paths[i], ".") < strings.Join(paths[j], ".")
	})
}

func nonNil(p [][]string) [][]string {
	if p == nil {
		return [][]string{}
	}
	return p
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// --- effects: what a use of a value reads ---------------------------------------------

func (a *analysis) readWhole(p path, why string) {
	if len(p) == 0 {
		a.noShapes("the whole record is " + why)
		return
	}
	a.reads[p.key()] = p
}

// use: v flows somewhere the analysis does not follow (a builtin, a comparison, a
// literal): everything it came from is read. Returns the records it depends on.
func (a *analysis) use(v *val, why string) tags {
	switch v.k {
	case kRec:
		a.readWhole(v.path, why)
	case kInstant:
		a.otherwise[v.path.key()] = why
	case kID:
		a.noShapes("the record's id is " + why)
	case kRecords:
		a.noCache("the batch's records are " + why)
	case kInput:
		a.noCache("the whole input is " + why)
	case kNowText, kNow:
		a.noCache("the instant asked about is " + why)
	case kKeyed:
		a.noCache("the decisions of every record of the batch are " + why)
	case kObj:
		for _, f := range v.fields {
			a.use(f, why)
		}
	case kColl:
		a.use(v.elem, why)
	case kPkg:
		a.usePkg(v, why)
	}
	return v.t
}

func (a *analysis) usePkg(v *val, why string) {
	for _, child := range a.children(v) {
		a.use(child, why)
	}
}

// join: a value that is either x or y.
func (a *analysis) join(x, y *val, why string) *val {
	switch {
	case x.k == kBottom:
		return y
	case y.k == kBottom:
		return x
	case x.k == kEmpty && y.k == kEmpty:
		return empty
	}
	if x.k == kEmpty || x.k == kClean {
		x, y = y, x
	}
	if y.k == kEmpty || y.k == kClean {
		switch x.k {
		case kClean, kEmpty:
			return clean
		case kOpaque:
			return x
		case kColl, kKeyed, kRecords, kObj:
			if y.k == kEmpty {
				return x
			}
		}
		return opaque(a.use(x, why))
	}
	if x.k == y.k {
		switch x.k {
		case kInput, kRecords, kNowText, kNow, kID, kOpaque:
			return withTags(x, y.t)
		case kRec, kInstant:
			if x.path.key() == y.path.key() {
				return withTags(x, y.t)
			}
		case kKeyed:
			if x.set == y.set {
				return &val{k: kKeyed, t: x.t | y.t, set: x.set, elem: a.join(x.elem, y.elem, why)}
			}
		case kColl:
			return &val{k: kColl, t: x.t | y.t, elem: a.join(x.elem, y.elem, why)}
		case kObj:
			fields := map[string]*val{}
			for k, f := range x.fields {
				fields[k] = f
			}
			for k, f := range y.fields {
				if g, ok := fields[k]; ok {
					fields[k] = a.join(g, f, why)
				} else {
					fields[k] = f
				}
			}
			return &val{k: kObj, t: x.t | y.t, fields: fields}
		case kPkg:
			if strings.Join(x.ref, ".") == strings.Join(y.ref, ".") {
				return x
			}
		}
	}
	return opaque(a.use(x, why) | a.use(y, why))
}

// escape: v leaves the scope whose records are `local`: a value of one of them (an
// aggregate over the batch) depends on several records.
func (a *analysis) escape(v *val, local tags, why string) *val {
	if v.t&local == 0 {
		return v
	}
	return opaque((a.use(v, why) &^ local) | manyTag)
}

func escapeTags(t tags, local tags) tags {
	if t&local == 0 {
		return t
	}
	return (t &^ local) | manyTag
}

func (a *analysis) newScope(parent *scope) *scope {
	return &scope{parent: parent, vars: map[ast.Var]*val{}, from: a.next + 1}
}

func (a *analysis) fresh() int {
	if a.next >= maxRecord {
		a.noCache("too many records bound at once for the analysis")
		return maxRecord
	}
	a.next++
	return a.next
}

// --- data: rules, packages and base documents ----------------------------------------

// data: the value of data.<ref>.
func (a *analysis) data(ref []string) *val {
	cur := a.pkg(nil, a.c.RuleTree.Child(ast.DefaultRootDocument.Value))
	for _, part := range ref {
		cur = a.step(nil, cur, ast.StringTerm(part))
		if cur.k == kBottom {
			return bottom
		}
	}
	return cur
}

func (a *analysis) pkg(ref []string, node *ast.TreeNode) *val {
	return &val{k: kPkg, node: node, ref: ref}
}

// child: data.<pkg.ref>.<name>: a rule's value, a package below, or base data.
func (a *analysis) child(p *val, name string) *val {
	ref := append(append([]string{}, p.ref...), name)
	if v, ok := a.env.at(append([]string{"data"}, ref...)); ok {
		return v
	}
	var node *ast.TreeNode
	if p.node != nil {
		node = p.node.Children[ast.String(name)]
	}
	if node == nil {
		// Base data (config, a directory), or nothing: the same for every record.
		return clean
	}
	var v *val = bottom
	if len(node.Values) > 0 {
		v = a.ruleValue(ref, node)
	}
	if len(node.Children) > 0 || a.hasBase(ref) {
		v = a.join(v, a.pkg(ref, node), "joined with a package")
	}
	return v
}

// children: the value of each document directly under a package.
func (a *analysis) children(p *val) []*val {
	var out []*val
	if p.node != nil {
		for _, key := range p.node.Sorted {
			if s, ok := key.(ast.String); ok {
				if v := a.child(p, string(s)); v.k != kBottom {
					out = append(out, v)
				}
			} else {
				a.noCache("a package key the analysis cannot name: " + key.String())
			}
		}
	}
	if a.hasBase(p.ref) {
		out = append(out, clean)
	}
	return out
}

func (a *analysis) hasBase(ref []string) bool {
	p := storage.Path(ref)
	_, err := a.store.Read(context.Background(), a.txn, p)
	return err == nil
}

// ruleValue: the document the rules at `node` make, once per set of replaced documents.
func (a *analysis) ruleValue(ref []string, node *ast.TreeNode) *val {
	key := "rule:" + strings.Join(ref, ".") + "|" + a.env.key()
	if v, ok := a.memo[key]; ok {
		return v
	}
	if a.busy[key] {
		a.noCache("a rule that reaches itself: data." + strings.Join(ref, "."))
		return opaque(manyTag)
	}
	a.busy[key] = true
	saved, savedAt := a.next, a.at
	a.next = 0
	v := bottom
	for _, rule := range node.Values {
		if len(rule.Head.Args) > 0 {
			// A function is no document: iterating its package passes it by.
			continue
		}
		var held tags
		for r := rule; r != nil; r = r.Else {
			value, cond := a.ruleBody(r, nil, nil)
			// An else's value stands only where every body before it failed.
			held |= cond
			v = a.join(v, withTags(value, held), "a rule's value")
		}
	}
	a.next, a.at = saved, savedAt
	delete(a.busy, key)
	a.memo[key] = v
	return v
}

// ruleBody: one body of a rule (or function, with its arguments' values) and the
// value its head makes, escaped from the body's records; and what it holds under.
func (a *analysis) ruleBody(r *ast.Rule, params []*val, outer *scope) (*val, tags) {
	s := a.newScope(outer)
	defer func() { a.next = s.from - 1 }()
	for i, p := range r.Head.Args {
		if i < len(params) {
			a.destructure(s, p, params[i])
		}
	}
	local := localFrom(s.from)
	if !a.body(s, r.Body) {
		return bottom, escapeTags(s.cond, local)
	}
	a.at = a.loc(r.Head.Location)
	head := r.Head
	var value *val
	var keys []*ast.Term
	ref := head.Ref()
	ground := ref.GroundPrefix()
	keys = ref[len(ground):]
	if head.Value != nil {
		value = a.term(s, head.Value)
	} else {
		// A multi-value rule: a set of its keys.
		keys = append(append([]*ast.Term{}, keys...), head.Key)
		value = nil
	}
	if value != nil && value.k == kBottom {
		return bottom, escapeTags(s.cond, local)
	}
	for i := len(keys) - 1; i >= 0; i-- {
		k := a.term(s, keys[i])
		if k.k == kBottom {
			return bottom, escapeTags(s.cond, local)
		}
		value = a.keyed(k, value, s.cond, s.from)
	}
	if len(keys) > 0 {
		// What the body held under is in the entries (keyed); such a rule has no else.
		return a.escape(value, local, "gathered from several records"), 0
	}
	return a.escape(value, local, "gathered from several records"), escapeTags(s.cond, local)
}

// keyed: the document {k: value} (value nil: the set {k}), held under cond. Keyed by
// the id of a record bound in this body, and made of that record alone, it is one
// entry per record: a per-record collection.
func (a *analysis) keyed(k *val, value *val, cond tags, from int) *val {
	set := value == nil
	if set {
		value = clean
	}
	if k.k == kID {
		own := k.t & recordBits & localFrom(from)
		if own != 0 && own&(own-1) == 0 && k.t&manyTag == 0 {
			rest := (value.t | cond | k.t) &^ own
			if rest&(recordBits|manyTag) != 0 {
				a.noCache("one record's decision depends on other records of the batch")
				return opaque(manyTag)
			}
			return &val{k: kKeyed, set: set, elem: retag(value, renameBits(own, selfTag))}
		}
	}
	t := a.use(k, "a key of a rule or comprehension")
	if set {
		return &val{k: kColl, t: t | cond, elem: withTags(opaque(t), 0)}
	}
	return &val{k: kColl, t: t | value.t | cond, elem: value}
}

// --- bodies, expressions, terms --------------------------------------------------------

func (a *analysis) loc(l *ast.Location) string {
	if l == nil {
		return ""
	}
	return fmt.Sprintf("%s:%d", strings.TrimPrefix(l.File, a.dir), l.Row)
}

// body: false when it cannot hold (something in it is undefined for every record).
func (a *analysis) body(s *scope, b ast.Body) bool {
	for _, e := range b {
		if !a.expr(s, e) {
			return false
		}
	}
	return true
}

func (a *analysis) expr(s *scope, e *ast.Expr) bool {
	a.steps++
	if a.steps > analysisBudget {
		if a.steps == analysisBudget+1 {
			a.noCache("the policy is too large for the analysis")
		}
		return false
	}
	a.at = a.loc(e.Location)
	if len(e.With) > 0 {
		return a.withExpr(s, e)
	}
	if e.Negated {
		inner := a.newScope(s)
		a.exprTerms(inner, e)
		s.cond |= escapeTags(inner.cond, localFrom(inner.from))
		a.next = inner.from - 1
		return true
	}
	return a.exprTerms(s, e)
}

func (a *analysis) exprTerms(s *scope, e *ast.Expr) bool {
	switch t := e.Terms.(type) {
	case *ast.Term:
		v := a.term(s, t)
		if v.k == kBottom {
			return false
		}
		s.cond |= a.truth(v)
		return true
	case []*ast.Term:
		return a.call(s, t[0], t[1:])
	case *ast.SomeDecl:
		return true
	case *ast.Every:
		return a.every(s, t)
	case *ast.LogicalAnd:
		return a.body(s, t.Lhs) && a.body(s, t.Rhs)
	case *ast.LogicalOr:
		left, right := a.newScope(s), a.newScope(s)
		l := a.body(left, t.Lhs)
		a.next = left.from - 1
		r := a.body(right, t.Rhs)
		a.next = right.from - 1
		s.cond |= escapeTags(left.cond, localFrom(left.from)) |
			escapeTags(right.cond, localFrom(right.from))
		return l || r
	}
	a.noCache(fmt.Sprintf("an expression the analysis cannot follow: %v", e))
	return false
}

// truth: a value tested for being defined and not false.
func (a *analysis) truth(v *val) tags {
	switch v.k {
	case kRec:
		// Presence: a time tested so keeps its side (absent stays absent).
		a.tested[v.path.key()] = v.path
		return v.t
	case kInstant, kNow, kClean, kOpaque, kEmpty:
		return v.t
	}
	return a.use(v, "tested for truth")
}

func (a *analysis) withExpr(s *scope, e *ast.Expr) bool {
	saved := a.env
	extended := append(env{}, a.env...)
	for _, w := range e.With {
		target, ok := w.Target.Value.(ast.Ref)
		if !ok {
			if v, isVar := w.Target.Value.(ast.Var); isVar {
				target = ast.Ref{ast.NewTerm(v)}
			} else {
				a.noCache("a with the analysis cannot follow")
				return false
			}
		}
		root := target[0].Value.String()
		if (root != "input" && root != "data") || a.isFunction(target) {
			a.noCache("with replaces a function: " + target.String())
			return false
		}
		p := []string{root}
		for _, part := range target[1:] {
			str, isStr := part.Value.(ast.String)
			if !isStr {
				a.noCache("with replaces a document by a computed path")
				return false
			}
			p = append(p, string(str))
		}
		if a.belowADocument(p) {
			a.noCache("with replaces part of a rule's value or of a record: " + target.String())
			return false
		}
		v := a.term(s, w.Value)
		if !constant(v) {
			a.noCache("with replaces a document by something other than a constant or data: " + target.String())
			return false
		}
		extended = append(extended, override{p, v})
	}
	a.env = extended
	plain := e.Copy()
	plain.With = nil
	ok := a.expr(s, plain)
	a.env = saved
	return ok
}

func constant(v *val) bool {
	switch v.k {
	case kClean, kEmpty:
		return true
	case kObj:
		for _, f := range v.fields {
			if !constant(f) {
				return false
			}
		}
		return v.t == 0
	case kColl:
		return v.t == 0 && constant(v.elem)
	}
	return false
}

func (a *analysis) isFunction(ref ast.Ref) bool {
	if _, ok := ast.BuiltinMap[ref.String()]; ok {
		return true
	}
	switch ref[0].Value.String() {
	case "input":
		return false
	case "data":
	default:
		return true
	}
	node := a.c.RuleTree.Find(ref)
	if node == nil {
		return false
	}
	for _, r := range node.Values {
		if len(r.Head.Args) > 0 {
			return true
		}
	}
	return false
}

// belowADocument: whether replacing `p` would change part of a rule's value or of
// the batch (a key inside them), which the analysis does not follow.
func (a *analysis) belowADocument(p []string) bool {
	if p[0] == "input" {
		return len(p) > 2 && (p[1] == "records" || p[1] == "record")
	}
	node := a.c.RuleTree.Child(ast.DefaultRootDocument.Value)
	for _, part := range p[1:] {
		if len(node.Values) > 0 {
			return true
		}
		node = node.Children[ast.String(part)]
		if node == nil {
			return false
		}
	}
	return false
}

func (a *analysis) every(s *scope, ev *ast.Every) bool {
	domain := a.term(s, ev.Domain)
	if domain.k == kBottom {
		return true // every over nothing holds
	}
	inner := a.newScope(s)
	keyTerm := ev.Key
	if keyTerm == nil {
		keyTerm = ast.VarTerm("$every_key")
	}
	element := a.step(inner, domain, keyTerm)
	if ev.Value != nil {
		a.destructure(inner, ev.Value, element)
	}
	a.body(inner, ev.Body)
	s.cond |= domain.t | escapeTags(inner.cond|element.t, localFrom(inner.from))
	a.next = inner.from - 1
	return true
}

func (a *analysis) unbound(s *scope, t *ast.Term) (ast.Var, bool) {
	v, ok := t.Value.(ast.Var)
	if !ok || v.Equal(ast.InputRootDocument.Value) || v.Equal(ast.DefaultRootDocument.Value) {
		return "", false
	}
	_, bound := s.lookup(v)
	return v, !bound
}

func (a *analysis) term(s *scope, t *ast.Term) *val {
	switch x := t.Value.(type) {
	case ast.Null, ast.Boolean, ast.Number, ast.String:
		return clean
	case ast.Var:
		if x.Equal(ast.InputRootDocument.Value) {
			return a.input()
		}
		if x.Equal(ast.DefaultRootDocument.Value) {
			if v, ok := a.env.at([]string{"data"}); ok {
				return v
			}
			return a.pkg(nil, a.c.RuleTree.Child(ast.DefaultRootDocument.Value))
		}
		if v, ok := s.lookup(x); ok {
			return v
		}
		a.noCache("a variable the analysis did not see bound: " + string(x))
		return bottom
	case ast.Ref:
		return a.ref(s, x)
	case *ast.Array:
		var elems []*ast.Term
		x.Foreach(func(e *ast.Term) { elems = append(elems, e) })
		return a.collection(s, elems)
	case ast.Set:
		return a.collection(s, x.Slice())
	case ast.Object:
		fields := map[string]*val{}
		var t tags
		computed := false
		ok := true
		x.Foreach(func(k, v *ast.Term) {
			value := a.term(s, v)
			if value.k == kBottom {
				ok = false
			}
			if name, isStr := k.Value.(ast.String); isStr {
				fields[string(name)] = value
				t |= value.t
				return
			}
			computed = true
			key := a.term(s, k)
			if key.k == kBottom {
				ok = false
			}
			t |= a.use(key, "an object's key") | a.use(value, "a value under a computed key")
		})
		if !ok {
			return bottom
		}
		if computed {
			return opaque(t)
		}
		return &val{k: kObj, t: t, fields: fields}
	case *ast.ArrayComprehension:
		return a.comprehension(s, x.Term, x.Body)
	case *ast.SetComprehension:
		return a.comprehension(s, x.Term, x.Body)
	case *ast.ObjectComprehension:
		return a.objectComprehension(s, x)
	case *ast.Not:
		inner := a.newScope(s)
		a.body(inner, x.Body)
		a.next = inner.from - 1
		return opaque(escapeTags(inner.cond, localFrom(inner.from)))
	}
	a.noCache(fmt.Sprintf("a term the analysis cannot follow: %v", t))
	return bottom
}

func (a *analysis) input() *val {
	if v, ok := a.env.at([]string{"input"}); ok {
		return v
	}
	return &val{k: kInput}
}

func (a *analysis) collection(s *scope, elems []*ast.Term) *val {
	if len(elems) == 0 {
		return empty
	}
	elem := bottom
	for _, e := range elems {
		v := a.term(s, e)
		if v.k == kBottom {
			return bottom
		}
		elem = a.join(elem, v, "an element of a literal")
	}
	if elem.k == kClean {
		return clean
	}
	return &val{k: kColl, t: elem.t, elem: elem}
}

func (a *analysis) comprehension(s *scope, head *ast.Term, body ast.Body) *val {
	inner := a.newScope(s)
	local := localFrom(inner.from)
	defer func() { a.next = inner.from - 1 }()
	if !a.body(inner, body) {
		return empty
	}
	h := a.term(inner, head)
	if h.k == kBottom {
		return empty
	}
	elem := a.escape(h, local, "gathered from several records")
	return &val{k: kColl, t: elem.t | escapeTags(inner.cond, local), elem: elem}
}

func (a *analysis) objectComprehension(s *scope, x *ast.ObjectComprehension) *val {
	inner := a.newScope(s)
	defer func() { a.next = inner.from - 1 }()
	if !a.body(inner, x.Body) {
		return empty
	}
	k := a.term(inner, x.Key)
	v := a.term(inner, x.Value)
	if k.k == kBottom || v.k == kBottom {
		return empty
	}
	return a.escape(a.keyed(k, v, inner.cond, inner.from), localFrom(inner.from),
		"gathered from several records")
}

// --- references ------------------------------------------------------------------------

func (a *analysis) ref(s *scope, r ast.Ref) *val {
	cur := a.term(s, r[0])
	for _, part := range r[1:] {
		if cur.k == kBottom {
			return bottom
		}
		cur = a.step(s, cur, part)
	}
	return cur
}

// step: cur[key], binding key when it is an unbound variable (iteration).
func (a *analysis) step(s *scope, cur *val, keyTerm *ast.Term) *val {
	var key *val
	var name string
	named, iterating := false, false
	var unboundVar ast.Var
	switch k := keyTerm.Value.(type) {
	case ast.String:
		name, named = string(k), true
	case ast.Null, ast.Boolean, ast.Number:
		key = clean
	default:
		if v, ok := a.unbound(s, keyTerm); ok {
			unboundVar, iterating = v, true
		} else {
			key = a.term(s, keyTerm)
			if key.k == kBottom {
				return bottom
			}
		}
	}
	bindKey := func(v *val) {
		if iterating {
			s.bind(unboundVar, v)
		}
	}
	keyTags := func() tags {
		if key == nil {
			return 0
		}
		return a.use(key, "a key looked up")
	}
	switch cur.k {
	case kInput:
		if !named {
			a.noCache("the input read by a computed name")
			bindKey(opaque(manyTag))
			return opaque(manyTag)
		}
		if v, ok := a.env.at([]string{"input", name}); ok {
			return v
		}
		switch name {
		case "records":
			return &val{k: kRecords}
		case "record":
			// Explain's single record: never in the batch's input.
			return bottom
		case "now", "as_of":
			return &val{k: kNowText}
		}
		return clean
	case kRecords:
		r := a.fresh()
		if iterating {
			// Its position in the batch: several records decide it.
			bindKey(opaque(manyTag))
			return &val{k: kRec, path: path{}, t: bit(r)}
		}
		keyTags()
		// The record at a fixed position: which one it is depends on the batch.
		return &val{k: kRec, path: path{}, t: bit(r) | manyTag}
	case kRec:
		if named {
			if len(cur.path) == 0 && name == "id" {
				return &val{k: kID, t: cur.t}
			}
			return &val{k: kRec, path: cur.path.with(name), t: cur.t}
		}
		if len(cur.path) == 0 {
			a.noShapes("a field of the record is read by a computed name")
			bindKey(opaque(cur.t))
			return opaque(cur.t | keyTags())
		}
		// An element below the root: the "*" keeps every key and the length.
		bindKey(opaque(cur.t))
		return &val{k: kRec, path: cur.path.with(star), t: cur.t | keyTags()}
	case kKeyed:
		if iterating {
			r := bit(a.fresh())
			id := &val{k: kID, t: r}
			bindKey(id)
			if cur.set {
				return id
			}
			return withTags(retag(cur.elem, renameBits(selfTag, r)), r)
		}
		if key != nil && key.k == kID {
			if cur.set {
				return key
			}
			return withTags(retag(cur.elem, renameBits(selfTag, key.t)), key.t)
		}
		// By another record's id (a field naming one), or anything else: what it finds
		// depends on which other records the batch holds.
		a.noCache("per-record values are looked up by something other than the record's own id")
		keyTags()
		return opaque(manyTag)
	case kObj:
		if named {
			if f, ok := cur.fields[name]; ok {
				return f
			}
			return bottom
		}
		v := bottom
		for _, f := range cur.fields {
			v = a.join(v, f, "a field by computed name")
		}
		bindKey(clean)
		return withTags(v, keyTags())
	case kColl:
		bindKey(opaque(cur.t))
		return withTags(cur.elem, cur.t|keyTags())
	case kPkg:
		if named {
			return a.child(cur, name)
		}
		bindKey(clean)
		t := keyTags()
		v := bottom
		for _, c := range a.children(cur) {
			v = a.join(v, c, "a document of a package")
		}
		return withTags(v, t)
	case kEmpty:
		return bottom
	case kClean, kOpaque:
		bindKey(opaque(cur.t))
		return opaque(cur.t | keyTags())
	}
	// A scalar (an id, a time) indexed: undefined, but read as it is.
	t := a.use(cur, "indexed")
	bindKey(opaque(t))
	return opaque(t | keyTags())
}

// destructure: unify a pattern (an argument, a binding) with a value.
func (a *analysis) destructure(s *scope, pattern *ast.Term, v *val) bool {
	if name, ok := a.unbound(s, pattern); ok {
		s.bind(name, v)
		return true
	}
	if a.isPattern(s, pattern) {
		switch p := pattern.Value.(type) {
		case *ast.Array:
			elem := a.element(v)
			if elem.k == kBottom {
				return false
			}
			ok := true
			p.Foreach(func(t *ast.Term) { ok = a.destructure(s, t, elem) && ok })
			return ok
		case ast.Object:
			// Its keys must be exactly the pattern's: the whole object is read.
			t := a.use(v, "matched against an object pattern")
			ok := true
			p.Foreach(func(_, t2 *ast.Term) { ok = a.destructure(s, t2, opaque(t)) && ok })
			s.cond |= t
			return ok
		}
	}
	w := a.term(s, pattern)
	if w.k == kBottom {
		return false
	}
	s.cond |= a.compare(v, w)
	return true
}

// element: what iterating v gives.
func (a *analysis) element(v *val) *val {
	switch v.k {
	case kRec:
		if len(v.path) == 0 {
			return bottom // a record is an object, never an array
		}
		return &val{k: kRec, path: v.path.with(star), t: v.t}
	case kColl:
		return withTags(v.elem, v.t)
	case kClean, kOpaque:
		return v
	case kEmpty:
		return bottom
	}
	return opaque(a.use(v, "destructured"))
}

// --- calls -----------------------------------------------------------------------------

func (a *analysis) call(s *scope, op *ast.Term, args []*ast.Term) bool {
	ref, ok := op.Value.(ast.Ref)
	if !ok {
		a.noCache("a call the analysis cannot follow")
		return false
	}
	name := ref.String()
	switch name {
	case ast.Equality.Name, ast.Assign.Name:
		return a.unify(s, args[0], args[1])
	}
	if ref[0].Equal(ast.DefaultRootDocument) {
		return a.userCall(s, ref, args)
	}
	if b, known := ast.BuiltinMap[name]; known {
		return a.builtinCall(s, b, args)
	}
	a.noCache("a function the analysis does not know: " + name)
	return false
}

func (a *analysis) unify(s *scope, x, y *ast.Term) bool {
	if a.isPattern(s, x) && !a.isPattern(s, y) {
		x, y = y, x
	}
	// x is evaluated first (a reference in it binds what it iterates); y may be a
	// pattern of variables it binds.
	v := a.term(s, x)
	if v.k == kBottom {
		return false
	}
	s.cond |= v.t
	return a.destructure(s, y, v)
}

// isPattern: an unbound variable, or a literal array or object with one inside
// (references bind their own variables when they are evaluated).
func (a *analysis) isPattern(s *scope, t *ast.Term) bool {
	if _, ok := a.unbound(s, t); ok {
		return true
	}
	found := false
	switch p := t.Value.(type) {
	case *ast.Array:
		p.Foreach(func(e *ast.Term) { found = found || a.isPattern(s, e) })
	case ast.Object:
		p.Foreach(func(_, e *ast.Term) { found = found || a.isPattern(s, e) })
	}
	return found
}

func (a *analysis) userCall(s *scope, ref ast.Ref, args []*ast.Term) bool {
	node := a.c.RuleTree.Find(ref)
	if node == nil || len(node.Values) == 0 {
		a.noCache("a function the analysis cannot find: " + ref.String())
		return false
	}
	arity := len(node.Values[0].Head.Args)
	if len(args) < arity {
		a.noCache("a call with too few arguments: " + ref.String())
		return false
	}
	values := make([]*val, arity)
	var used tags
	for i := range arity {
		values[i] = a.term(s, args[i])
		if values[i].k == kBottom {
			return false
		}
		used |= values[i].t
	}
	// The arguments' records, renamed 1..n, so that calls alike share one summary.
	var order []int
	for i := 1; i <= maxRecord; i++ {
		if used&bit(i) != 0 {
			order = append(order, i)
		}
	}
	canon := func(t tags) tags {
		out := t & (selfTag | manyTag)
		for j, i := range order {
			if t&bit(i) != 0 {
				out |= bit(j + 1)
			}
		}
		return out
	}
	back := func(t tags) tags {
		out := t & (selfTag | manyTag)
		for j, i := range order {
			if t&bit(j+1) != 0 {
				out |= bit(i)
			}
		}
		return out
	}
	canonical := make([]*val, arity)
	var b strings.Builder
	b.WriteString("fn:" + ref.String() + "(")
	for i, v := range values {
		canonical[i] = retag(v, canon)
		b.WriteString(canonical[i].key() + ",")
	}
	b.WriteString(")|" + a.env.key())
	key := b.String()
	result, ok := a.memo[key]
	if !ok {
		if a.busy[key] {
			a.noCache("a function that reaches itself: " + ref.String())
			return false
		}
		a.busy[key] = true
		saved, savedAt := a.next, a.at
		a.next = len(order)
		result = bottom
		for _, rule := range node.Values {
			var held tags
			for r := rule; r != nil; r = r.Else {
				value, cond := a.ruleBody(r, canonical, nil)
				held |= cond
				result = a.join(result, withTags(value, held), "a function's value")
				a.next = len(order)
			}
		}
		a.next, a.at = saved, savedAt
		delete(a.busy, key)
		a.memo[key] = result
	}
	result = retag(result, back)
	if result.k == kBottom {
		return false
	}
	s.cond |= result.t
	if len(args) > arity {
		return a.destructure(s, args[arity], result)
	}
	s.cond |= a.truth(result)
	return true
}

// The disclosure input's fields the sidecar always sends (policy/contract.py).
var alwaysSent = map[string]bool{
	"asker": true, "audience": true, "purpose": true, "now": true, "as_of": true, "records": true,
}

var typePredicates = map[string]bool{
	"is_array": true, "is_object": true, "is_set": true, "is_string": true,
	"is_number": true, "is_boolean": true, "is_null": true, "type_name": true,
}

var comparisons = map[string]bool{
	ast.LessThan.Name: true, ast.LessThanEq.Name: true, ast.GreaterThan.Name: true,
	ast.GreaterThanEq.Name: true, ast.Equal.Name: true, ast.NotEqual.Name: true,
}

func (a *analysis) builtinCall(s *scope, b *ast.Builtin, args []*ast.Term) bool {
	arity := len(args)
	if fargs := b.Decl.FuncArgs(); fargs.Variadic == nil && b.Decl.Result() != nil {
		arity = len(fargs.Args)
	}
	if arity > len(args) {
		arity = len(args)
	}
	values := make([]*val, arity)
	for i := range arity {
		values[i] = a.term(s, args[i])
		if values[i].k == kBottom {
			return false
		}
	}
	if b.Nondeterministic {
		a.noCache(b.Name + " answers differently from call to call")
	}
	var result *val
	switch {
	case comparisons[b.Name]:
		result = opaque(a.compare(values[0], values[1]))
	case b.Name == ast.ParseRFC3339Nanos.Name:
		switch x := values[0]; x.k {
		case kRec:
			a.parsed[x.path.key()] = x.path
			result = &val{k: kInstant, path: x.path, t: x.t}
		case kNowText:
			result = &val{k: kNow}
		default:
			result = opaque(a.use(x, "parsed as a time"))
		}
	case b.Name == ast.ObjectGet.Name && arity == 3:
		result = a.objectGet(s, values, args)
	case b.Name == ast.Member.Name && arity == 2:
		result = a.member(values[0], values[1])
	case typePredicates[b.Name] && arity == 1 && values[0].k == kRecords:
		// The sidecar always sends the batch as an array.
		result = clean
	default:
		var t tags
		for _, v := range values {
			t |= a.use(v, "passed to "+b.Name)
		}
		result = opaque(t)
	}
	s.cond |= result.t
	if len(args) > arity {
		return a.destructure(s, args[arity], result)
	}
	s.cond |= a.truth(result)
	return true
}

// compare: the records a comparison depends on; a record's time parsed and set
// against the instant asked about is the one comparison a shape may side.
func (a *analysis) compare(x, y *val) tags {
	if x.k == kNow && y.k == kInstant {
		x, y = y, x
	}
	switch {
	case x.k == kInstant && y.k == kNow:
		a.compared[x.path.key()] = x.path
		return x.t | y.t
	case x.k == kInstant:
		a.otherwise[x.path.key()] = "compared with something other than the instant asked about"
		a.use(y, "compared with a record's time")
		return x.t | y.t
	case y.k == kInstant:
		a.otherwise[y.path.key()] = "compared with something other than the instant asked about"
		a.use(x, "compared with a record's time")
		return x.t | y.t
	}
	return a.use(x, "compared") | a.use(y, "compared")
}

func (a *analysis) objectGet(s *scope, values []*val, args []*ast.Term) *val {
	o, k, d := values[0], values[1], values[2]
	var keys []string
	constant := true
	switch kv := args[1].Value.(type) {
	case ast.String:
		keys = []string{string(kv)}
	case *ast.Array:
		kv.Foreach(func(t *ast.Term) {
			if str, ok := t.Value.(ast.String); ok {
				keys = append(keys, string(str))
			} else {
				constant = false
			}
		})
	default:
		constant = false
	}
	orDefault := func(v *val) *val {
		if v.k == kBottom {
			return d
		}
		if o.k == kInput && len(keys) == 1 && alwaysSent[keys[0]] {
			// The sidecar always sends it: the default is never taken.
			return v
		}
		if d.k == kClean || d.k == kEmpty {
			// Absent or present, the path's value says which: the default adds nothing.
			return v
		}
		return a.join(v, d, "an object.get default")
	}
	switch o.k {
	case kRec, kInput, kObj, kPkg:
		if !constant {
			if o.k == kRec && len(o.path) > 0 {
				return orDefault(&val{k: kRec, path: o.path.with(star), t: o.t | a.use(k, "a key")})
			}
			if o.k == kRec {
				a.noShapes("a field of the record is read by a computed name (object.get)")
			}
			return opaque(a.use(o, "read by a computed key") | a.use(k, "a key") | a.use(d, "a default"))
		}
		v := o
		for _, part := range keys {
			v = a.step(s, v, ast.StringTerm(part))
			if v.k == kBottom {
				break
			}
		}
		return orDefault(v)
	case kKeyed:
		if k.k == kID {
			return orDefault(a.step(s, o, args[1]))
		}
	case kColl:
		return orDefault(withTags(o.elem, o.t|a.use(k, "a key")))
	case kClean, kOpaque, kEmpty:
		return a.join(opaque(o.t|a.use(k, "a key")), d, "an object.get default")
	}
	return opaque(a.use(o, "passed to object.get") | a.use(k, "a key") | a.use(d, "a default"))
}

// member: x in coll.
func (a *analysis) member(x, coll *val) *val {
	if coll.k == kKeyed && coll.set && x.k == kID {
		return opaque(x.t)
	}
	return opaque(a.use(x, "tested for membership") | a.use(coll, "searched for a member"))
}
