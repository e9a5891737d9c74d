package main

// -jobs N: the replay in N processes, as pgbench -j runs its clients in N threads.
//
// One process multiplexes every session on one thread. On a small host, each statement it
// sends wakes a backend that takes its CPU (the kernel's wake-up of a socket's reader),
// and every other session waits until that backend answers: the server, not the storage,
// ran out of statements to run (a fifth of a 2-CPU host idle, 4 sessions). Several
// threads of one Go process hand goroutines between them at each wait and did not help;
// processes did, as pgbench's threads do.
//
// The parent reads the replay file, shares the sessions among the workers (each the
// fewest statements so far, the largest session first) and drives each on its standard
// input; the workers answer on their standard output:
//
//	parent -> worker                     worker -> parent
//	header line (the replay file's)      READY              (connected to nothing yet; read)
//	N <sessions in the replay>           DONE <id>          (a session ended)
//	S <id> <ids it waits for, or ->      P <n> <sumUs> <sqUs2> <failed>  (progress since the last)
//	<the session's line>                 STATS <JSON>       (its figures, then it exits)
//	END                                  (its sessions all sent)
//	F <position>                         F <position>       (fast: the lowest position of
//	GO <start, Unix nanoseconds>                             its sessions, in step; the
//	DONE <id>                                                parent's: of the others')
//	F <position>
//	                                     (a session of another worker ended: DONE <id>)
//
// The commit order gate is one process's: -commit-order needs -jobs 1.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// pushEvery is how often a worker sends its progress and its sessions' lowest position:
// a parent's progress line is off by at most this much of one worker's work, and in
// step a session is held up to this much of the capture's time early. Each push wakes
// the parent, and its runtime's monitor with it (some 60 short sleeps a wake-up): at
// 20 ms, 7,000 sleeps a second on a 2-CPU host, 3-4% of the CPU the server measured
// needs.
const pushEvery = 100 * time.Millisecond

// partial is one worker's figures, merged by the parent.
type partial struct {
	Queries       []*QueryStats  `json:"queries"`
	Statements    int64          `json:"statements"`
	Transactions  int64          `json:"transactions"`
	FailedTx      int64          `json:"failed_transactions"`
	Unsent        int64          `json:"unsent_statements"`
	OkTx          int64          `json:"ok_transactions"`
	LagMax        int64          `json:"lag_max_us"`
	SumAll        float64        `json:"sum_ms"`
	SqAll         float64        `json:"sq_ms2"`
	ConnectErrors map[string]int `json:"connect_errors"`
	CPUUser       float64        `json:"cpu_user_s"`
	CPUSystem     float64        `json:"cpu_system_s"`
	StepWaits     int64          `json:"in_step_waits"`
	StepWaited    float64        `json:"in_step_waited_s"`
}

func (st *stats) partial(user, system float64) partial {
	st.mu.Lock()
	defer st.mu.Unlock()
	p := partial{
		Statements: st.statements, Transactions: st.transactions, FailedTx: st.failedTx,
		Unsent: st.unsent, OkTx: st.okTx, LagMax: st.lagMax, SumAll: st.sumAll, SqAll: st.sqAll,
		ConnectErrors: st.connectErrors, CPUUser: user, CPUSystem: system,
		StepWaits: st.stepWaits, StepWaited: st.stepWaited,
	}
	for _, q := range st.queries {
		p.Queries = append(p.Queries, q)
	}
	return p
}

func (st *stats) add(p partial) {
	l := &local{queries: map[int]*QueryStats{}, statements: p.Statements, transactions: p.Transactions,
		failedTx: p.FailedTx, unsent: p.Unsent, okTx: p.OkTx, lagMax: p.LagMax, sumAll: p.SumAll, sqAll: p.SqAll}
	for _, q := range p.Queries {
		if q != nil {
			l.queries[q.Q] = q
		}
	}
	st.merge(l)
	st.mu.Lock()
	defer st.mu.Unlock()
	for k, v := range p.ConnectErrors {
		st.connectErrors[k] += v
	}
	st.stepWaits += p.StepWaits
	st.stepWaited += p.StepWaited
}

