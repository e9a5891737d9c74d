// pgfsbench-replay replays a captured PostgreSQL workload (pgfsbench capture, prepared
// into a replay file by pgfsbench) against a server: one connection per captured session,
// each session's statements in their captured order, its transactions kept whole (never a
// statement committed alone that was not), prepared statements prepared and executed by
// name as the client did, parameters sent as text with their types left to the server, as
// libpq clients send them. Three modes: timed (each statement at its captured time,
// divided by -speed; the schedule lag of each transaction is measured, and its latency
// counts from its scheduled start, as pgbench's -R), think (each session waits the
// captured think time between its statements, times -think-scale) and fast (no waits: the
// storage's capacity for this workload; the sessions kept within -drift of each other in
// the capture's time, step.go). -jobs N shares the sessions among N processes, as pgbench
// -j its clients among threads (jobs.go). lock_timeout ends any lock wait the replay's
// reordering causes, so a conflict can never hang a run: the statement fails, is counted
// and named.
//
// Output: pgbench's per-transaction log format (-log), pgbench's progress lines on stderr
// (-P 1's "progress: ..."), and a JSON summary (-stats): statements, errors by SQLSTATE
// and by statement, rows, the schedule lag, and the replayer's own CPU.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/signal"
	"regexp"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// FormatVersion is the replay file's version this replayer reads.
const FormatVersion = 1

// Stmt is one captured statement.
type Stmt struct {
	SQL    string    `json:"sql"`
	Kind   string    `json:"kind"` // simple | prepared | unnamed
	Name   string    `json:"name,omitempty"`
	Params []*string `json:"params,omitempty"`
	T      int64     `json:"t"`   // microseconds from the capture's start
	Dur    int64     `json:"dur"` // microseconds it took in the capture (0: unknown)
	Q      int       `json:"q"`   // index of its normalised statement
	turn   int       // its place in the capture's commit order (-1: not a commit)
}

// Tx is one captured transaction: an explicit block, or one statement on its own.
type Tx struct {
	Stmts []Stmt `json:"stmts"`
}

// Session is one captured connection.
type Session struct {
	ID      string `json:"id"`
	User    string `json:"user"`
	DB      string `json:"db"`
	Connect int64  `json:"connect"` // microseconds from the capture's start
	Tx      []Tx   `json:"tx"`
}

// Header is the replay file's first line.
type Header struct {
	Version int `json:"version"`
	Queries int `json:"queries"`
}

type options struct {
	in, host, user, db, mode, logPath, statsPath string
	port                                         int
	speed, thinkScale                            float64
	lockTimeout                                  string
	maxSeconds                                   float64
	commitOrder                                  bool
	progress                                     float64
	jobs                                         int
	worker                                       bool
	drift                                        time.Duration
}

// QueryStats is what one normalised statement did in the replay.
type QueryStats struct {
	Q      int            `json:"q"`
	Calls  int64          `json:"calls"`
	Errors int64          `json:"errors"`
	Rows   int64          `json:"rows"`
	States map[string]int `json:"sqlstates,omitempty"`
}

type txRecord struct {
	client, txno int
	latency, lag int64 // microseconds
	end          time.Time
	failed       bool
}

type stats struct {
	mu            sync.Mutex // taken once a session, when it ends (merge)
	queries       map[int]*QueryStats
	statements    int64
	transactions  int64
	failedTx      int64
	unsent        int64
	connectErrors map[string]int
	lagMax        int64
	okTx          int64
	sumAll, sqAll float64
	stepWaits     int64   // fast: transactions held to stay in step
	stepWaited    float64 // and the seconds they waited
	// wire: the statements of the client's retries not sent (the attempt before succeeded)
	retriesSkipped int
	// this progress interval, from every session without a lock
	n, sumUs, sqUs2, failedIv atomic.Int64
}

