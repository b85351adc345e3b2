package rrl

import (
	"runtime"
	"strings"
	"time"
)

// RunningTickers tells the tests how many block tickers run: the goroutines
// in runTicker, counted from a dump of every goroutine's stack. A ticker
// that was just stopped may still be on its way out of runTicker, so the
// count is taken again until two counts a moment apart agree (boundedly).
func RunningTickers() int64 {
	n := tickerGoroutines()
	for range 200 {
		time.Sleep(time.Millisecond)
		m := tickerGoroutines()
		if m == n {
			break
		}
		n = m
	}
	return n
}

// WaitTickers waits until want tickers run, or five seconds have passed,
// and returns how many run. A stopped ticker's goroutine leaves runTicker
// just after stop has returned, when the scheduler runs it: on a loaded
// machine that can take longer than the moment RunningTickers waits.
func WaitTickers(want int64) int64 {
	n := tickerGoroutines()
	for i := 0; i < 5000 && n != want; i++ {
		time.Sleep(time.Millisecond) // polling, bounded; nothing is asserted on time
		n = tickerGoroutines()
	}
	return n
}

func tickerGoroutines() int64 {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return int64(strings.Count(string(buf[:n]), ".(*RRL).runTicker("))
		}
		buf = make([]byte, 2*len(buf))
	}
}

// episodeCount is how many episodes e remembers.
func episodeCount(e *episodes) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.m)
}

// CookieOf gives the external tests cookieOf.
var CookieOf = cookieOf