// share gives each session to one of n workers: the largest first, each to the worker
// with the fewest statements so far (the lowest number for ties). Deterministic.
func share(sessions []Session, n int) [][]int {
	size := make([]int, len(sessions))
	order := make([]int, len(sessions))
	for i := range sessions {
		order[i] = i
		for _, tx := range sessions[i].Tx {
			size[i] += len(tx.Stmts)
		}
	}
	sort.SliceStable(order, func(a, b int) bool { return size[order[a]] > size[order[b]] })
	load := make([]int, n)
	out := make([][]int, n)
	for _, i := range order {
		w := 0
		for k := 1; k < n; k++ {
			if load[k] < load[w] {
				w = k
			}
		}
		load[w] += size[i]
		out[w] = append(out[w], i)
	}
	for w := range out {
		sort.Ints(out[w])
	}
	return out
}

// logName is worker w's transaction log: the path itself for the first, then path.w, as
// pgbench names its threads' logs.
func logName(path string, w int) string {
	if path == "" || w == 0 {
		return path
	}
	return fmt.Sprintf("%s.%d", path, w)
}

type worker struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	inMu  sync.Mutex
	out   *bufio.Reader
	stats *partial
}

func (w *worker) send(format string, args ...any) {
	w.inMu.Lock()
	defer w.inMu.Unlock()
	// a worker that has ended no longer reads: what it is told is of no use to it
	_, _ = fmt.Fprintf(w.in, format, args...)
}

func runParent(o options, header []byte, lines [][]byte) error {
	if o.commitOrder {
		return errors.New("-commit-order holds the commits of one process: use it with -jobs 1")
	}
	_, sessions, err := decode(o.in, header, lines)
	if err != nil {
		return err
	}
	n := min(o.jobs, max(1, len(sessions)))
	o.jobs = n // what the summary says: the processes that ran
	before := predecessors(sessions)
	shares := share(sessions, n)
	self, err := os.Executable()
	if err != nil {
		return err
	}
	workers := make([]*worker, n)
	kill := func() {
		for _, w := range workers {
			if w != nil && w.cmd.Process != nil {
				_ = w.cmd.Process.Signal(syscall.SIGTERM)
			}
		}
	}
	for k := range workers {
		argv := []string{"-worker", "-in", "-", "-host", o.host, "-port", strconv.Itoa(o.port),
			"-user", o.user, "-db", o.db, "-mode", o.mode,
			"-speed", strconv.FormatFloat(o.speed, 'g', -1, 64),
			"-think-scale", strconv.FormatFloat(o.thinkScale, 'g', -1, 64),
			"-lock-timeout", o.lockTimeout, "-log", logName(o.logPath, k), "-drift", o.drift.String(),
			"-max-seconds", strconv.FormatFloat(o.maxSeconds, 'g', -1, 64)}
		cmd := exec.Command(self, argv...)
		cmd.Stderr = os.Stderr
		in, err := cmd.StdinPipe()
		if err != nil {
			kill()
			return err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			kill()
			return err
		}
		if err := cmd.Start(); err != nil {
			kill()
			return err
		}
		workers[k] = &worker{cmd: cmd, in: in, out: bufio.NewReader(out)}
	}
	// fast, in step: each worker's lowest position, and what each was told of the others'
	pos := &positions{low: make([]int64, n), told: make([]int64, n)}
	for k := range workers {
		pos.low[k] = ended
		for _, i := range shares[k] {
			pos.low[k] = min(pos.low[k], firstAt(&sessions[i]))
		}
	}
	// each worker's sessions, then its READY
	for k, w := range workers {
		var b bytes.Buffer
		b.Write(header)
		fmt.Fprintf(&b, "\nN %d\n", len(sessions))
		for _, i := range shares[k] {
			waits := "-"
			if len(before[i]) > 0 {
				ids := make([]string, len(before[i]))
				for x, j := range before[i] {
					ids[x] = strconv.Itoa(j)
				}
				waits = strings.Join(ids, ",")
			}
			fmt.Fprintf(&b, "S %d %s\n", i, waits)
			b.Write(lines[i])
			b.WriteByte('\n')
		}
		b.WriteString("END\n")
		pos.told[k] = pos.others(k)
		fmt.Fprintf(&b, "F %d\n", pos.told[k])
		w.send("%s", b.Bytes())
	}
	for k, w := range workers {
		line, err := w.out.ReadString('\n')
		if err != nil || line != "READY\n" {
			kill()
			return fmt.Errorf("worker %d did not start (%q, %v)", k, line, err)
		}
	}
	ctx, cancel := signalled()
	defer cancel()
	go func() { <-ctx.Done(); kill() }()
	st := newStats()
	cpu := cpuNow()
	start := time.Now()
	base := start.Add(100 * time.Millisecond)
	stopProgress := startProgress(o, start, st)
	for _, w := range workers {
		w.send("GO %d\n", base.UnixNano())
	}
	var wg sync.WaitGroup
	for k, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			follow(k, w, workers, st, pos)
		}()
	}
	wg.Wait()
	var failed []string
	for k, w := range workers {
		_ = w.in.Close()
		if err := w.cmd.Wait(); err != nil {
			failed = append(failed, fmt.Sprintf("worker %d: %v", k, err))
		}
		if w.stats == nil {
			failed = append(failed, fmt.Sprintf("worker %d: no figures", k))
		}
	}
	stopProgress()
	wall := time.Since(start)
	if len(failed) > 0 {
		return errors.New(strings.Join(failed, "; "))
	}
	user, system := cpuSince(cpu)
	for _, w := range workers {
		st.add(*w.stats)
		user += w.stats.CPUUser
		system += w.stats.CPUSystem
	}
	return writeStats(o, st, len(sessions), wall, user, system, nil)
}

