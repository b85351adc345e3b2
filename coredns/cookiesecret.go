package rrl

import (
	"crypto/rand"
	"sync"
)

var (
	secretOnce sync.Once
	secret     [16]byte
)

// processSecret returns a random cookie secret drawn once per process, so
// that a reload, or another server block on the same listener, keeps
// accepting the server cookies clients already hold.
func processSecret() [16]byte {
	secretOnce.Do(func() {
		if _, err := rand.Read(secret[:]); err != nil {
			panic("rrl: no randomness for the cookie secret: " + err.Error())
		}
	})
	return secret
}

// secretRegistry remembers the cookie secret of the first block on each
// listener of the configuration being loaded, to warn when another block on
// that listener has a different one. Each block keeps its own secret (and
// its own table): sharing one silently would make a block's cookie-secret
// apply to its neighbours.
type secretRegistry struct {
	mu sync.Mutex
	m  map[string]listenerSecret
}

type listenerSecret struct {
	gen    any
	secret [16]byte
	zones  []string
}

var listenerSecrets = &secretRegistry{m: map[string]listenerSecret{}}

// check records secret for listener in configuration gen, and reports the
// zones of an earlier block of gen on listener with a different secret.
func (r *secretRegistry) check(gen any, listener string, secret [16]byte, zones []string) ([]string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old, ok := r.m[listener]
	if !ok || old.gen != gen {
		r.m[listener] = listenerSecret{gen: gen, secret: secret, zones: zones}
		return nil, false
	}
	return old.zones, old.secret != secret
}
