// The device models: when a request that arrives at a given time completes.
//
// Every model is a pure function of its parameters and the sequence of requests it has
// seen (offset, length, kind, arrival time): no randomness, so the same trace gives the
// same completion times (model_test.go). Times are seconds since the daemon started.
// The parameters, and where each figure comes from, are pgfsbench's
// (src/pgfsbench/spec/device_models.py); this file is the mechanics.
package main

import (
	"encoding/json"
	"fmt"
	"math"
	"sync"
)

// Op is what the filesystem under test asked of the device.
type Op int

const (
	OpRead Op = iota
	OpWrite
	OpFlush
)

// Model answers: a request of this kind, at this offset and length, arriving at `now`,
// completes at the returned time (>= now).
type Model interface {
	Complete(op Op, off, n int64, now float64) float64
}

// Params is the JSON the daemon is started with: one kind, its figures.
type Params struct {
	Kind string `json:"kind"` // zero, hdd, ssd, cloud

	// hdd
	RPM               float64 `json:"rpm"`
	TrackToTrackMs    float64 `json:"track_to_track_ms"`
	AverageSeekMs     float64 `json:"average_seek_ms"`
	FullStrokeMs      float64 `json:"full_stroke_ms"`
	OuterMBps         float64 `json:"outer_mbps"`
	InnerMBps         float64 `json:"inner_mbps"`
	DriveBytes        float64 `json:"drive_bytes"`
	WriteCache        bool    `json:"write_cache"`
	WriteCacheBytes   int64   `json:"write_cache_bytes"`
	QueueDepth        int     `json:"queue_depth"`
	InterfaceMBps     float64 `json:"interface_mbps"`
	CommandOverheadMs float64 `json:"command_overhead_ms"`
	ReadAheadBytes    int64   `json:"read_ahead_bytes"`

	// ssd
	ReadUs    float64 `json:"read_us"`
	WriteUs   float64 `json:"write_us"`
	FlushUs   float64 `json:"flush_us"`
	Channels  int     `json:"channels"`
	ReadMBps  float64 `json:"read_mbps"`
	WriteMBps float64 `json:"write_mbps"`

	// cloud
	ReadMs       float64 `json:"read_ms"`
	WriteMs      float64 `json:"write_ms"`
	IOPS         float64 `json:"iops"`          // sustained (or burst, with credits)
	IOUnitBytes  int64   `json:"io_unit_bytes"` // an operation counts ceil(n / unit) IOs
	MBps         float64 `json:"mbps"`
	BurstSeconds float64 `json:"burst_seconds"` // how long an idle volume may run above its rate
	CreditIOs    float64 `json:"credit_ios"`    // gp2: the credit bucket (0: none)
	BaselineIOPS float64 `json:"baseline_iops"` // gp2: what refills it
}

// NewModel builds the model its parameters name.
func NewModel(raw []byte) (Model, Params, error) {
	var p Params
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, p, fmt.Errorf("model parameters: %w", err)
	}
	switch p.Kind {
	case "zero":
		return zero{}, p, nil
	case "hdd":
		m, err := newHDD(p)
		return m, p, err
	case "ssd":
		m, err := newSSD(p)
		return m, p, err
	case "cloud":
		m, err := newCloud(p)
		return m, p, err
	}
	return nil, p, fmt.Errorf("model kind %q is unknown (zero, hdd, ssd, cloud)", p.Kind)
}

// zero: no latency of its own; what is left is the layer's cost (bench/device_model.py).
type zero struct{}

func (zero) Complete(_ Op, _, _ int64, now float64) float64 { return now }

// ---------------------------------------------------------------- hdd