// follow reads worker k's answers until it ends: its sessions' ends told to the others,
// its progress added to the parent's, its figures kept.
func follow(k int, w *worker, workers []*worker, st *stats, pos *positions) {
	for {
		line, err := w.out.ReadString('\n')
		if err != nil {
			return
		}
		word, rest, _ := strings.Cut(strings.TrimSuffix(line, "\n"), " ")
		switch word {
		case "DONE":
			for j, other := range workers {
				if j != k {
					other.send("DONE %s\n", rest)
				}
			}
		case "P":
			var n, sum, sq, failed int64
			if _, err := fmt.Sscan(rest, &n, &sum, &sq, &failed); err == nil {
				st.n.Add(n)
				st.sumUs.Add(sum)
				st.sqUs2.Add(sq)
				st.failedIv.Add(failed)
			}
		case "F":
			if v, err := strconv.ParseInt(rest, 10, 64); err == nil {
				pos.update(k, v, workers)
			}
		case "STATS":
			var p partial
			if err := json.Unmarshal([]byte(rest), &p); err == nil {
				w.stats = &p
			}
		}
	}
}

// positions is the parent's view of each worker's lowest position (fast, in step).
type positions struct {
	mu   sync.Mutex
	low  []int64 // by worker
	told []int64 // what each worker was last told of the others'
}

// others is the lowest position of every worker but k. Called with mu held (or before
// the workers run).
func (p *positions) others(k int) int64 {
	low := int64(ended)
	for j, v := range p.low {
		if j != k {
			low = min(low, v)
		}
	}
	return low
}

// update records worker k's lowest position and tells each other worker what changed.
func (p *positions) update(k int, v int64, workers []*worker) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.low[k] = v
	for j, w := range workers {
		if j == k {
			continue
		}
		if o := p.others(j); o != p.told[j] {
			p.told[j] = o
			w.send("F %d\n", o)
		}
	}
}

