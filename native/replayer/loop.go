package main

// A fast replay's sessions, multiplexed on one thread of each process, as pgbench's
// thread runs its clients: a statement is written to the socket, the thread waits on
// every session's socket at once (epoll), reads the answers that came, and sends each
// of those sessions' next statement. Go's poller does the same for goroutines, but each
// statement then also paid the runtime's scheduling: the goroutine parked, the poller's
// thread woken, the runtime's monitor slept and woken. Measured on a 2-CPU host replaying
// pgbench's simple-update (100k transactions, 4 sessions in 2 processes): the goroutine
// per session cost about 57 µs of the replayer's CPU a transaction, 5.4 context switches
// a transaction against pgbench's 4.2; a goroutine per session blocked in the kernel,
// 78 µs (every session its own thread, woken on its own CPU).
//
// The loop is fast mode's, on a unix socket, without -commit-order; timed and think
// modes (sessions that sleep) and TCP hosts keep a goroutine a session (replaySession).
// Statements are sent as replaySession sends them (a prepared statement parsed once
// a session under its name, executed by Bind/Execute; an unnamed one parsed and bound
// each time; a simple one as a Query), with their answers read to ReadyForQuery: rows
// from the command tags, the first error's SQLSTATE. Each connection is made by pgconn
// (start-up, authentication) in a goroutine of its own, then handed to the loop.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// loopWait is the longest the loop waits for its sockets: how late it sees the replay's
// end and the runtime can stop it for a collection.
const loopWait = 10 // milliseconds

type loopState int

const (
	loopWaiting    loopState = iota // for the sessions that ended before it began
	loopConnecting                  // its connection being made
	loopReady                       // between two statements
	loopBusy                        // a statement sent, its answer awaited
	loopDone
)

// loopSession is one session of the loop: where it is, and its connection.
type loopSession struct {
	k, id    int
	s        *Session
	state    loopState
	fd       int // -1: none
	conn     *blockingConn
	in, out  []byte // received and not yet read; to send and not yet sent
	prepared map[string]string
	params   [][]byte
	ti, si   int
	l        local
	batch    []txRecord
	began    time.Time // the transaction's first statement sent
	failed   bool      // a statement of the transaction failed
	rows     int64     // the statement's, so far
	code     string    // the statement's first error's SQLSTATE ("": none)
	parsing  string    // a prepared statement's name whose Parse was sent with it
	held     time.Time // since when in step holds it (zero: not held)
	writable bool      // waiting for the socket to take the rest of out (EPOLLOUT)
}

// loopable says whether a replay runs in the loop.
func loopable(o options, gate *commitGate) bool {
	return o.mode == "fast" && gate == nil && len(o.host) > 0 && o.host[0] == '/'
}

// loopProcs gives a loop's process two Ps: the loop's, and one for everything else
// (connecting, progress, the parent's messages, the log, the collector), unless
// GOMAXPROCS says otherwise.
func loopProcs(env string) {
	if env == "" {
		runtime.GOMAXPROCS(2)
	}
}

type connected struct {
	k    int
	conn *blockingConn
	err  error
}

// waker wakes the loop from its wait (an eventfd in its epoll set).
type waker struct{ fd int }

func (w *waker) wake() {
	one := [8]byte{1}
	_, _ = rawIO(syscall.SYS_WRITE, uintptr(w.fd), one[:])
}

func (w *waker) drain() {
	var buf [8]byte
	_, _ = rawIO(syscall.SYS_READ, uintptr(w.fd), buf[:])
}