// local is one session's own figures, merged into stats when it ends: no lock is taken
// per statement (with a lock shared by every session, a 2-CPU host spent more time
// waking the sessions that waited for it than sending their statements).
type local struct {
	queries                  map[int]*QueryStats
	statements, transactions int64
	failedTx, unsent, okTx   int64
	lagMax                   int64
	sumAll, sqAll            float64
}

// statement counts one statement of normalised statement q: its error's SQLSTATE ("":
// none), else the rows it touched.
func (l *local) statement(q int, code string, rows int64) {
	qs := l.query(q)
	qs.Calls++
	l.statements++
	if code == "" {
		qs.Rows += rows
		return
	}
	qs.Errors++
	if qs.States == nil {
		qs.States = map[string]int{}
	}
	qs.States[code]++
}

// transaction counts one transaction that took lat microseconds, here and in the
// progress interval of st.
func (l *local) transaction(st *stats, lat int64, failed bool) {
	l.transactions++
	if failed {
		l.failedTx++
		st.failedIv.Add(1)
		return
	}
	st.n.Add(1)
	st.sumUs.Add(lat)
	st.sqUs2.Add(lat * lat)
	ms := float64(lat) / 1000
	l.okTx++
	l.sumAll += ms
	l.sqAll += ms * ms
}

func (l *local) query(q int) *QueryStats {
	qs := l.queries[q]
	if qs == nil {
		qs = &QueryStats{Q: q}
		l.queries[q] = qs
	}
	return qs
}

func (s *stats) merge(l *local) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for q, lq := range l.queries {
		qs := s.query(q)
		qs.Calls += lq.Calls
		qs.Errors += lq.Errors
		qs.Rows += lq.Rows
		for k, v := range lq.States {
			if qs.States == nil {
				qs.States = map[string]int{}
			}
			qs.States[k] += v
		}
	}
	s.statements += l.statements
	s.transactions += l.transactions
	s.failedTx += l.failedTx
	s.unsent += l.unsent
	s.okTx += l.okTx
	s.sumAll += l.sumAll
	s.sqAll += l.sqAll
	if l.lagMax > s.lagMax {
		s.lagMax = l.lagMax
	}
}

func (s *stats) query(q int) *QueryStats {
	qs := s.queries[q]
	if qs == nil {
		qs = &QueryStats{Q: q}
		s.queries[q] = qs
	}
	return qs
}

func main() {
	// one P unless told otherwise: the sessions wait on the network almost all the time,
	// and a second P spins and hands goroutines between threads (10-15% more CPU per
	// statement on a 2-CPU host, taken from the server under test); a fast replay's loop
	// has two (loopProcs)
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
	var o options
	flag.StringVar(&o.in, "in", "", "the replay file (JSON lines; - for standard input)")
	flag.StringVar(&o.host, "host", "", "the server's unix socket directory")
	flag.IntVar(&o.port, "port", 5432, "the server's port")
	flag.StringVar(&o.user, "user", "", "connect as this user (default: each session's own)")
	flag.StringVar(&o.db, "db", "", "connect to this database (default: each session's own)")
	flag.StringVar(&o.mode, "mode", "timed", "timed, think or fast")
	flag.Float64Var(&o.speed, "speed", 1, "timed: the captured times divided by this")
	flag.Float64Var(&o.thinkScale, "think-scale", 1, "think: the captured think times times this")
	flag.StringVar(&o.lockTimeout, "lock-timeout", "10s", "lock_timeout of every session")
	flag.StringVar(&o.logPath, "log", "", "write pgbench's per-transaction log here")
	flag.StringVar(&o.statsPath, "stats", "", "write the JSON summary here")
	flag.Float64Var(&o.maxSeconds, "max-seconds", 0, "stop after this long (0: when done)")
	flag.Float64Var(&o.progress, "progress", 1, "seconds between progress lines (0: none)")
	flag.BoolVar(&o.commitOrder, "commit-order", false, "hold each COMMIT until the ones captured before it are done")
	flag.DurationVar(&o.drift, "drift", time.Second, "fast: how far apart in the capture's time the sessions may get (0: no bound)")
	flag.IntVar(&o.jobs, "jobs", 1, "replay in this many processes, the sessions shared among them (as pgbench -j)")
	flag.BoolVar(&o.worker, "worker", false, "internal: one of -jobs' processes, driven on its standard input")
	version := flag.Bool("version", false, "print the version and the replay file version read")
	cpuProfile := flag.String("cpuprofile", "", "write a Go CPU profile of the replay here (for the replayer's developers)")
	flag.Parse()
	if *version {
		fmt.Printf("pgfsbench-replay 1 (replay file version %d)\n", FormatVersion)
		return
	}
	if err := profiled(*cpuProfile, func() error {
		if o.worker {
			return runWorker(o)
		}
		header, lines, err := readRaw(o.in)
		if err != nil {
			return err
		}
		switch {
		case isWire(header):
			return runWire(o, header, lines)
		case o.jobs > 1:
			return runParent(o, header, lines)
		default:
			return runParsed(o, header, lines)
		}
	}); err != nil {
		fmt.Fprintf(os.Stderr, "pgfsbench-replay: %v\n", err)
		os.Exit(1)
	}
}

