package miekgrrl

import (
	"sync"
	"sync/atomic"
)

// maxWildcards bounds the table of wildcard names. Origins come from zone
// data, not from queries, so a server rarely needs more than a handful; past
// the bound each name is still right, just allocated afresh. (A variable for
// the tests.)
var maxWildcards = 4096

// wildcards maps a lower-cased "*.<origin>." to the same string, built once.
// Readers load the map without locking; a writer copies it, which is rare.
var (
	wildcards   atomic.Pointer[map[string]string]
	wildcardsMu sync.Mutex
)

// wildcardName returns "*.<origin>" in lower case with a trailing dot,
// without allocating when the name was seen before. An origin that already
// starts with "*." is taken to be the wildcard itself.
func wildcardName(origin string) string {
	var buf [2 + 256]byte
	b := buf[:0]
	if len(origin) < 2 || origin[0] != '*' || origin[1] != '.' {
		b = append(b, '*', '.')
	}
	if origin != "." {
		b = appendLower(b, origin)
	}
	if b[len(b)-1] != '.' {
		b = append(b, '.')
	}
	if m := wildcards.Load(); m != nil {
		if s, ok := (*m)[string(b)]; ok { // no allocation: the compiler converts in place
			return s
		}
	}
	return internWildcard(string(b))
}

// appendLower appends s to b with ASCII upper case folded: the core compares
// names without case, so one spelling is enough for the table.
func appendLower(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		b = append(b, c)
	}
	return b
}

// internWildcard adds s to the table unless the table is full, and returns
// the table's copy.
func internWildcard(s string) string {
	wildcardsMu.Lock()
	defer wildcardsMu.Unlock()
	old := wildcards.Load()
	if old != nil {
		if t, ok := (*old)[s]; ok {
			return t
		}
		if len(*old) >= maxWildcards {
			return s
		}
	}
	m := make(map[string]string, 1+lenMap(old))
	if old != nil {
		for k, v := range *old {
			m[k] = v
		}
	}
	m[s] = s
	wildcards.Store(&m)
	return s
}

func lenMap(m *map[string]string) int {
	if m == nil {
		return 0
	}
	return len(*m)
}
