package rrl

import (
	"fmt"
	"net/netip"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"

	core "github.com/dnsrrl/rrl"
	"github.com/dnsrrl/rrl/kerneldrop"
)

// kernelOptions are the block's kernel-drop settings: the interfaces the
// XDP program attaches to (none: off), and its two durations, 0 for the
// defaults.
type kernelOptions struct {
	interfaces  []string
	after, hold time.Duration
}

// The ranges of kernel-drop-after and kernel-drop-for. A network must be
// refused for a while before its packets are dropped unseen, and it must
// come back to be judged again: hours in the kernel would hide that a
// flood ended.
const (
	minKernelAfter, maxKernelAfter = 100 * time.Millisecond, time.Hour
	minKernelFor, maxKernelFor     = time.Second, time.Hour
)

// parseKernel reads kernel-drop, kernel-drop-after and kernel-drop-for.
func parseKernel(c *caddy.Controller, opts *kernelOptions, kw string, args []string) error {
	if kw == "kernel-drop" {
		if len(args) == 0 {
			return c.Errf("%s needs at least one interface, such as lo or eth0", kw)
		}
		opts.interfaces = args
		return nil
	}
	if len(args) != 1 {
		return c.Errf("%s takes exactly one value, got %d", kw, len(args))
	}
	lo, hi, dst := minKernelAfter, maxKernelAfter, &opts.after
	if kw == "kernel-drop-for" {
		lo, hi, dst = minKernelFor, maxKernelFor, &opts.hold
	}
	d, err := time.ParseDuration(args[0])
	if err != nil || d < lo || d > hi {
		return c.Errf("%s %q: want a duration from %v to %v, such as 1s", kw, args[0], lo, hi)
	}
	*dst = d
	return nil
}

// checkKernel refuses the durations without kernel-drop, which would
// otherwise set nothing, and kernel-drop without a request limit, which
// would never refuse anything to drop.
func checkKernel(c *caddy.Controller, cfg *core.Config, opts kernelOptions, seen map[string]bool) error {
	if len(opts.interfaces) == 0 {
		for _, kw := range []string{"kernel-drop-after", "kernel-drop-for"} {
			if seen[kw] {
				return c.Errf("%s needs kernel-drop INTERFACE...", kw)
			}
		}
		return nil
	}
	rps, _ := cfg.Value("requests-per-second")
	if rps == "0" && len(cfg.RequestPrefixes(false))+len(cfg.RequestPrefixes(true)) == 0 {
		return c.Err("kernel-drop needs requests-per-second or a request prefix: it drops networks that a request limit keeps refusing")
	}
	return nil
}

// kernelDrop is a block's part of the kernel drop list.
type kernelDrop struct {
	opts kernelOptions
	// list is set at startup; the server may already be serving then.
	list atomic.Pointer[kerneldrop.List]
}

// newKernelDrop returns the block's kernel drop list, not yet open, or
// nil without kernel-drop. Open happens at startup, so that a
// configuration that fails to load attaches nothing.
func newKernelDrop(opts kernelOptions) *kernelDrop {
	if len(opts.interfaces) == 0 {
		return nil
	}
	return &kernelDrop{opts: opts}
}

// open attaches the program to the block's interfaces (or joins the one
// this process attached there) and names the block's UDP listeners. The
// error stops CoreDNS, naming the interface and the cause.
func (k *kernelDrop) open(reportOnly bool, hosts []string, port string) error {
	list, err := kerneldrop.Open(kerneldrop.Config{
		Interfaces: k.opts.interfaces,
		After:      k.opts.after,
		For:        k.opts.hold,
		ReportOnly: reportOnly,
		Logf:       log.Infof,
	})
	if err != nil {
		return err
	}
	for _, ap := range kernelListeners(hosts, port) {
		if err := list.AddListener(ap); err != nil {
			list.Close()
			return err
		}
	}
	k.list.Store(list)
	return nil
}

// kernelListeners are the addresses a block listens on, as the program
// matches them: no bind directive is every address, [::] standing for
// both families; a host that is not an address (a name) is left out.
func kernelListeners(hosts []string, port string) []netip.AddrPort {
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return nil
	}
	var aps []netip.AddrPort
	for _, h := range hosts {
		if h == "" {
			h = "::"
		}
		if a, err := netip.ParseAddr(h); err == nil {
			aps = append(aps, netip.AddrPortFrom(a, uint16(p)))
		}
	}
	return aps
}

// refused tells the list that a request limit refused an unproven UDP
// request from network, the network of the account that refused it.
func (k *kernelDrop) refused(network netip.Prefix) {
	k.list.Load().Refused(network) // a nil List (not yet open) does nothing
}

// opened returns the open list, or nil: kernel-drop is off, or the block
// has not started.
func (k *kernelDrop) opened() *kerneldrop.List {
	if k == nil {
		return nil
	}
	return k.list.Load()
}

// close takes the block's networks out of the kernel, and detaches the
// program where no other block (or a reload's new server) still uses it.
func (k *kernelDrop) close() {
	if l := k.opened(); l != nil {
		l.Close()
	}
}

// onStartupKernel opens the block's kernel drop list at startup, when
// kernel-drop is set.
func onStartupKernel(c *caddy.Controller, h *RRL) {
	if h.kernel == nil {
		return
	}
	cfg := dnsserver.GetConfig(c)
	c.OnStartup(func() error {
		if cfg.Transport != "dns" {
			return fmt.Errorf("kernel-drop: the block %v serves %s, not plain DNS over UDP, whose packets alone it drops", h.Zones, cfg.Transport)
		}
		return h.kernel.open(h.reportOnly, listenHosts(cfg), cfg.Port)
	})
}

// kernelJSON is a network in the kernel drop list as the status endpoint
// serves it (in report-only mode, one that would be).
type kernelJSON struct {
	Network     string    `json:"network"`      // "192.0.2.0/24"
	RefusedFrom time.Time `json:"refused_from"` // when the run of refusals that put it there began
	Since       time.Time `json:"since"`        // when it went into the kernel
	LeftSeconds float64   `json:"left_seconds"` // until it leaves, and its packets reach the server again
}

// newKernelJSON returns the networks of l, nil when l is nil.
func newKernelJSON(l *kerneldrop.List) []kernelJSON {
	var out []kernelJSON
	for _, e := range l.Networks() {
		out = append(out, kernelJSON{Network: e.Network.String(), RefusedFrom: e.Refused, Since: e.Since, LeftSeconds: e.Left.Seconds()})
	}
	return out
}