// profiled runs f, profiling its CPU into path ("" for no profile).
func profiled(path string, f func() error) error {
	if path == "" {
		return f()
	}
	out, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	defer out.Close()
	if err := pprof.StartCPUProfile(out); err != nil {
		return err
	}
	defer pprof.StopCPUProfile()
	return f()
}

func readReplay(path string) (Header, []Session, error) {
	header, lines, err := readRaw(path)
	if err != nil {
		return Header{}, nil, err
	}
	return decode(path, header, lines)
}

// readRaw reads a replay file's lines: its header and one line a session.
func readRaw(path string) ([]byte, [][]byte, error) {
	f := os.Stdin
	if path != "-" {
		var err error
		if f, err = os.Open(path); err != nil {
			return nil, nil, err
		}
		defer f.Close()
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<30)
	if !sc.Scan() {
		if sc.Err() != nil {
			return nil, nil, sc.Err()
		}
		return nil, nil, fmt.Errorf("%s: empty", path)
	}
	header := append([]byte(nil), sc.Bytes()...)
	var lines [][]byte
	for sc.Scan() {
		lines = append(lines, append([]byte(nil), sc.Bytes()...))
	}
	return header, lines, sc.Err()
}

// decode checks the header's version and decodes the sessions.
func decode(path string, header []byte, lines [][]byte) (Header, []Session, error) {
	var h Header
	if err := json.Unmarshal(header, &h); err != nil {
		return h, nil, fmt.Errorf("%s: header: %v", path, err)
	}
	if h.Version != FormatVersion {
		return h, nil, fmt.Errorf("%s: replay file version %d, this replayer reads %d", path, h.Version, FormatVersion)
	}
	sessions := make([]Session, len(lines))
	// one copy of each statement's text: less memory, and a prepared statement's text is
	// compared with the one it was prepared with by its pointer, not byte by byte
	texts := map[string]string{}
	for i, line := range lines {
		if err := json.Unmarshal(line, &sessions[i]); err != nil {
			return h, nil, fmt.Errorf("%s: session %d: %v", path, i+1, err)
		}
		s := &sessions[i]
		for ti := range s.Tx {
			for si := range s.Tx[ti].Stmts {
				st := &s.Tx[ti].Stmts[si]
				if same, ok := texts[st.SQL]; ok {
					st.SQL = same
				} else {
					texts[st.SQL] = st.SQL
				}
			}
		}
	}
	return h, sessions, nil
}

