module github.com/dnsrrl/rrl/replay

go 1.26

replace (
	github.com/dnsrrl/rrl => ../
	github.com/dnsrrl/rrl/kerneldrop => ../kerneldrop
	github.com/dnsrrl/rrl/miekgrrl => ../miekgrrl
)

require (
	github.com/coredns/caddy v1.1.4
	github.com/dnsrrl/rrl v0.1.0
	github.com/dnsrrl/rrl/miekgrrl v0.1.0
	github.com/dnstap/golang-dnstap v0.4.0
	github.com/farsightsec/golang-framestream v0.3.0
	github.com/gopacket/gopacket v1.7.7
	github.com/miekg/dns v1.1.73
	google.golang.org/protobuf v1.36.12
)

require (
	github.com/dchest/siphash v1.2.3 // indirect
	golang.org/x/net v0.57.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
)