// hdd is one actuator over a spinning platter:
//   - the device is the outer part of a drive of drive_bytes; an offset's radius follows
//     from constant linear density (capacity outside radius r is proportional to
//     1 - r^2), so the media rate falls from outer_mbps to inner_mbps with the radius;
//   - a seek over a fraction d of the stroke takes track_to_track + (average -
//     track_to_track) * sqrt(3d) up to a third of the stroke, then linearly to
//     full_stroke (the square-root-then-linear curve of Ruemmler and Wilkes, "An
//     introduction to disk drive modeling", IEEE Computer 27(3), 1994), no seek on the
//     same track;
//   - the platter turns at rpm: an operation waits until its first sector comes under
//     the head, so the next sequential operation, issued in time, waits for nothing and a
//     random one waits half a revolution on average;
//   - a volatile write cache of write_cache_bytes acknowledges a write once it is
//     transferred; the drive writes the cache to the platter while it has nothing else to
//     do, nearest first among queue_depth (command queueing reorders); a flush completes
//     when everything cached before it is on the platter;
//   - after a read the drive reads ahead up to read_ahead_bytes while it is idle: a
//     sequential reader is served at the media rate.
type hdd struct {
	p       Params
	mu      sync.Mutex
	rev     float64 // seconds per revolution
	rIn     float64 // inner radius, the outer being 1
	headOff int64   // where the head is: the end of the last platter operation
	busy    float64 // the actuator is free from then on
	cache   []pending
	cached  int64
	ra      readAhead
}

type pending struct {
	off, n  int64
	arrival float64
}

type readAhead struct {
	from, to  int64   // what the drive reads ahead into its buffer
	t0        float64 // when it began, at `from`
	rate      float64 // bytes a second
	streaming bool    // still reading (the actuator was not needed since)
}

func newHDD(p Params) (*hdd, error) {
	if p.RPM <= 0 || p.OuterMBps <= 0 || p.InnerMBps <= 0 || p.InnerMBps > p.OuterMBps ||
		p.DriveBytes <= 0 || p.AverageSeekMs < p.TrackToTrackMs || p.FullStrokeMs < p.AverageSeekMs {
		return nil, fmt.Errorf("hdd parameters out of range: %+v", p)
	}
	if p.QueueDepth < 1 {
		p.QueueDepth = 1
	}
	if p.InterfaceMBps <= 0 {
		p.InterfaceMBps = 550
	}
	return &hdd{p: p, rev: 60 / p.RPM, rIn: p.InnerMBps / p.OuterMBps}, nil
}

func frac(x float64) float64 { return x - math.Floor(x) }

func (h *hdd) radius(off int64) float64 {
	f := math.Min(math.Max(float64(off)/h.p.DriveBytes, 0), 1)
	return math.Sqrt(1 - f*(1-h.rIn*h.rIn))
}

// rate: bytes a second under the head at radius r.
func (h *hdd) rate(r float64) float64 { return h.p.OuterMBps * 1e6 * r }

func (h *hdd) trackBytes(r float64) float64 { return h.rate(r) * h.rev }

// seek: seconds to move the head from the end of the last operation to `off`.
func (h *hdd) seek(off int64) float64 {
	r0, r1 := h.radius(h.headOff), h.radius(off)
	if math.Abs(float64(off-h.headOff)) < h.trackBytes(r1) {
		return 0 // the same track: only the rotation
	}
	d := math.Abs(r0-r1) / (1 - h.rIn)
	t2t, avg, full := h.p.TrackToTrackMs/1e3, h.p.AverageSeekMs/1e3, h.p.FullStrokeMs/1e3
	if d <= 1.0/3 {
		return t2t + (avg-t2t)*math.Sqrt(3*d)
	}
	return avg + (full-avg)*(d-1.0/3)/(2.0/3)
}

// positioning: seek plus the wait for the first sector, starting at `start`.
func (h *hdd) positioning(off int64, start float64) float64 {
	s := h.seek(off)
	r := h.radius(off)
	head := frac((start + s) / h.rev)
	target := frac(float64(off) / h.trackBytes(r))
	return s + frac(target-head)*h.rev
}

// platter: one operation on the platter from `start`; when it ends.
func (h *hdd) platter(off, n int64, start float64) float64 {
	done := start + h.positioning(off, start) + float64(n)/h.rate(h.radius(off))
	h.headOff = off + n
	return done
}

func (h *hdd) iface(n int64) float64 {
	return h.p.CommandOverheadMs/1e3 + float64(n)/(h.p.InterfaceMBps*1e6)
}