func runParsed(o options, header []byte, lines [][]byte) error {
	if o.mode != "timed" && o.mode != "think" && o.mode != "fast" {
		return fmt.Errorf("-mode %q: timed, think or fast", o.mode)
	}
	if o.speed <= 0 || o.thinkScale < 0 {
		return errors.New("-speed must be above 0 and -think-scale not below 0")
	}
	_, sessions, err := decode(o.in, header, lines)
	if err != nil {
		return err
	}
	var gate *commitGate
	if o.commitOrder {
		numberCommits(sessions)
		gate = newCommitGate(time.Second)
	}
	ctx, cancel := signalled()
	defer cancel()
	st := newStats()
	records, logDone := startLog(o, o.logPath)

	// the replay's own CPU counts from here (reading the file is not the replay's)
	cpu := cpuNow()
	start := time.Now()
	base := start.Add(100 * time.Millisecond) // every session's connection in place first
	ctx, stopLimit := withLimit(ctx, o)
	defer stopLimit()
	stopProgress := startProgress(o, start, st)
	p := whole(sessions)
	p.step = stepFor(o, p.sessions, ended)
	p.replay(ctx, o, base, st, records, gate)
	close(records)
	logDone.Wait()
	stopProgress()
	wall := time.Since(start)
	user, system := cpuSince(cpu)
	st.stepWaits, st.stepWaited = p.step.figures()
	return writeStats(o, st, len(sessions), wall, user, system, gate)
}

// stepFor keeps a fast replay's sessions in step (nil: another mode, or -drift 0).
func stepFor(o options, sessions []*Session, others int64) *inStep {
	if o.mode != "fast" || o.drift <= 0 {
		return nil
	}
	return newInStep(sessions, o.drift, others)
}

func newStats() *stats {
	return &stats{queries: map[int]*QueryStats{}, connectErrors: map[string]int{}}
}

// signalled is a context ended by SIGINT or SIGTERM.
func signalled() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		select {
		case <-sig:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// withLimit ends the context after -max-seconds, from now.
func withLimit(ctx context.Context, o options) (context.Context, context.CancelFunc) {
	if o.maxSeconds <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, time.Duration(o.maxSeconds*float64(time.Second)))
}

// startLog writes the transactions sent on the channel returned to pgbench's
// per-transaction log at path ("" for none); the WaitGroup is done once the channel is
// closed and the log written. A session sends its transactions in batches (logBatch):
// one send a transaction woke the writer on another P for each, a futex wake and a
// poller wait a transaction. So the lines of a log are in time order within a session's
// batch, not across sessions; the log's reader counts them by time.
func startLog(o options, path string) (chan []txRecord, *sync.WaitGroup) {
	records := make(chan []txRecord, 256)
	var logDone sync.WaitGroup
	logDone.Add(1)
	go func() {
		defer logDone.Done()
		writeLog(o.mode, path, records)
	}()
	return records, &logDone
}

// startProgress prints pgbench's progress lines every -progress seconds until the
// function returned is called.
func startProgress(o options, start time.Time, st *stats) func() {
	if o.progress <= 0 {
		return func() {}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		progressLoop(start, o.progress, st, stop)
	}()
	return func() { close(stop); wg.Wait() }
}

type cpuTimes struct{ user, system float64 }

func cpuNow() cpuTimes {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	secs := func(tv syscall.Timeval) float64 { return float64(tv.Sec) + float64(tv.Usec)/1e6 }
	return cpuTimes{secs(ru.Utime), secs(ru.Stime)}
}

func cpuSince(from cpuTimes) (float64, float64) {
	now := cpuNow()
	return now.user - from.user, now.system - from.system
}

// part is the sessions one process replays: their numbers in the whole replay (a
// transaction log's client ids), the sessions each waits for (whole-replay numbers), and
// one channel per session of the whole replay, closed when it ends.
type part struct {
	sessions []*Session
	ids      []int
	before   [][]int
	done     []chan struct{}
	closed   []bool
	mu       sync.Mutex   // closed
	wake     wakeRef      // the loop's, told when a session ends (loop.go)
	step     *inStep      // fast: the sessions kept in step (nil: not)
	others   int64        // fast, one of -jobs: the other processes' lowest position at the start
	ended    func(id int) // told when one of this part's sessions ends (nil: no one else waits)
}

func newPart(total int) *part {
	p := &part{done: make([]chan struct{}, total), closed: make([]bool, total)}
	for i := range p.done {
		p.done[i] = make(chan struct{})
	}
	return p
}

