package rrl

// RunningTickers tells the external tests how many block tickers run.
func RunningTickers() int64 { return runningTickers.Load() }

// CookieOf gives the external tests cookieOf.
var CookieOf = cookieOf