// readWorkerInput reads what the parent sends before GO: the sessions of this worker,
// their ids and the ids each waits for, and how many sessions the replay has.
func readWorkerInput(r *bufio.Reader, ready func()) (*part, time.Time, error) {
	next := func() ([]byte, error) {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return nil, err
		}
		return bytes.TrimSuffix(line, []byte("\n")), nil
	}
	header, err := next()
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("input: %v", err)
	}
	var total int
	var p *part
	others := int64(ended)
	var ids []int
	var before [][]int
	var lines [][]byte
	for {
		line, err := next()
		if err != nil {
			return nil, time.Time{}, fmt.Errorf("input: %v", err)
		}
		word, rest, _ := strings.Cut(string(line), " ")
		switch word {
		case "N":
			if total, err = strconv.Atoi(rest); err != nil || total < 0 {
				return nil, time.Time{}, fmt.Errorf("input: %q", line)
			}
		case "S":
			id, waits, _ := strings.Cut(rest, " ")
			i, err := strconv.Atoi(id)
			if err != nil || i < 0 || i >= total {
				return nil, time.Time{}, fmt.Errorf("input: %q", line)
			}
			var w []int
			if waits != "-" {
				for _, s := range strings.Split(waits, ",") {
					j, err := strconv.Atoi(s)
					if err != nil || j < 0 || j >= total {
						return nil, time.Time{}, fmt.Errorf("input: %q", line)
					}
					w = append(w, j)
				}
			}
			session, err := next()
			if err != nil {
				return nil, time.Time{}, fmt.Errorf("input: %v", err)
			}
			ids, before, lines = append(ids, i), append(before, w), append(lines, session)
		case "END":
			_, sessions, err := decode("input", header, lines)
			if err != nil {
				return nil, time.Time{}, err
			}
			p = newPart(total)
			for k := range sessions {
				p.sessions = append(p.sessions, &sessions[k])
			}
			p.ids, p.before = ids, before
			ready()
		case "F":
			if others, err = strconv.ParseInt(rest, 10, 64); err != nil {
				return nil, time.Time{}, fmt.Errorf("input: %q", line)
			}
		case "GO":
			ns, err := strconv.ParseInt(rest, 10, 64)
			if err != nil || p == nil {
				return nil, time.Time{}, fmt.Errorf("input: %q", line)
			}
			p.others = others
			return p, time.Unix(0, ns), nil
		default:
			return nil, time.Time{}, fmt.Errorf("input: %q", line)
		}
	}
}

func runWorker(o options) error {
	out := bufio.NewWriter(os.Stdout)
	var outMu sync.Mutex
	say := func(format string, args ...any) {
		outMu.Lock()
		defer outMu.Unlock()
		fmt.Fprintf(out, format, args...)
		_ = out.Flush()
	}
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	p, base, err := readWorkerInput(in, func() { say("READY\n") })
	if err != nil {
		return err
	}
	p.step = stepFor(o, p.sessions, p.others)
	ctx, cancel := signalled()
	defer cancel()
	// the other workers' sessions, as they end; the parent gone, the replay ends
	go func() {
		for {
			line, err := in.ReadString('\n')
			if err != nil {
				cancel()
				return
			}
			word, rest, _ := strings.Cut(strings.TrimSuffix(line, "\n"), " ")
			switch word {
			case "DONE":
				if id, err := strconv.Atoi(rest); err == nil {
					p.end(id)
				}
			case "F":
				if v, err := strconv.ParseInt(rest, 10, 64); err == nil && p.step != nil {
					p.step.setOthers(v)
					p.wake.poke()
				}
			}
		}
	}()
	p.ended = func(id int) { say("DONE %d\n", id) }
	st := newStats()
	records, logDone := startLog(o, o.logPath)
	cpu := cpuNow()
	if !sleepUntil(ctx, base.Add(-100*time.Millisecond)) {
		return errors.New("stopped before the start")
	}
	ctx, stopLimit := withLimit(ctx, o)
	defer stopLimit()
	stopPush := make(chan struct{})
	var pushed sync.WaitGroup
	pushed.Add(1)
	go func() {
		defer pushed.Done()
		push(st, p.step, say, stopPush)
	}()
	p.replay(ctx, o, base, st, records, nil)
	close(records)
	logDone.Wait()
	close(stopPush)
	pushed.Wait()
	user, system := cpuSince(cpu)
	st.stepWaits, st.stepWaited = p.step.figures()
	text, err := json.Marshal(st.partial(user, system))
	if err != nil {
		return err
	}
	say("STATS %s\n", text)
	return nil
}

// push sends the progress made since the last push, every pushEvery, and once more at the end.
func push(st *stats, step *inStep, say func(string, ...any), stop <-chan struct{}) {
	tick := time.NewTicker(pushEvery)
	defer tick.Stop()
	told := int64(math.MinInt64)
	send := func() { // one write
		var lines []byte
		n, sum, sq, failed := st.n.Swap(0), st.sumUs.Swap(0), st.sqUs2.Swap(0), st.failedIv.Swap(0)
		if n != 0 || failed != 0 {
			lines = fmt.Appendf(lines, "P %d %d %d %d\n", n, sum, sq, failed)
		}
		if step != nil {
			if low := step.local(); low != told {
				told = low
				lines = fmt.Appendf(lines, "F %d\n", low)
			}
		}
		if len(lines) > 0 {
			say("%s", lines)
		}
	}
	for {
		select {
		case <-stop:
			send()
			return
		case <-tick.C:
			send()
		}
	}
}
