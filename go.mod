module github.com/dnsrrl/rrl

go 1.26