// end says session id (of the whole replay) has ended; once, whoever says it.
func (p *part) end(id int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if id >= 0 && id < len(p.closed) && !p.closed[id] {
		p.closed[id] = true
		close(p.done[id])
		p.wake.poke()
	}
}

// whole is every session, in one process.
func whole(sessions []Session) *part {
	p := newPart(len(sessions))
	p.before = predecessors(sessions)
	for i := range sessions {
		p.sessions = append(p.sessions, &sessions[i])
		p.ids = append(p.ids, i)
	}
	return p
}

// replay replays the part's sessions, each in its goroutine. A session that ended in the
// capture before another began ends before it begins in the replay too, whatever the
// mode (a client's set-up, then its workers): without it, fast mode would run a TRUNCATE
// from the set-up among the workers' INSERTs.
func (p *part) replay(ctx context.Context, o options, base time.Time, st *stats, records chan<- []txRecord, gate *commitGate) {
	if loopable(o, gate) {
		loopProcs(os.Getenv("GOMAXPROCS"))
		started, err := p.replayLoop(ctx, o, st, records)
		if err != nil {
			fmt.Fprintf(os.Stderr, "pgfsbench-replay: %v\n", err)
		}
		if started {
			return
		}
	}
	var wg sync.WaitGroup
	for k := range p.sessions {
		wg.Add(1)
		go func(k int) {
			defer wg.Done()
			id := p.ids[k]
			defer func() {
				p.end(id)
				if p.ended != nil {
					p.ended(id)
				}
			}()
			for _, j := range p.before[k] {
				select {
				case <-p.done[j]:
				case <-ctx.Done():
				}
			}
			replaySession(ctx, o, id, p.sessions[k], base, st, records, gate, p.step, k)
		}(k)
	}
	wg.Wait()
}

// span is when a session's first statement began and its last one ended, in the capture.
func span(s *Session) (int64, int64, bool) {
	first, last, any := int64(math.MaxInt64), int64(math.MinInt64), false
	for _, tx := range s.Tx {
		for _, st := range tx.Stmts {
			any = true
			if st.T < first {
				first = st.T
			}
			if st.T+st.Dur > last {
				last = st.T + st.Dur
			}
		}
	}
	return first, last, any
}

// predecessors lists, for each session, the sessions whose last statement ended before
// its first began.
func predecessors(sessions []Session) [][]int {
	type bounds struct {
		first, last int64
		ok          bool
	}
	b := make([]bounds, len(sessions))
	for i := range sessions {
		f, l, ok := span(&sessions[i])
		b[i] = bounds{f, l, ok}
	}
	out := make([][]int, len(sessions))
	for i := range sessions {
		if !b[i].ok {
			continue
		}
		for j := range sessions {
			if i != j && b[j].ok && b[j].last < b[i].first {
				out[i] = append(out[i], j)
			}
		}
	}
	return out
}

func connect(ctx context.Context, o options, s *Session) (*pgconn.PgConn, error) {
	cfg, err := connConfig(o, s)
	if err != nil {
		return nil, err
	}
	cfg.DialFunc = dialRaw
	return pgconn.ConnectConfig(ctx, cfg)
}

// connConfig is how a session connects: as the captured user to the captured database
// (unless -user, -db), with the replay's lock_timeout.
func connConfig(o options, s *Session) (*pgconn.Config, error) {
	user, db := s.User, s.DB
	if o.user != "" {
		user = o.user
	}
	if o.db != "" {
		db = o.db
	}
	cfg, err := pgconn.ParseConfig(fmt.Sprintf("host=%s port=%d", o.host, o.port))
	if err != nil {
		return nil, err
	}
	cfg.User, cfg.Database = user, db
	// the benchmark's sessions are known by their application name (PGAPPNAME, which
	// pgfsbench sets): its samplers then count them as the workload's, not outside work
	if os.Getenv("PGAPPNAME") == "" {
		cfg.RuntimeParams["application_name"] = "pgfsbench replay"
	}
	cfg.RuntimeParams["lock_timeout"] = o.lockTimeout
	cfg.ConnectTimeout = 30 * time.Second
	return cfg, nil
}

