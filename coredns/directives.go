package rrl

// anchors are the plugins that must run before rrl, outermost first: they
// observe or log what is finally sent (dnstap must not record responses
// rrl dropped), so rrl sits just below the last of them that is present,
// and so above every plugin that makes or changes responses (acl, rewrite,
// cache, file, forward, ...).
var anchors = []string{"metadata", "prometheus", "errors", "log", "dnstap"}

// InsertDirective returns a copy of dirs, a plugin order such as
// dnsserver.Directives, with "rrl" placed where it sees every final
// response. A main package that builds CoreDNS with this plugin uses it as:
//
//	dnsserver.Directives = rrl.InsertDirective(dnsserver.Directives)
//
// If dirs already names rrl, the copy is unchanged.
func InsertDirective(dirs []string) []string {
	out := make([]string, 0, len(dirs)+1)
	at := 0
	for i, d := range dirs {
		if d == pluginName {
			return append(out, dirs...)
		}
		for _, a := range anchors {
			if d == a {
				at = i + 1
			}
		}
	}
	out = append(out, dirs[:at]...)
	out = append(out, pluginName)
	return append(out, dirs[at:]...)
}
