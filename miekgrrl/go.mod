module github.com/dnsrrl/rrl/miekgrrl

go 1.26

require github.com/dnsrrl/rrl v0.0.0

replace github.com/dnsrrl/rrl => ../