func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

func at(base time.Time, us int64, speed float64) time.Time {
	return base.Add(time.Duration(float64(us) / speed * float64(time.Microsecond)))
}

// execute sends one statement as the client did and says how many rows it touched. It
// is given no context: the session's connection deadline ends it (replaySession).
func execute(conn *pgconn.PgConn, prepared map[string]string, s *Stmt) (int64, error) {
	ctx := context.Background()
	params := make([][]byte, len(s.Params))
	for i, p := range s.Params {
		if p != nil {
			params[i] = []byte(*p)
		}
	}
	switch s.Kind {
	case "prepared":
		if sql, ok := prepared[s.Name]; !ok || sql != s.SQL {
			if ok {
				if _, err := conn.Exec(ctx, "DEALLOCATE "+quoteIdent(s.Name)).ReadAll(); err != nil {
					return 0, err
				}
			}
			if _, err := conn.Prepare(ctx, s.Name, s.SQL, nil); err != nil {
				return 0, err
			}
			prepared[s.Name] = s.SQL
		}
		tag, err := conn.ExecPrepared(ctx, s.Name, params, nil, nil).Close()
		return tag.RowsAffected(), err
	case "unnamed":
		tag, err := conn.ExecParams(ctx, s.SQL, params, nil, nil, nil).Close()
		return tag.RowsAffected(), err
	default:
		results, err := conn.Exec(ctx, s.SQL).ReadAll()
		var rows int64
		for _, r := range results {
			rows += r.CommandTag.RowsAffected()
			if r.Err != nil && err == nil {
				err = r.Err
			}
		}
		forget(prepared, s.SQL)
		return rows, err
	}
}

var (
	deallocateRe = regexp.MustCompile(`(?i)^\s*DEALLOCATE\s+(?:PREPARE\s+)?("(?:[^"]|"")+"|[^\s;]+)\s*;?\s*$`)
	discardAllRe = regexp.MustCompile(`(?i)^\s*DISCARD\s+ALL\s*;?\s*$`)
)

// forget applies what a simple statement did to the session's prepared statements, as the
// server did: DEALLOCATE name, DEALLOCATE ALL and DISCARD ALL end them (a name prepared
// again afterwards is parsed again, never taken for the one that is gone).
func forget(prepared map[string]string, sql string) {
	for _, part := range strings.Split(sql, ";") {
		if discardAllRe.MatchString(part) {
			clear(prepared)
			continue
		}
		m := deallocateRe.FindStringSubmatch(part)
		if m == nil {
			continue
		}
		name := m[1]
		switch {
		case strings.EqualFold(name, "all"):
			clear(prepared)
		case strings.HasPrefix(name, `"`):
			delete(prepared, strings.ReplaceAll(name[1:len(name)-1], `""`, `"`))
		default:
			delete(prepared, strings.ToLower(name))
			delete(prepared, name)
		}
	}
}

func quoteIdent(s string) string {
	out := []byte{'"'}
	for i := 0; i < len(s); i++ {
		if s[i] == '"' {
			out = append(out, '"')
		}
		out = append(out, s[i])
	}
	return string(append(out, '"'))
}

func sqlstate(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return "client"
}

