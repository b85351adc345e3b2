module github.com/dnsrrl/rrl/coredns

go 1.26

require (
	github.com/dnsrrl/rrl v0.0.0
	github.com/dnsrrl/rrl/miekgrrl v0.0.0
)

replace (
	github.com/dnsrrl/rrl => ../
	github.com/dnsrrl/rrl/miekgrrl => ../miekgrrl
)