// stopReadAhead: the actuator is needed at `at`; the read-ahead ends where it got to,
// and the head is there.
func (h *hdd) stopReadAhead(at float64) {
	if !h.ra.streaming {
		return
	}
	h.ra.streaming = false
	got := h.ra.from + int64(math.Max(0, at-h.ra.t0)*h.ra.rate)
	if got < h.ra.to {
		h.ra.to = got
	}
	h.headOff = h.ra.to
}

// nearest: the index, among the first queue_depth cached writes, that the head reaches
// first from `start` (shortest positioning time first).
func (h *hdd) nearest(start float64) int {
	best, bestT := 0, math.Inf(1)
	for i := 0; i < len(h.cache) && i < h.p.QueueDepth; i++ {
		e := h.cache[i]
		t := h.positioning(e.off, math.Max(start, e.arrival))
		if e.arrival > start {
			t += e.arrival - start
		}
		if t < bestT {
			best, bestT = i, t
		}
	}
	return best
}

// destage one cached write from max(busy, after, its arrival).
func (h *hdd) destageOne(after float64) {
	start := math.Max(h.busy, after)
	i := h.nearest(start)
	e := h.cache[i]
	h.cache = append(h.cache[:i], h.cache[i+1:]...)
	h.cached -= e.n
	start = math.Max(start, e.arrival)
	h.stopReadAhead(start)
	h.busy = h.platter(e.off, e.n, start)
}

// idle: while the actuator had nothing to do before `now`, it wrote the cache out.
func (h *hdd) idle(now float64) {
	for len(h.cache) > 0 {
		start := math.Max(h.busy, h.cache[h.nearest(h.busy)].arrival)
		if start >= now {
			return
		}
		h.destageOne(0)
	}
}

func (h *hdd) inCache(off, n int64) bool {
	for _, e := range h.cache {
		if off >= e.off && off+n <= e.off+e.n {
			return true
		}
	}
	return false
}

func (h *hdd) Complete(op Op, off, n int64, now float64) float64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.idle(now)
	switch op {
	case OpRead:
		if h.inCache(off, n) {
			return now + h.iface(n)
		}
		if off >= h.ra.from && (off+n <= h.ra.to || (h.ra.streaming && off <= h.ra.to)) {
			// in the read-ahead buffer, or where the drive is still reading: at the media
			// rate, and the drive keeps reading ahead of the reader
			avail := h.ra.t0 + float64(off+n-h.ra.from)/h.ra.rate
			if h.ra.streaming && off+n+h.p.ReadAheadBytes > h.ra.to {
				h.ra.to = off + n + h.p.ReadAheadBytes
			}
			return math.Max(now, avail) + h.iface(n)
		}
		start := math.Max(now, h.busy) + h.p.CommandOverheadMs/1e3
		h.stopReadAhead(start)
		h.busy = h.platter(off, n, start)
		if h.p.ReadAheadBytes > 0 {
			h.ra = readAhead{off + n, off + n + h.p.ReadAheadBytes, h.busy, h.rate(h.radius(off + n)), true}
		}
		return h.busy + float64(n)/(h.p.InterfaceMBps*1e6)
	case OpWrite:
		if h.ra.to > off && off+n > h.ra.from {
			h.stopReadAhead(now)
			h.ra.to = h.ra.from // what it read ahead is stale
		}
		if !h.p.WriteCache {
			start := math.Max(now, h.busy) + h.iface(n)
			h.stopReadAhead(start)
			h.busy = h.platter(off, n, start)
			return h.busy
		}
		at := now
		for h.cached+n > h.p.WriteCacheBytes && len(h.cache) > 0 {
			h.destageOne(now) // no room: the write waits for the platter
			at = math.Max(at, h.busy)
		}
		ack := at + h.iface(n)
		for i, e := range h.cache { // the same blocks again: the cache keeps the newest
			if e.off == off && e.n == n {
				h.cache = append(h.cache[:i], h.cache[i+1:]...)
				h.cached -= n
				break
			}
		}
		h.cache = append(h.cache, pending{off, n, ack})
		h.cached += n
		return ack
	default: // flush
		for len(h.cache) > 0 {
			h.destageOne(now)
		}
		return math.Max(now, h.busy) + h.p.CommandOverheadMs/1e3
	}
}

