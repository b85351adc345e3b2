package rrl

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/coredns/coredns/plugin/metadata"
)

type ctxKey struct{}

func TestMetaContextDelegates(t *testing.T) {
	parent, cancel := context.WithTimeout(context.WithValue(context.Background(), ctxKey{}, "v"), time.Hour)
	defer cancel()
	var mc metaContext
	ctx := mc.withMetadata(parent)
	if ctx == parent {
		t.Fatal("no metadata map was added")
	}
	if ctx.Value(ctxKey{}) != "v" {
		t.Error("the request's values are lost")
	}
	if d1, _ := ctx.Deadline(); d1 != func() time.Time { d, _ := parent.Deadline(); return d }() {
		t.Error("the request's deadline is lost")
	}
	if !metadata.SetValueFunc(ctx, wildcardLabel, func() string { return "*.w.example.org." }) {
		t.Fatal("plugins cannot record metadata")
	}
	if got := mc.wildcardOrigin(ctx); got != "w.example.org." {
		t.Errorf("wildcard origin %q", got)
	}
	// A child context is cancelled with the request.
	child, stop := context.WithCancel(ctx)
	defer stop()
	cancel()
	select {
	case <-child.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("cancelling the request did not reach a context made below rrl")
	}
	if ctx.Err() == nil {
		t.Error("Err does not report the request's cancellation")
	}

	// A fresh metaContext has no map until a plugin asks for it.
	var fresh metaContext
	ctx = fresh.withMetadata(context.Background())
	if fresh.wildcardOrigin(ctx) != "" || fresh.meta.Load() != nil {
		t.Error("a map was made, or holds something, before any plugin asked")
	}
	// With the metadata plugin's own map, that one is used.
	own := metadata.ContextWithMetadata(context.Background())
	var mc2 metaContext
	if mc2.withMetadata(own) != own {
		t.Error("an existing metadata map was shadowed")
	}
}

// TestMetaContextConcurrentFirstUse: a goroutine of the chain that outlives
// the request (cache prefetch) may ask for the metadata map while the
// request reads it: one map is made, and no race (run under -race).
func TestMetaContextConcurrentFirstUse(t *testing.T) {
	for range 100 {
		var mc metaContext
		ctx := mc.withMetadata(context.Background())
		done := make(chan any)
		go func() { done <- ctx.Value(metadataKey) }()
		mine := ctx.Value(metadataKey)
		mc.wildcardOrigin(ctx)
		if theirs := <-done; reflect.ValueOf(theirs).UnsafePointer() != reflect.ValueOf(mine).UnsafePointer() {
			t.Fatal("two metadata maps made for one request")
		}
	}
}
