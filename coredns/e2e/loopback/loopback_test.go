package loopback

import "testing"

func TestServerAndSource(t *testing.T) {
	for _, v := range []string{"127.0.0.1:53", "[::1]:1053", "127.9.8.7:1"} {
		if _, err := Server("server", v); err != nil {
			t.Errorf("Server(%q): %v", v, err)
		}
	}
	for _, v := range []string{"192.0.2.1:53", "127.0.0.1", "", "[2001:db8::1]:53", "localhost:53"} {
		if _, err := Server("server", v); err == nil {
			t.Errorf("Server(%q) accepted", v)
		}
	}
	if _, err := Source("src", "127.0.50.1"); err != nil {
		t.Error(err)
	}
	for _, v := range []string{"10.0.0.1", "", "127.0.0.1:53"} {
		if _, err := Source("src", v); err == nil || err.Error() != `-src "`+v+`": want a loopback address` {
			t.Errorf("Source(%q): %v", v, err)
		}
	}
}
