module github.com/dnsrrl/rrl/miekgrrl

go 1.26

require (
	github.com/dchest/siphash v1.2.3
	github.com/dnsrrl/rrl v0.1.0
	github.com/dnsrrl/rrl/kerneldrop v0.1.0
	github.com/miekg/dns v1.1.73
)

require (
	github.com/cilium/ebpf v0.22.0 // indirect
	golang.org/x/net v0.57.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
)

replace (
	github.com/dnsrrl/rrl => ../
	github.com/dnsrrl/rrl/kerneldrop => ../kerneldrop
)
