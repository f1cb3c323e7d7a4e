// OPA's evaluator as a C shared library, for sidecar/policy/linked_opa.py.
//
// Built by scripts/install-linked-opa.sh from the pinned OPA module (go.mod) into
// bin/libwhoseopa.so. It loads a bundle directory (the same one the local OPA server
// is given: policies, data and a .manifest naming its revision), prepares each query
// once, and evaluates JSON input in the calling thread. Python calls it through
// ctypes, which releases the interpreter for the length of the call.
//
// Every entry point answers through `out`/`outLen`: a buffer allocated with C's malloc
// that the caller frees with whose_opa_free, holding the JSON answer or an error
// message. What the status codes mean is in the constants below.
package main

/*
#include <stdlib.h>
#include <stdint.h>
*/
import "C"

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/cgo"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/loader"
	"github.com/open-policy-agent/opa/v1/metrics"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/server/types"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
)

// Status codes returned to Python.
const (
	statusOK        = 0 // out holds the JSON answer
	statusUndefined = 1 // the query had no result (out is empty)
	statusRefused   = 2 // the query itself is wrong (a compile error): out holds why
	statusFailed    = 3 // evaluation failed or ran out of time: out holds why
)

// The bundle's name in the store, as `opa run --bundle DIR` would not name it either:
// provenance then reports it under this name, and the revision alone is what counts.
const bundleName = "whose"

type engine struct {
	dir      string
	compiler *ast.Compiler
	store    storage.Store
	revision string
	roots    []string

	mu       sync.RWMutex
	prepared map[string]*rego.PreparedEvalQuery
}

// confinedOut are the builtins a confined engine (a candidate policy that someone
// uploaded, policy/candidate.py) is compiled without: those that reach outside the
// evaluation (the network, DNS, the process's environment and configuration). A
// policy that names one, however spelled, fails to compile; with no host allowed,
// http.send could reach none even if it were left in.
var confinedOut = map[string]bool{
	"http.send":          true,
	"net.lookup_ip_addr": true,
	"opa.runtime":        true,
}

func confined() *ast.Capabilities {
	caps := ast.CapabilitiesForThisVersion()
	kept := caps.Builtins[:0:0]
	for _, b := range caps.Builtins {
		if !confinedOut[b.Name] {
			kept = append(kept, b)
		}
	}
	caps.Builtins = kept
	caps.AllowNet = []string{}
	return caps
}

func load(dir string, caps *ast.Capabilities) (*engine, error) {
	ctx := context.Background()
	b, err := loader.NewFileLoader().WithProcessAnnotation(true).AsBundle(dir)
	if err != nil {
		return nil, err
	}
	store := inmem.NewWithOpts(inmem.OptRoundTripOnWrite(false))
	txn, err := store.NewTransaction(ctx, storage.WriteParams)
	if err != nil {
		return nil, err
	}
	compiler := ast.NewCompiler()
	if caps != nil {
		compiler = compiler.WithCapabilities(caps)
	}
	err = bundle.Activate(&bundle.ActivateOpts{
		Ctx:      ctx,
		Store:    store,
		Txn:      txn,
		TxnCtx:   storage.NewContext(),
		Compiler: compiler,
		Metrics:  metrics.New(),
		Bundles:  map[string]*bundle.Bundle{bundleName: b},
	})
	if err != nil {
		store.Abort(ctx, txn)
		return nil, err
	}
	if err := store.Commit(ctx, txn); err != nil {
		return nil, err
	}
	roots := []string{""}
	if b.Manifest.Roots != nil {
		roots = *b.Manifest.Roots
	}
	return &engine{
		dir:      dir,
		compiler: compiler,
		store:    store,
		revision: b.Manifest.Revision,
		roots:    roots,
		prepared: map[string]*rego.PreparedEvalQuery{},
	}, nil
}