// replayLoop replays the part's sessions in the loop; it returns when every one has
// ended. An error before any began (no epoll, no eventfd) says so: started is false.
func (p *part) replayLoop(ctx context.Context, o options, st *stats, records chan<- []txRecord) (started bool, err error) {
	ep, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return false, err
	}
	defer syscall.Close(ep)
	efd, _, errno := syscall.RawSyscall(syscall.SYS_EVENTFD2, 0, syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if errno != 0 {
		return false, errno
	}
	w := &waker{fd: int(efd)}
	defer syscall.Close(w.fd)
	if err := syscall.EpollCtl(ep, syscall.EPOLL_CTL_ADD, w.fd, &syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: 0}); err != nil {
		return false, err
	}
	p.wake.Store(w)
	defer p.wake.Store(nil)
	stop := context.AfterFunc(ctx, w.wake)
	defer stop()

	sessions := make([]*loopSession, len(p.sessions))
	for k := range p.sessions {
		sessions[k] = &loopSession{
			k: k, id: p.ids[k], s: p.sessions[k], fd: -1,
			prepared: map[string]string{},
			l:        local{queries: map[int]*QueryStats{}},
			batch:    make([]txRecord, 0, logBatch),
		}
	}
	conns := make(chan connected, len(sessions))
	lp := &loop{p: p, o: o, ctx: ctx, st: st, records: records, ep: ep, conns: conns, w: w}
	defer lp.closeAll(sessions)
	events := make([]syscall.EpollEvent, 64)
	for lp.active = len(sessions); lp.active > 0; {
		for _, ls := range sessions {
			lp.advance(ls)
		}
		if lp.active == 0 {
			break
		}
		n, errno := epollWait(ep, events, loopWait)
		if errno != 0 && errno != syscall.EINTR {
			return true, fmt.Errorf("epoll_pwait: %w", errno)
		}
		for _, ev := range events[:max(n, 0)] {
			if ev.Fd == 0 {
				w.drain()
				continue
			}
			ls := sessions[ev.Fd-1]
			if ls.fd < 0 {
				continue
			}
			if ev.Events&syscall.EPOLLOUT != 0 && len(ls.out) > 0 {
				lp.flush(ls)
			}
			if ev.Events&(syscall.EPOLLIN|syscall.EPOLLERR|syscall.EPOLLHUP) != 0 && ls.fd >= 0 {
				lp.receive(ls)
			}
		}
		lp.takeConnections(sessions)
		if ctx.Err() != nil { // the replay's end: the statements awaited fail, as a goroutine's would
			for _, ls := range sessions {
				if ls.state == loopBusy {
					lp.broken(ls)
				}
			}
		}
	}
	return true, nil
}

type loop struct {
	p       *part
	o       options
	ctx     context.Context
	st      *stats
	records chan<- []txRecord
	ep      int
	conns   chan connected
	w       *waker
	active  int
}

// epollWait waits for the sockets without leaving the P (a raw system call, at most
// ms milliseconds).
//
//go:noinline
func epollWait(ep int, events []syscall.EpollEvent, ms int) (int, syscall.Errno) {
	n, _, e := syscall.RawSyscall6(syscall.SYS_EPOLL_PWAIT, uintptr(ep),
		uintptr(unsafe.Pointer(&events[0])), uintptr(len(events)), uintptr(ms), 0, 0)
	return int(n), e
}

// takeConnections hands the connections made to their sessions.
func (lp *loop) takeConnections(sessions []*loopSession) {
	for {
		select {
		case c := <-lp.conns:
			ls := sessions[c.k]
			if c.err != nil {
				lp.st.mu.Lock()
				lp.st.connectErrors[c.err.Error()]++
				lp.st.mu.Unlock()
				lp.unsent(ls, 0)
				lp.finish(ls)
				continue
			}
			ls.conn, ls.fd = c.conn, c.conn.fd
			ev := syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(ls.k + 1)}
			if err := syscall.EpollCtl(lp.ep, syscall.EPOLL_CTL_ADD, ls.fd, &ev); err != nil {
				lp.st.mu.Lock()
				lp.st.connectErrors[err.Error()]++
				lp.st.mu.Unlock()
				lp.unsent(ls, 0)
				lp.finish(ls)
				continue
			}
			ls.state = loopReady
		default:
			return
		}
	}
}