// ---------------------------------------------------------------- ssd

// ssd: each operation takes its latency on one of `channels` flash channels working in
// parallel, and its bytes pass through one shared link at the read or write bandwidth; a
// flush waits for everything in flight, then takes flush_us (0 with power-loss protection).
type ssd struct {
	p    Params
	mu   sync.Mutex
	free []float64 // when each channel is free
	link float64   // when the shared link is free
}

func newSSD(p Params) (*ssd, error) {
	if p.Channels < 1 || p.ReadMBps <= 0 || p.WriteMBps <= 0 || p.ReadUs < 0 || p.WriteUs < 0 {
		return nil, fmt.Errorf("ssd parameters out of range: %+v", p)
	}
	return &ssd{p: p, free: make([]float64, p.Channels)}, nil
}

func (s *ssd) Complete(op Op, _, n int64, now float64) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if op == OpFlush {
		done := math.Max(now, s.link)
		for _, f := range s.free {
			done = math.Max(done, f)
		}
		return done + s.p.FlushUs/1e6
	}
	lat, bw := s.p.ReadUs/1e6, s.p.ReadMBps*1e6
	if op == OpWrite {
		lat, bw = s.p.WriteUs/1e6, s.p.WriteMBps*1e6
	}
	ch := 0
	for i, f := range s.free {
		if f < s.free[ch] {
			ch = i
		}
	}
	start := math.Max(now, s.free[ch])
	s.link = math.Max(s.link, start) + float64(n)/bw
	done := math.Max(start+lat, s.link)
	s.free[ch] = done
	return done
}

// ---------------------------------------------------------------- cloud

// cloud: a network volume. Each operation takes its round trip (read_ms, write_ms) and
// is admitted by rate limits kept as generic cell rate algorithms (a token bucket in
// time form): operations counted per io_unit_bytes at `iops`, bytes at `mbps`, each
// allowed to run ahead by burst_seconds after idling; gp2 adds a credit bucket of
// credit_ios refilled at baseline_iops, below which the volume runs at its baseline.
type cloud struct {
	p        Params
	mu       sync.Mutex
	tatIO    float64 // theoretical arrival time of the next IO at the admitted rate
	tatBytes float64
	tatCred  float64
}

func newCloud(p Params) (*cloud, error) {
	if p.IOPS <= 0 || p.MBps <= 0 || p.IOUnitBytes <= 0 || p.ReadMs < 0 || p.WriteMs < 0 {
		return nil, fmt.Errorf("cloud parameters out of range: %+v", p)
	}
	return &cloud{p: p}, nil
}

// gcra: when `cost` units at `rate` a second may start, given a tolerance of `burst`
// seconds ahead of the rate; advances the bucket.
func gcra(tat *float64, now, cost, rate, burst float64) float64 {
	t := math.Max(*tat, now) + cost/rate
	*tat = t
	return math.Max(now, t-burst-cost/rate)
}

func (c *cloud) Complete(op Op, _, n int64, now float64) float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if op == OpFlush {
		return now // acknowledged writes are durable on the provider's side
	}
	ios := math.Max(1, math.Ceil(float64(n)/float64(c.p.IOUnitBytes)))
	start := gcra(&c.tatIO, now, ios, c.p.IOPS, c.p.BurstSeconds)
	start = math.Max(start, gcra(&c.tatBytes, now, float64(n), c.p.MBps*1e6, c.p.BurstSeconds))
	if c.p.CreditIOs > 0 && c.p.BaselineIOPS > 0 {
		start = math.Max(start, gcra(&c.tatCred, now, ios, c.p.BaselineIOPS, c.p.CreditIOs/c.p.BaselineIOPS))
	}
	rtt := c.p.ReadMs
	if op == OpWrite {
		rtt = c.p.WriteMs
	}
	return start + rtt/1e3
}
