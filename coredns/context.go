package rrl

import (
	"context"
	"strings"
	"sync/atomic"
	"time"

	"github.com/coredns/coredns/plugin/metadata"
)

// metaContext gives the rest of the chain a metadata map when the metadata
// plugin is not configured: file, auto and cache only record that an answer
// came from a wildcard ("zone/wildcard") if such a map exists, and without
// that record every name under a wildcard would be an account of its own.
//
// It lives in the request's recorder, which is allocated per request and
// never reused: plugins such as cache keep the context (and the writer) in
// goroutines that outlive ServeDNS (prefetch, serve-stale verification), so
// nothing whose address escapes into the chain may be recycled.
//
// The map itself is made only when a plugin looks the metadata key up, which
// most responses never do: metadata.ContextWithMetadata costs two
// allocations. Lookups of other keys are answered from the request's context,
// and so are deadlines and cancellation.
type metaContext struct {
	parent context.Context                 // the request's context
	meta   atomic.Pointer[context.Context] // holds only the metadata map; nil until asked for
	own    bool                            // the chain is given c: no metadata plugin
}

func (c *metaContext) Deadline() (time.Time, bool) { return c.parent.Deadline() }
func (c *metaContext) Done() <-chan struct{}       { return c.parent.Done() }
func (c *metaContext) Err() error                  { return c.parent.Err() }

// metadataKey is the metadata plugin's context key, learnt once by asking
// metadata.ValueFuncs to look it up in a context that records the question.
var metadataKey = func() any {
	var p keyProbe
	metadata.ValueFuncs(&p)
	return p.key
}()

type keyProbe struct {
	context.Context
	key any
}

func (p *keyProbe) Value(key any) any { p.key = key; return nil }

// Value implements context.Context. The metadata key is answered from meta,
// made on first use; any other from the request's context. A goroutine of
// the chain that outlives the request (cache prefetch) may ask while the
// request's goroutine reads meta, so meta is set once, atomically.
func (c *metaContext) Value(key any) any {
	if key == metadataKey {
		m := c.meta.Load()
		if m == nil {
			made := metadata.ContextWithMetadata(context.Background())
			if m = &made; !c.meta.CompareAndSwap(nil, m) {
				m = c.meta.Load()
			}
		}
		return (*m).Value(key)
	}
	return c.parent.Value(key)
}

// withMetadata returns ctx if it already carries a metadata map, or else
// c set up over ctx.
func (c *metaContext) withMetadata(ctx context.Context) context.Context {
	c.parent = ctx
	if ctx.Value(metadataKey) != nil {
		return ctx
	}
	c.own = true
	return c
}

// wildcardOrigin returns the parent of the wildcard that synthesised the
// response ("example.org." for "*.example.org."), or "" when none did.
// miekgrrl.Tuple takes this origin and names the account "*.<origin>",
// the wildcard itself, as the core's SalientName convention has it.
func (c *metaContext) wildcardOrigin(ctx context.Context) string {
	var f metadata.Func
	switch {
	case !c.own: // the metadata plugin's map
		f = metadata.ValueFunc(ctx, wildcardLabel)
	case c.meta.Load() != nil:
		f = metadata.ValueFunc(*c.meta.Load(), wildcardLabel)
	}
	if f == nil {
		return ""
	}
	return strings.TrimPrefix(f(), "*.")
}
