package replay_test

import (
	"fmt"
	"log"

	"github.com/dnsrrl/rrl/replay"
)

// Replay the sample capture with an allowance of 5 answers a second and a
// request limit, and see whom it would have limited.
func Example() {
	var settings []replay.Setting
	for _, kv := range []string{"responses-per-second=5", "requests-per-second=20"} {
		s, err := replay.ParseSetting(kv)
		if err != nil {
			log.Fatal(err)
		}
		settings = append(settings, s)
	}
	r, err := replay.New(replay.Options{Settings: settings, Top: 1})
	if err != nil {
		log.Fatal(err)
	}
	if err := r.ReadFile("testdata/sample.pcap"); err != nil {
		log.Fatal(err)
	}
	rep := r.Reports()[0]
	fmt.Printf("%d responses: %d sent, %d slipped, %d dropped (%d of them with their query)\n",
		rep.Responses, rep.Sent, rep.Slipped, rep.Dropped, rep.RequestsDropped)
	fmt.Printf("%d bytes of %d would have been sent\n", rep.Bytes.Sent, rep.Bytes.Captured)
	n := rep.Networks[0]
	fmt.Printf("most limited: %s from %s\n", n.Network, n.First.Format("15:04:05.000"))
	// Output:
	// 1000 responses: 635 sent, 157 slipped, 208 dropped (52 of them with their query)
	// 63247 bytes of 145929 would have been sent
	// most limited: 198.51.100.0/24 from 12:00:05.240
}
