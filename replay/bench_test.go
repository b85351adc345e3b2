package replay_test

import (
	"bufio"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dnsrrl/rrl/replay"
	"github.com/dnsrrl/rrl/replay/internal/capgen"
)

var bigCapture struct {
	once sync.Once
	path string
	err  error
}

// millionPackets writes, once per process, a pcap of a minute of traffic:
// 500,040 exchanges (ordinary clients, a flood, a spray), 1,012,194 packets.
func millionPackets(b *testing.B) string {
	bigCapture.once.Do(func() {
		dir, err := os.MkdirTemp("", "rrl-replay-bench")
		if err != nil {
			bigCapture.err = err
			return
		}
		bigCapture.path = filepath.Join(dir, "million.pcap")
		f, err := os.Create(bigCapture.path)
		if err != nil {
			bigCapture.err = err
			return
		}
		defer f.Close()
		bw := bufio.NewWriterSize(f, 1<<20)
		w, err := capgen.NewWriter(bw, ethernet, false)
		if err == nil {
			err = capgen.Traffic(1, start, time.Minute, 8334, 0.3, 0.1, w.Write)
		}
		if err == nil {
			err = bw.Flush()
		}
		bigCapture.err = err
	})
	if bigCapture.err != nil {
		b.Fatal(bigCapture.err)
	}
	b.Cleanup(func() {}) // the file is left for the next benchmark of this process
	return bigCapture.path
}

// BenchmarkReplayMillion replays a pcap of about a million DNS packets from
// disk (in the page cache after the first round) with a response limit and
// a request limit set, and reports packets per second and the peak heap in
// use, (live and not yet swept objects) sampled every millisecond.
func BenchmarkReplayMillion(b *testing.B) {
	path := millionPackets(b)
	opts := replay.Options{Settings: settings(b, "responses-per-second=5", "requests-per-second=50")}
	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go samplePeakHeap(&peak, stop, sampled)
	runtime.GC()
	b.ResetTimer()
	var packets int64
	for i := 0; i < b.N; i++ {
		r, err := replay.New(opts)
		if err != nil {
			b.Fatal(err)
		}
		if err := r.ReadFile(path); err != nil {
			b.Fatal(err)
		}
		p, _ := r.Stats()
		packets += p
	}
	b.StopTimer()
	close(stop)
	<-sampled
	b.ReportMetric(float64(packets)/b.Elapsed().Seconds(), "packets/s")
	b.ReportMetric(float64(peak.Load())/(1<<20), "MB-peak-heap")
}

func samplePeakHeap(peak *atomic.Uint64, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			metrics.Read(sample) // unlike runtime.ReadMemStats, no stop of the world
			if v := sample[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
		}
	}
}