// query is the prepared query for `data.<path>` (path as in OPA's REST API, `a/b/c`),
// made on first use and reused: preparing compiles the query, evaluating does not.
func (e *engine) query(path string) (*rego.PreparedEvalQuery, error) {
	e.mu.RLock()
	pq, ok := e.prepared[path]
	e.mu.RUnlock()
	if ok {
		return pq, nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if pq, ok := e.prepared[path]; ok {
		return pq, nil
	}
	ref := "data." + strings.ReplaceAll(strings.Trim(path, "/"), "/", ".")
	prepared, err := rego.New(
		rego.Query(ref),
		rego.Compiler(e.compiler),
		rego.Store(e.store),
	).PrepareForEval(context.Background())
	if err != nil {
		return nil, err
	}
	e.prepared[path] = &prepared
	return &prepared, nil
}

func (e *engine) eval(path string, input []byte, timeout time.Duration) ([]byte, int, int64, error) {
	pq, err := e.query(path)
	if err != nil {
		return nil, statusRefused, 0, err
	}
	value, err := ast.ValueFromReader(bytes.NewReader(input))
	if err != nil {
		return nil, statusRefused, 0, fmt.Errorf("input: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	started := time.Now()
	rs, err := pq.Eval(ctx, rego.EvalParsedInput(value))
	spent := time.Since(started).Nanoseconds()
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("deadline of %s exceeded: %w", timeout, err)
		}
		return nil, statusFailed, spent, err
	}
	if len(rs) == 0 || len(rs[0].Expressions) == 0 {
		return nil, statusUndefined, spent, nil
	}
	out, err := json.Marshal(rs[0].Expressions[0].Value)
	if err != nil {
		return nil, statusFailed, spent, err
	}
	return out, statusOK, spent, nil
}

type compileRequest struct {
	Query    string   `json:"query"`
	Input    any      `json:"input"`
	Unknowns []string `json:"unknowns"`
}

// compile is partial evaluation with the options of OPA's POST /v1/compile, answering
// what that API puts under "result".
func (e *engine) compile(request []byte, timeout time.Duration) ([]byte, int, error) {
	var req compileRequest
	if err := json.Unmarshal(request, &req); err != nil {
		return nil, statusRefused, err
	}
	input, err := ast.InterfaceToValue(req.Input)
	if err != nil {
		return nil, statusRefused, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	pq, err := rego.New(
		rego.Compiler(e.compiler),
		rego.Store(e.store),
		rego.Query(req.Query),
		rego.ParsedInput(input),
		rego.Unknowns(req.Unknowns),
	).Partial(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, statusFailed, fmt.Errorf("deadline of %s exceeded: %w", timeout, err)
		}
		var astErrors ast.Errors
		if errors.As(err, &astErrors) {
			return nil, statusRefused, err
		}
		return nil, statusFailed, err
	}
	out, err := json.Marshal(types.PartialEvaluationResultV1{Queries: pq.Queries, Support: pq.Support})
	if err != nil {
		return nil, statusFailed, err
	}
	return out, statusOK, nil
}

func answer(out **C.char, outLen *C.size_t, data []byte) {
	if len(data) == 0 {
		*out, *outLen = nil, 0
		return
	}
	*out = (*C.char)(C.CBytes(data))
	*outLen = C.size_t(len(data))
}

func handle(h C.uintptr_t) (*engine, bool) {
	e, ok := cgo.Handle(h).Value().(*engine)
	return e, ok
}

//export whose_opa_open
func whose_opa_open(dir *C.char, dirLen C.int, out **C.char, outLen *C.size_t) C.uintptr_t {
	return open(C.GoStringN(dir, dirLen), nil, out, outLen)
}

// whose_opa_open_confined loads a bundle as whose_opa_open does, compiled without the
// builtins that reach outside the evaluation (`confined`): a candidate policy's.
//
//export whose_opa_open_confined
func whose_opa_open_confined(dir *C.char, dirLen C.int, out **C.char, outLen *C.size_t) C.uintptr_t {
	return open(C.GoStringN(dir, dirLen), confined(), out, outLen)
}

func open(dir string, caps *ast.Capabilities, out **C.char, outLen *C.size_t) C.uintptr_t {
	e, err := load(dir, caps)
	if err != nil {
		answer(out, outLen, []byte(err.Error()))
		return 0
	}
	about, _ := json.Marshal(map[string]any{"revision": e.revision, "roots": e.roots})
	answer(out, outLen, about)
	return C.uintptr_t(cgo.NewHandle(e))
}

//export whose_opa_eval
func whose_opa_eval(
	h C.uintptr_t,
	path *C.char, pathLen C.int,
	input *C.char, inputLen C.size_t,
	timeoutNs C.int64_t,
	out **C.char, outLen *C.size_t,
	evalNs *C.int64_t,
) C.int {
	e, _ := handle(h)
	data := unsafe.Slice((*byte)(unsafe.Pointer(input)), int(inputLen))
	result, status, spent, err := e.eval(C.GoStringN(path, pathLen), data, time.Duration(timeoutNs))
	*evalNs = C.int64_t(spent)
	if err != nil {
		answer(out, outLen, []byte(err.Error()))
	} else {
		answer(out, outLen, result)
	}
	return C.int(status)
}

//export whose_opa_compile
func whose_opa_compile(
	h C.uintptr_t,
	request *C.char, requestLen C.size_t,
	timeoutNs C.int64_t,
	out **C.char, outLen *C.size_t,
) C.int {
	e, _ := handle(h)
	data := unsafe.Slice((*byte)(unsafe.Pointer(request)), int(requestLen))
	result, status, err := e.compile(data, time.Duration(timeoutNs))
	if err != nil {
		answer(out, outLen, []byte(err.Error()))
	} else {
		answer(out, outLen, result)
	}
	return C.int(status)
}

// whose_opa_readset answers what the rule at `path` (OPA's REST form, `a/b/c`) reads of
// the records of its input: readset.go.
//
//export whose_opa_readset
func whose_opa_readset(h C.uintptr_t, path *C.char, pathLen C.int, out **C.char, outLen *C.size_t) C.int {
	e, _ := handle(h)
	set, err := e.readSet(C.GoStringN(path, pathLen))
	if err != nil {
		answer(out, outLen, []byte(err.Error()))
		return C.int(statusFailed)
	}
	data, err := json.Marshal(set)
	if err != nil {
		answer(out, outLen, []byte(err.Error()))
		return C.int(statusFailed)
	}
	answer(out, outLen, data)
	return C.int(statusOK)
}

//export whose_opa_close
func whose_opa_close(h C.uintptr_t) {
	cgo.Handle(h).Delete()
}

//export whose_opa_free
func whose_opa_free(p unsafe.Pointer) {
	C.free(p)
}

func main() {}