func replaySession(ctx context.Context, o options, client int, s *Session, base time.Time, st *stats, records chan<- []txRecord, gate *commitGate, step *inStep, k int) {
	l := &local{queries: map[int]*QueryStats{}}
	defer st.merge(l)
	batch := make([]txRecord, 0, logBatch)
	defer func() {
		if len(batch) > 0 {
			records <- batch
		}
	}()
	defer step.end(k)
	unsent := func(from int) {
		for _, tx := range s.Tx[from:] {
			l.unsent += int64(len(tx.Stmts))
			for i := range tx.Stmts {
				gate.over(tx.Stmts[i].turn) // its turn never comes: the others go on
			}
		}
	}
	if o.mode == "timed" && !sleepUntil(ctx, at(base, s.Connect, o.speed)) {
		unsent(0)
		return
	}
	conn, err := connect(ctx, o, s)
	if err != nil {
		st.mu.Lock()
		st.connectErrors[err.Error()]++
		st.mu.Unlock()
		unsent(0)
		return
	}
	defer conn.Close(context.Background())
	// pgconn watches a cancellable context with a goroutine of its own, made and ended
	// for every call: the statements are sent without one, and the replay's end (its
	// limit, a signal) reaches this session through its connection's deadline, set once
	stopWatch := context.AfterFunc(ctx, func() { _ = conn.Conn().SetDeadline(time.Now()) })
	defer stopWatch()
	prepared := map[string]string{}
	var prevEnd time.Time
	var prev *Stmt
	for ti := range s.Tx {
		tx := &s.Tx[ti]
		if len(tx.Stmts) == 0 {
			continue
		}
		var scheduled time.Time
		failed := false
		var began time.Time
		for si := range tx.Stmts {
			stmt := &tx.Stmts[si]
			switch o.mode {
			case "timed":
				target := at(base, stmt.T, o.speed)
				if si == 0 {
					scheduled = target
				}
				if !sleepUntil(ctx, target) {
					unsent(ti)
					return
				}
			case "think":
				if prev != nil {
					think := stmt.T - (prev.T + prev.Dur)
					if think > 0 && !sleepUntil(ctx, prevEnd.Add(time.Duration(float64(think)*o.thinkScale)*time.Microsecond)) {
						unsent(ti)
						return
					}
				}
			}
			if si == 0 {
				step.begin(ctx, k, stmt.T) // fast: in step with the other sessions
			}
			if ctx.Err() != nil {
				unsent(ti)
				return
			}
			step.place(k, stmt.T+stmt.Dur)
			now := time.Now()
			if si == 0 {
				began = now
				if scheduled.IsZero() {
					scheduled = now
				}
			}
			if gate != nil && stmt.turn >= 0 {
				gate.wait(stmt.turn)
			}
			rows, err := execute(conn, prepared, stmt)
			gate.over(stmt.turn)
			prevEnd = time.Now()
			prev = stmt
			code := ""
			if err != nil {
				code = sqlstate(err)
				failed = true
			}
			l.statement(stmt.Q, code, rows)
			if err != nil && ctx.Err() != nil {
				unsent(ti + 1)
				return
			}
			if conn.IsClosed() {
				unsent(ti + 1)
				return
			}
		}
		end := time.Now()
		lat := end.Sub(scheduled).Microseconds()
		lag := began.Sub(scheduled).Microseconds()
		if lag < 0 {
			lag = 0
		}
		l.transaction(st, lat, failed)
		if lag > l.lagMax {
			l.lagMax = lag
		}
		batch = append(batch, txRecord{client: client, txno: ti, latency: lat, lag: lag, end: end, failed: failed})
		if len(batch) == logBatch {
			records <- batch
			batch = make([]txRecord, 0, logBatch)
		}
	}
}

// logBatch is how many transactions a session sends to the log's writer at once.
const logBatch = 256

