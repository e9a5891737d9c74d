package main

import (
	"math"
	"strings"
	"testing"
)

const hddJSON = `{"kind":"hdd","rpm":7200,"track_to_track_ms":1.0,"average_seek_ms":8.5,
"full_stroke_ms":17,"outer_mbps":200,"inner_mbps":100,"drive_bytes":1e12,"write_cache":false,
"write_cache_bytes":67108864,"queue_depth":32,"interface_mbps":550,"command_overhead_ms":0.05,
"read_ahead_bytes":1048576}`

func model(t *testing.T, js string) Model {
	t.Helper()
	m, _, err := NewModel([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// lcg: a fixed pseudo-random sequence, so the test is the same every time
type lcg uint64

func (l *lcg) next() uint64 {
	*l = *l*6364136223846793005 + 1442695040888963407
	return uint64(*l >> 11)
}

func TestZeroAddsNothing(t *testing.T) {
	m := model(t, `{"kind":"zero"}`)
	if got := m.Complete(OpWrite, 0, 8192, 1.5); got != 1.5 {
		t.Fatalf("zero model waited: %v", got)
	}
}

func TestHDDRandomReadsOverTheWholeDriveAreSeekPlusHalfARevolution(t *testing.T) {
	m := model(t, hddJSON)
	r := lcg(1)
	now, n := 0.0, 2000
	for i := 0; i < n; i++ {
		off := int64(r.next()%(1e12/4096)) * 4096
		now = m.Complete(OpRead, off, 4096, now)
	}
	iops := float64(n) / now
	// 8.5 ms average seek + 4.17 ms half a revolution: about 80 IOPS
	if iops < 70 || iops > 95 {
		t.Fatalf("random 4 KiB reads at QD1 over the drive: %.1f IOPS", iops)
	}
}

func TestHDDSequentialWritesRunAtTheMediaRateThroughTheCache(t *testing.T) {
	cached := model(t, strings.Replace(hddJSON, `"write_cache":false`, `"write_cache":true`, 1))
	now, off := 0.0, int64(0)
	var half float64
	for i := 0; i < 1000; i++ {
		if i == 500 {
			half = now
		}
		now = cached.Complete(OpWrite, off, 1<<20, now)
		off += 1 << 20
	}
	// once the cache is full, a write waits for the platter: the media rate, 190 MB/s
	// at the outer edge less the track-to-track seeks
	mbps := float64(500<<20) / (now - half) / 1e6
	if mbps < 160 || mbps > 200 {
		t.Fatalf("sequential 1 MiB writes through the cache, steady: %.1f MB/s", mbps)
	}
	// without the cache, at queue depth 1, each write has just missed its sector: a
	// revolution lost every time (why drives ship with the cache on)
	bare := model(t, hddJSON)
	now, off = 0.0, 0
	for i := 0; i < 200; i++ {
		now = bare.Complete(OpWrite, off, 1<<20, now)
		off += 1 << 20
	}
	if mbps := float64(off) / now / 1e6; mbps > 120 {
		t.Fatalf("sequential 1 MiB writes, no cache, QD1: %.1f MB/s", mbps)
	}
}

func TestHDDSequentialReadsAreServedByReadAhead(t *testing.T) {
	m := model(t, hddJSON)
	now, off := 0.0, int64(0)
	for i := 0; i < 2000; i++ {
		now = m.Complete(OpRead, off, 128<<10, now)
		off += 128 << 10
	}
	mbps := float64(off) / now / 1e6
	if mbps < 150 || mbps > 201 {
		t.Fatalf("sequential 128 KiB reads at QD1: %.1f MB/s", mbps)
	}
}

func TestHDDWriteCacheAcknowledgesAtOnceAndFlushPaysForThePlatter(t *testing.T) {
	m := model(t, `{"kind":"hdd","rpm":7200,"track_to_track_ms":1.0,"average_seek_ms":8.5,
"full_stroke_ms":17,"outer_mbps":200,"inner_mbps":100,"drive_bytes":1e12,"write_cache":true,
"write_cache_bytes":67108864,"queue_depth":32,"interface_mbps":550,"command_overhead_ms":0.05}`)
	r := lcg(7)
	now := 0.0
	for i := 0; i < 64; i++ {
		off := int64(r.next()%(4<<30/8192)) * 8192
		done := m.Complete(OpWrite, off, 8192, now)
		if done-now > 0.001 {
			t.Fatalf("a cached write took %.3f ms", (done-now)*1e3)
		}
		now = done
	}
	flushed := m.Complete(OpFlush, 0, 0, now)
	// 64 random writes in 4 GiB, reordered: each a short seek and part of a revolution
	per := (flushed - now) / 64 * 1e3
	if per < 0.5 || per > 8 {
		t.Fatalf("flush of 64 cached random writes: %.2f ms a write", per)
	}
	if again := m.Complete(OpFlush, 0, 0, flushed); again-flushed > 0.001 {
		t.Fatalf("an empty cache flushed in %.3f ms", (again-flushed)*1e3)
	}
}

func TestSSDChannelsWorkInParallelUpToTheLink(t *testing.T) {
	m := model(t, `{"kind":"ssd","read_us":100,"write_us":30,"flush_us":0,"channels":4,"read_mbps":500,"write_mbps":400}`)
	done := 0.0
	for i := 0; i < 8; i++ {
		done = math.Max(done, m.Complete(OpRead, 0, 4096, 0))
	}
	// eight reads on four channels: two rounds of 100 us
	if math.Abs(done-200e-6) > 5e-6 {
		t.Fatalf("8 parallel reads on 4 channels ended at %.1f us", done*1e6)
	}
}

func TestCloudVolumeAdmitsItsIOPSAndCountsLargeOperationsByUnit(t *testing.T) {
	m := model(t, `{"kind":"cloud","read_ms":0.5,"write_ms":0.5,"iops":1000,"io_unit_bytes":16384,"mbps":1000,"burst_seconds":0}`)
	last := 0.0
	for i := 0; i < 1000; i++ {
		last = m.Complete(OpWrite, 0, 16384, 0)
	}
	if math.Abs(last-(0.999+0.0005)) > 0.002 {
		t.Fatalf("1000 writes at 1000 IOPS, all at once: last at %.4f s", last)
	}
	m = model(t, `{"kind":"cloud","read_ms":0.5,"write_ms":0.5,"iops":1000,"io_unit_bytes":16384,"mbps":1000,"burst_seconds":0}`)
	for i := 0; i < 100; i++ {
		last = m.Complete(OpWrite, 0, 65536, 0) // four IOs each
	}
	// each starts when its first IO is admitted: 99 x 4 IOs before the last one
	if math.Abs(last-(0.396+0.0005)) > 0.0005 {
		t.Fatalf("100 writes of 64 KiB counted per 16 KiB: last at %.4f s", last)
	}
}

func TestLatenessIsSplitOnlyOverTheTimePastDue(t *testing.T) {
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	cases := []struct {
		name                              string
		arrived, done, modelled, due, now float64
		io, model, over                   float64
	}{
		// the image's write (4 ms) hidden in a 10 ms modelled wait: the reply is late
		// by the wake-up alone
		{"io inside the wait", 0, 0.004, 0.0041, 0.010, 0.012, 0, 0, 0.002},
		// the write ran 3 ms past the due time, the model 1 ms, the wake-up 0.5 ms
		{"io past due", 0, 0.008, 0.009, 0.005, 0.0095, 0.003, 0.001, 0.0005},
		// a model that answers at once: every phase is late
		{"zero model", 0, 0.002, 0.003, 0, 0.004, 0.002, 0.001, 0.001},
		// the model's lock held past the due time
		{"model past due", 0, 0.001, 0.020, 0.010, 0.021, 0, 0.010, 0.001},
	}
	for _, c := range cases {
		io, model, over := lateParts(c.arrived, c.done, c.modelled, c.due, c.now)
		if !near(io, c.io) || !near(model, c.model) || !near(over, c.over) {
			t.Errorf("%s: io %g model %g over %g, want %g %g %g", c.name, io, model, over, c.io, c.model, c.over)
		}
		if !near(io+model+over, c.now-c.due) {
			t.Errorf("%s: the parts add up to %g, not the lateness %g", c.name, io+model+over, c.now-c.due)
		}
	}
}
