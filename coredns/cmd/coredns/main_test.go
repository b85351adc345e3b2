package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"
)

// TestDirectives checks the plugin order this binary runs with: rrl below
// the plugins that observe the final response and above those that make
// it, and every directive backed by a registered plugin.
func TestDirectives(t *testing.T) {
	dirs := dnsserver.Directives
	at := slices.Index(dirs, "rrl")
	if at < 0 {
		t.Fatalf("rrl is not a directive: %v", dirs)
	}
	for _, before := range []string{"metadata", "prometheus", "errors", "log", "dnstap"} {
		if i := slices.Index(dirs, before); i < 0 || i > at {
			t.Errorf("%s should come before rrl: %v", before, dirs)
		}
	}
	for _, after := range []string{"acl", "rewrite", "cache", "file", "auto", "secondary", "forward", "whoami", "any"} {
		if i := slices.Index(dirs, after); i < at {
			t.Errorf("%s should come after rrl: %v", after, dirs)
		}
	}
	registered := map[string]bool{}
	for _, p := range caddy.ListPlugins()["others"] {
		registered[strings.TrimPrefix(p, "dns.")] = true
	}
	for _, d := range dirs {
		if !registered[d] {
			t.Errorf("directive %s has no plugin in this binary", d)
		}
	}
	for _, p := range []string{"kubernetes", "etcd", "route53", "azure", "clouddns"} {
		if slices.Contains(dirs, p) {
			t.Errorf("cloud or Kubernetes plugin %s is built in", p)
		}
	}
}
