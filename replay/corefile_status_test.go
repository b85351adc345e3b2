package replay_test

import (
	"strings"
	"testing"

	"github.com/dnsrrl/rrl/replay"
)

// TestParseCorefileStatus: a block with the plugin's status and
// log-limited options replays as without them, since they change what an
// operator sees, not what is limited.
func TestParseCorefileStatus(t *testing.T) {
	cf, err := replay.ParseCorefile("Corefile", strings.NewReader(
		"example.com:53 {\n rrl {\n  responses-per-second 5\n  status 127.0.0.1:9154\n  log-limited 1m 3\n }\n}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(cf.Settings) != 1 || cf.Settings[0].Keyword != "responses-per-second" {
		t.Errorf("settings %+v, want responses-per-second alone", cf.Settings)
	}
}
