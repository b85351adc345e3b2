package main

import (
	"testing"

	"github.com/dnsrrl/rrl/internal/pgocheck"
)

// TestBuildUsesProfile checks that go build of this command, as the README
// runs it, uses this folder's default.pgo.
func TestBuildUsesProfile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command")
	}
	pgocheck.BuildUsesProfile(t, "coredns")
}