// advance moves a session on as far as it can without waiting.
func (lp *loop) advance(ls *loopSession) {
	for {
		switch ls.state {
		case loopWaiting:
			if lp.ctx.Err() != nil {
				lp.unsent(ls, 0)
				lp.finish(ls)
				return
			}
			for _, j := range lp.p.before[ls.k] {
				select {
				case <-lp.p.done[j]:
				default:
					return
				}
			}
			ls.state = loopConnecting
			go func(k int, s *Session) {
				c, err := dialLoop(lp.ctx, lp.o, s)
				lp.conns <- connected{k, c, err}
				lp.w.wake()
			}(ls.k, ls.s)
			return
		case loopReady:
			if !lp.send(ls) {
				return
			}
		default:
			return
		}
	}
}

// send sends the session's next statement; false when it cannot now (held in step,
// ended, or sent and its answer awaited).
func (lp *loop) send(ls *loopSession) bool {
	s := ls.s
	for ls.ti < len(s.Tx) && len(s.Tx[ls.ti].Stmts) == 0 {
		ls.ti++
	}
	if ls.ti >= len(s.Tx) {
		lp.finish(ls)
		return false
	}
	stmt := &s.Tx[ls.ti].Stmts[ls.si]
	step := lp.p.step
	if ls.si == 0 {
		if !step.ready(ls.k, stmt.T) && lp.ctx.Err() == nil {
			if ls.held.IsZero() {
				ls.held = time.Now()
			}
			return false
		}
		if !ls.held.IsZero() {
			step.waited(time.Since(ls.held))
			ls.held = time.Time{}
		}
	}
	if lp.ctx.Err() != nil {
		lp.unsent(ls, ls.ti)
		lp.finish(ls)
		return false
	}
	step.place(ls.k, stmt.T+stmt.Dur)
	if ls.si == 0 {
		ls.began = time.Now()
		ls.failed = false
	}
	ls.begin(stmt)
	lp.flush(ls)
	return false
}

// begin puts a statement's messages to send, its answer awaited.
func (ls *loopSession) begin(stmt *Stmt) {
	ls.rows, ls.code, ls.parsing = 0, "", ""
	ls.out = ls.encode(ls.out[:0], stmt)
	ls.state = loopBusy
}

var empty = []byte{}

// encode appends the messages that send a statement as the client did.
func (ls *loopSession) encode(b []byte, s *Stmt) []byte {
	if s.Kind == "simple" || (s.Kind != "prepared" && s.Kind != "unnamed") {
		b, _ = (&pgproto3.Query{String: s.SQL}).Encode(b)
		return b
	}
	ls.params = ls.params[:0]
	for _, p := range s.Params {
		switch {
		case p == nil:
			ls.params = append(ls.params, nil)
		case len(*p) == 0:
			ls.params = append(ls.params, empty)
		default: // read only, while the message is encoded
			ls.params = append(ls.params, unsafe.Slice(unsafe.StringData(*p), len(*p)))
		}
	}
	name := ""
	if s.Kind == "prepared" {
		name = s.Name
		if sql, ok := ls.prepared[name]; !ok || sql != s.SQL {
			if ok {
				b, _ = (&pgproto3.Close{ObjectType: 'S', Name: name}).Encode(b)
				delete(ls.prepared, name)
			}
			b, _ = (&pgproto3.Parse{Name: name, Query: s.SQL}).Encode(b)
			ls.parsing = name
		}
	} else {
		b, _ = (&pgproto3.Parse{Query: s.SQL}).Encode(b)
	}
	b, _ = (&pgproto3.Bind{PreparedStatement: name, Parameters: ls.params}).Encode(b)
	b, _ = (&pgproto3.Describe{ObjectType: 'P'}).Encode(b)
	b, _ = (&pgproto3.Execute{}).Encode(b)
	b, _ = (&pgproto3.Sync{}).Encode(b)
	return b
}

