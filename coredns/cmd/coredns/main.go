// Command coredns is CoreDNS with the rrl plugin and the in-tree plugins an
// authoritative server needs; the cloud and Kubernetes ones are left out.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	rrl "github.com/dnsrrl/rrl/coredns"

	// Plugins, in no particular order: dnsserver.Directives decides that.
	_ "github.com/coredns/caddy/onevent"
	_ "github.com/coredns/coredns/plugin/acl"
	_ "github.com/coredns/coredns/plugin/any"
	_ "github.com/coredns/coredns/plugin/auto"
	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/bufsize"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/cancel"
	_ "github.com/coredns/coredns/plugin/chaos"
	_ "github.com/coredns/coredns/plugin/debug"
	_ "github.com/coredns/coredns/plugin/dnssec"
	_ "github.com/coredns/coredns/plugin/dnstap"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/file"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/header"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/hosts"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/local"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metadata"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/minimal"
	_ "github.com/coredns/coredns/plugin/multisocket"
	_ "github.com/coredns/coredns/plugin/nsid"
	_ "github.com/coredns/coredns/plugin/pprof"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
	_ "github.com/coredns/coredns/plugin/rewrite"
	_ "github.com/coredns/coredns/plugin/root"
	_ "github.com/coredns/coredns/plugin/secondary"
	_ "github.com/coredns/coredns/plugin/sign"
	_ "github.com/coredns/coredns/plugin/template"
	_ "github.com/coredns/coredns/plugin/timeouts"
	_ "github.com/coredns/coredns/plugin/tls"
	_ "github.com/coredns/coredns/plugin/transfer"
	_ "github.com/coredns/coredns/plugin/tsig"
	_ "github.com/coredns/coredns/plugin/whoami"
)

// plugins are the directives this binary registers (see the imports). The
// order comes from CoreDNS's own list, so these plugins keep their usual
// places and rrl is put among them by InsertDirective.
var plugins = map[string]bool{
	"root": true, "metadata": true, "cancel": true, "tls": true, "timeouts": true,
	"multisocket": true, "reload": true, "nsid": true, "bufsize": true, "bind": true,
	"debug": true, "ready": true, "health": true, "pprof": true, "prometheus": true,
	"errors": true, "log": true, "dnstap": true, "local": true, "any": true,
	"chaos": true, "loadbalance": true, "tsig": true, "rewrite": true, "acl": true,
	"cache": true, "header": true, "dnssec": true, "minimal": true, "template": true,
	"transfer": true, "hosts": true, "file": true, "auto": true, "secondary": true,
	"loop": true, "forward": true, "whoami": true, "sign": true, "on": true,
}

func init() {
	var dirs []string
	for _, d := range dnsserver.Directives {
		if plugins[d] {
			dirs = append(dirs, d)
		}
	}
	dnsserver.Directives = rrl.InsertDirective(dirs)
}

func main() { coremain.Run() }