func writeLog(mode, path string, records <-chan []txRecord) {
	if path == "" {
		for range records {
		}
		return
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		fmt.Fprintf(os.Stderr, "pgfsbench-replay: %v\n", err)
		for range records {
		}
		return
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	defer w.Flush()
	line := make([]byte, 0, 128)
	for batch := range records {
		for _, r := range batch {
			_, _ = w.Write(logLine(line[:0], mode, r))
		}
	}
}

// logLine is one line of pgbench's per-transaction log: client, transaction, latency
// in microseconds (or "failed"), script 0, end in Unix seconds and microseconds, and in
// timed mode the schedule lag.
func logLine(b []byte, mode string, r txRecord) []byte {
	b = strconv.AppendInt(b, int64(r.client), 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(r.txno), 10)
	b = append(b, ' ')
	if r.failed {
		b = append(b, "failed"...)
	} else {
		b = strconv.AppendInt(b, r.latency, 10)
	}
	b = append(b, " 0 "...)
	b = strconv.AppendInt(b, r.end.Unix(), 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(r.end.Nanosecond()/1000), 10)
	if mode == "timed" {
		b = append(b, ' ')
		b = strconv.AppendInt(b, r.lag, 10)
	}
	return append(b, '\n')
}

func progressLoop(start time.Time, every float64, st *stats, stop <-chan struct{}) {
	tick := time.NewTicker(time.Duration(every * float64(time.Second)))
	defer tick.Stop()
	last := start
	for {
		select {
		case <-stop:
			return
		case now := <-tick.C:
			n := st.n.Swap(0)
			sumUs, sqUs2 := st.sumUs.Swap(0), st.sqUs2.Swap(0)
			failed := st.failedIv.Swap(0)
			sum, sq := float64(sumUs)/1000, float64(sqUs2)/1e6
			secs := now.Sub(last).Seconds()
			last = now
			mean, sd := math.NaN(), math.NaN()
			if n > 0 {
				mean = sum / float64(n)
				sd = math.Sqrt(math.Max(0, sq/float64(n)-mean*mean))
			}
			fmt.Fprintf(os.Stderr, "progress: %.1f s, %.1f tps, lat %.3f ms stddev %.3f, %d failed\n",
				now.Sub(start).Seconds(), float64(n)/secs, mean, sd, failed)
		}
	}
}

func writeStats(o options, st *stats, sessions int, wall time.Duration, user, system float64, gate *commitGate) error {
	qs := make([]*QueryStats, 0, len(st.queries))
	for _, q := range st.queries {
		qs = append(qs, q)
	}
	sort.Slice(qs, func(i, j int) bool { return qs[i].Q < qs[j].Q })
	out := map[string]any{
		"version":                  FormatVersion,
		"mode":                     o.mode,
		"speed":                    o.speed,
		"sessions":                 sessions,
		"statements":               st.statements,
		"transactions":             st.transactions,
		"failed_transactions":      st.failedTx,
		"unsent_statements":        st.unsent,
		"connect_errors":           st.connectErrors,
		"schedule_lag_max_ms":      float64(st.lagMax) / 1000,
		"commit_order":             o.commitOrder,
		"commits_out_of_order":     lateOf(gate),
		"commit_order_given_up":    openOf(gate),
		"latency_avg_ms":           meanOf(st.sumAll, st.okTx),
		"latency_stddev_ms":        sdOf(st.sumAll, st.sqAll, st.okTx),
		"queries":                  qs,
		"wall_s":                   wall.Seconds(),
		"jobs":                     max(1, o.jobs),
		"drift_s":                  driftOf(o),
		"in_step_waits":            st.stepWaits,
		"in_step_waited_s":         st.stepWaited,
		"retry_statements_skipped": st.retriesSkipped,
		"cpu_user_s":               user,
		"cpu_system_s":             system,
	}
	text, err := json.MarshalIndent(out, "", " ")
	if err != nil {
		return err
	}
	if o.statsPath == "" {
		_, err = os.Stdout.Write(append(text, '\n'))
		return err
	}
	return os.WriteFile(o.statsPath, append(text, '\n'), 0o600)
}

func driftOf(o options) any {
	if o.mode != "fast" || o.drift <= 0 {
		return nil
	}
	return o.drift.Seconds()
}

func meanOf(sum float64, n int64) any {
	if n == 0 {
		return nil
	}
	return sum / float64(n)
}

func sdOf(sum, sq float64, n int64) any {
	if n == 0 {
		return nil
	}
	m := sum / float64(n)
	return math.Sqrt(math.Max(0, sq/float64(n)-m*m))
}

func lateOf(g *commitGate) int64 {
	if g == nil {
		return 0
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.late
}

func openOf(g *commitGate) bool {
	if g == nil {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.open
}