// flush writes what the session has to send; what the socket does not take now is sent
// when it can (EPOLLOUT).
func (lp *loop) flush(ls *loopSession) {
	for len(ls.out) > 0 {
		n, e := rawIO(syscall.SYS_WRITE, uintptr(ls.fd), ls.out)
		switch e {
		case 0:
			ls.out = ls.out[n:]
			continue
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			if !ls.writable {
				ls.writable = true
				lp.watch(ls, syscall.EPOLLIN|syscall.EPOLLOUT)
			}
			return
		}
		lp.broken(ls)
		return
	}
	if ls.writable {
		ls.writable = false
		lp.watch(ls, syscall.EPOLLIN)
	}
	if cap(ls.out) > 1<<20 { // a large statement's buffer is not kept
		ls.out = nil
	}
}

// watch sets what the loop waits for on the session's socket.
func (lp *loop) watch(ls *loopSession, events uint32) {
	ev := syscall.EpollEvent{Events: events, Fd: int32(ls.k + 1)}
	_ = syscall.EpollCtl(lp.ep, syscall.EPOLL_CTL_MOD, ls.fd, &ev)
}

// receive reads what came on the session's socket and handles its whole messages.
func (lp *loop) receive(ls *loopSession) {
	for {
		if cap(ls.in)-len(ls.in) < 4096 {
			grown := make([]byte, len(ls.in), max(2*cap(ls.in), 16384))
			copy(grown, ls.in)
			ls.in = grown
		}
		free := ls.in[len(ls.in):cap(ls.in)]
		n, e := rawIO(syscall.SYS_READ, uintptr(ls.fd), free)
		if e == syscall.EINTR {
			continue
		}
		if e == syscall.EAGAIN {
			break
		}
		if e != 0 || n == 0 {
			lp.broken(ls)
			return
		}
		ls.in = ls.in[:len(ls.in)+n]
		if n < len(free) {
			break
		}
	}
	rest := ls.in
	for len(rest) >= 5 {
		size := int(binary.BigEndian.Uint32(rest[1:5]))
		if size < 4 {
			lp.broken(ls)
			return
		}
		if len(rest) < 1+size {
			break
		}
		lp.message(ls, rest[0], rest[5:1+size])
		rest = rest[1+size:]
		if ls.fd < 0 {
			return
		}
	}
	ls.in = ls.in[:copy(ls.in, rest)]
	if len(ls.in) == 0 && cap(ls.in) > 1<<20 { // a large answer's buffer is not kept
		ls.in = nil
	}
}

// message handles one message of the server's answer.
func (lp *loop) message(ls *loopSession, kind byte, body []byte) {
	switch kind {
	case 'C': // CommandComplete
		var cc pgproto3.CommandComplete
		if cc.Decode(body) == nil {
			ls.rows += pgconn.NewCommandTag(string(cc.CommandTag)).RowsAffected()
		}
	case 'E': // ErrorResponse: the first one's code
		if ls.code == "" {
			var er pgproto3.ErrorResponse
			if er.Decode(body) == nil && er.Code != "" {
				ls.code = er.Code
			} else {
				ls.code = "client"
			}
		}
	case '1': // ParseComplete
		if ls.parsing != "" && ls.state == loopBusy {
			ls.prepared[ls.parsing] = ls.s.Tx[ls.ti].Stmts[ls.si].SQL
			ls.parsing = ""
		}
	case 'G': // CopyInResponse: the data was not captured
		ls.out, _ = (&pgproto3.CopyFail{Message: "pgfsbench replay: the COPY's data was not captured"}).Encode(ls.out)
		lp.flush(ls)
	case 'Z': // ReadyForQuery
		if ls.state == loopBusy {
			if st := &ls.s.Tx[ls.ti].Stmts[ls.si]; st.Kind == "simple" {
				forget(ls.prepared, st.SQL) // DEALLOCATE, DISCARD ALL: as the server did
			}
			lp.done(ls)
		}
	}
}

