package rrl

import (
	"context"
	"strings"
	"time"

	"github.com/coredns/coredns/plugin/metadata"
)

// metaContext gives the rest of the chain a metadata map when the metadata
// plugin is not configured: file, auto and cache only record that an answer
// came from a wildcard ("zone/wildcard") if such a map exists, and without
// that record every name under a wildcard would be an account of its own.
//
// metadata.ContextWithMetadata would cost two allocations per query; this
// context lives in the pooled recorder instead and reuses its map. Lookups
// of the metadata key are answered from meta, all others from the request's
// context, so deadlines and cancellation are the request's own.
type metaContext struct {
	parent context.Context
	meta   context.Context // holds only the metadata map
	md     map[string]metadata.Func
	own    bool // this request uses md: no metadata plugin
}

func (c *metaContext) Deadline() (time.Time, bool) { return c.parent.Deadline() }
func (c *metaContext) Done() <-chan struct{}       { return c.parent.Done() }
func (c *metaContext) Err() error                  { return c.parent.Err() }

// Value implements context.Context. meta holds nothing but the metadata
// map, so any value it has is the answer.
func (c *metaContext) Value(key any) any {
	if v := c.meta.Value(key); v != nil {
		return v
	}
	return c.parent.Value(key)
}

// withMetadata returns ctx if it already carries a metadata map, or else
// c set up over ctx with an empty map.
func (c *metaContext) withMetadata(ctx context.Context) context.Context {
	if metadata.ValueFuncs(ctx) != nil {
		return ctx
	}
	if c.meta == nil {
		c.meta = metadata.ContextWithMetadata(context.Background())
		c.md = metadata.ValueFuncs(c.meta)
	} else if len(c.md) > 0 {
		clear(c.md)
	}
	c.parent, c.own = ctx, true
	return c
}

// wildcardOrigin returns the parent of the wildcard that synthesised the
// response ("example.org." for "*.example.org."), or "" when none did.
func (c *metaContext) wildcardOrigin(ctx context.Context) string {
	var f metadata.Func
	if c.own {
		f = c.md[wildcardLabel]
	} else {
		f = metadata.ValueFunc(ctx, wildcardLabel)
	}
	if f == nil {
		return ""
	}
	return strings.TrimPrefix(f(), "*.")
}
