package rrl

import (
	"strings"
	"testing"
)

func TestInsertDirective(t *testing.T) {
	in := []string{"root", "metadata", "prometheus", "errors", "log", "dnstap", "acl", "cache", "file", "forward"}
	got := strings.Join(InsertDirective(in), " ")
	want := "root metadata prometheus errors log dnstap rrl acl cache file forward"
	if got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	in = []string{"log", "rrl", "file"}
	if got := strings.Join(InsertDirective(in), " "); got != "log rrl file" {
		t.Errorf("rrl already present: got %s", got)
	}
	in = []string{"errors", "file"}
	if got := strings.Join(InsertDirective(in), " "); got != "errors rrl file" {
		t.Errorf("got %s", got)
	}
}