// done counts the statement answered and moves the session on.
func (lp *loop) done(ls *loopSession) {
	tx := &ls.s.Tx[ls.ti]
	ls.l.statement(tx.Stmts[ls.si].Q, ls.code, ls.rows)
	if ls.code != "" {
		ls.failed = true
		if lp.ctx.Err() != nil {
			lp.unsent(ls, ls.ti+1)
			lp.finish(ls)
			return
		}
	}
	ls.state = loopReady
	ls.si++
	if ls.si < len(tx.Stmts) {
		return
	}
	end := time.Now()
	lat := end.Sub(ls.began).Microseconds()
	ls.l.transaction(lp.st, lat, ls.failed)
	ls.batch = append(ls.batch, txRecord{client: ls.id, txno: ls.ti, latency: lat, end: end, failed: ls.failed})
	if len(ls.batch) == logBatch {
		lp.records <- ls.batch
		ls.batch = make([]txRecord, 0, logBatch)
	}
	ls.ti++
	ls.si = 0
}

// broken: the connection failed (or the replay's end shut it); the statement sent on
// it fails, and the session ends with the rest unsent.
func (lp *loop) broken(ls *loopSession) {
	if ls.state == loopBusy {
		if ls.code == "" {
			ls.code = "client"
		}
		ls.l.statement(ls.s.Tx[ls.ti].Stmts[ls.si].Q, ls.code, 0)
	}
	lp.unsent(ls, ls.ti+1)
	lp.finish(ls)
}

// unsent counts the statements of the session's transactions from the from-th on.
func (lp *loop) unsent(ls *loopSession, from int) {
	for _, tx := range ls.s.Tx[min(from, len(ls.s.Tx)):] {
		ls.l.unsent += int64(len(tx.Stmts))
	}
}

// finish ends a session: its connection closed, its figures and log lines handed on,
// and whoever waits for it told.
func (lp *loop) finish(ls *loopSession) {
	if ls.state == loopDone {
		return
	}
	if ls.fd >= 0 {
		if ls.state != loopBusy {
			t, _ := (&pgproto3.Terminate{}).Encode(nil)
			_, _ = rawIO(syscall.SYS_WRITE, uintptr(ls.fd), t)
		}
		_ = ls.conn.Close()
		ls.fd = -1
	}
	ls.state = loopDone
	lp.active--
	lp.p.step.end(ls.k)
	if len(ls.batch) > 0 {
		lp.records <- ls.batch
		ls.batch = nil
	}
	lp.st.merge(&ls.l)
	lp.p.end(ls.id)
	if lp.p.ended != nil {
		lp.p.ended(ls.id)
	}
}

// closeAll, when the loop ends early: every session still on is ended (one being
// connected once its connection is made).
func (lp *loop) closeAll(sessions []*loopSession) {
	for _, ls := range sessions {
		for ls.state == loopConnecting {
			c := <-lp.conns
			other := sessions[c.k]
			if c.conn != nil {
				other.conn, other.fd = c.conn, c.conn.fd
			}
			other.state = loopReady
		}
		if ls.state != loopDone {
			lp.unsent(ls, ls.ti)
			lp.finish(ls)
		}
	}
}

// dialLoop connects a session through pgconn on a blocking unix socket, then hands the
// socket to the loop, non-blocking.
func dialLoop(ctx context.Context, o options, s *Session) (*blockingConn, error) {
	cfg, err := connConfig(o, s)
	if err != nil {
		return nil, err
	}
	var conn *blockingConn
	cfg.DialFunc = func(_ context.Context, network, addr string) (net.Conn, error) {
		if network != "unix" {
			return nil, errors.New("the replay's loop connects on a unix socket only")
		}
		c, err := dialBlocking(addr)
		if err == nil {
			conn = c.(*blockingConn)
		}
		return c, err
	}
	pc, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := pc.SyncConn(ctx); err != nil {
		pc.Close(context.Background())
		return nil, err
	}
	if _, err := pc.Hijack(); err != nil {
		pc.Close(context.Background())
		return nil, err
	}
	if conn == nil {
		return nil, os.ErrInvalid
	}
	_ = conn.SetDeadline(time.Time{})
	if err := syscall.SetNonblock(conn.fd, true); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// wakeRef holds the loop's waker, for the goroutines that change what it waits for.
type wakeRef struct{ atomic.Pointer[waker] }

// poke wakes the loop, if one runs.
func (r *wakeRef) poke() {
	if w := r.Load(); w != nil {
		w.wake()
	}
}
