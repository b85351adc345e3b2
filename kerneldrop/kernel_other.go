//go:build !linux

package kerneldrop

import (
	"errors"
)

// openKernel fails: XDP is Linux's. ReportOnly works everywhere.
func openKernel(ifaces []string, logf func(string, ...any)) (kernel, error) {
	return nil, errors.New("kerneldrop: XDP needs Linux")
}
