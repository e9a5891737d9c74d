package main

// A capture made at the wire (pgfsbench-wirecap), replayed as its clients spoke it:
// each session connects with its start-up parameters (search_path, DateStyle, options,
// application_name...: the client's), then sends each step's messages exactly as they
// came: Parse with its parameter type OIDs, Bind with its formats and its values (binary
// as binary), Describe, Execute with its row limit, Sync, Flush, Close, a simple query with
// several statements as one message, a function call as its bytes, COPY's data after the
// server asks for it. Statement and portal names live their own lives (a Close, a
// DEALLOCATE, a DISCARD ALL is the client's, sent as it sent it). A step ends with the
// server's ReadyForQuery; a transaction with the first one whose status is idle.
//
// What each step did is counted by normalised statement, as pgfsbench counts the
// capture's own answers (workloads/replay_wire.py): an Execute's outcome (its command tag,
// or the error its Parse, Bind or Execute met, with the SQLSTATE) to its statement; a
// simple query's to the query. A transaction the capture shows as a client's retry of one
// that failed (a serialization failure, a deadlock, a unique violation, retried alike) is
// sent only if the one before it failed here too.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// WireFormatVersion is the replay file's version for a wire capture.
const WireFormatVersion = 2

// WireMsg is one frontend message as the capture wrote it down.
type WireMsg struct {
	M      string            `json:"m"`
	SQL    json.RawMessage   `json:"sql,omitempty"`
	Name   json.RawMessage   `json:"name,omitempty"`
	OIDs   []uint32          `json:"oids,omitempty"`
	Portal json.RawMessage   `json:"portal,omitempty"`
	Stmt   json.RawMessage   `json:"stmt,omitempty"`
	PF     []int16           `json:"pf,omitempty"`
	V      []json.RawMessage `json:"v,omitempty"`
	RF     []int16           `json:"rf,omitempty"`
	Kind   string            `json:"kind,omitempty"`
	Max    uint32            `json:"max,omitempty"`
	Data   string            `json:"data,omitempty"`
	Msg    json.RawMessage   `json:"msg,omitempty"`
	Raw    string            `json:"raw,omitempty"`
	Q      int               `json:"q"` // its normalised statement (Execute, Query); -1: none
}

// WireStep is what a client sent until the server's ReadyForQuery.
type WireStep struct {
	T     int64     `json:"t"`   // microseconds from the capture's start
	Dur   int64     `json:"dur"` // until its ReadyForQuery, in the capture
	Msgs  []WireMsg `json:"msgs"`
	Idle  bool      `json:"idle"`            // the transaction ended with it (status I)
	Retry bool      `json:"retry,omitempty"` // its transaction retries the one before
}

// WireSession is one captured connection.
type WireSession struct {
	ID      string            `json:"id"`
	User    string            `json:"user"`
	DB      string            `json:"db"`
	Params  map[string]string `json:"params"`
	Connect int64             `json:"connect"`
	Steps   []WireStep        `json:"steps"`
}

// textOf decodes a written-down text: a JSON string, or {"b": base64} for bytes that are
// not UTF-8.
func textOf(raw json.RawMessage) (string, error) {
	if len(raw) == 0 {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var b struct {
		B string `json:"b"`
	}
	if err := json.Unmarshal(raw, &b); err != nil {
		return "", err
	}
	out, err := base64.StdEncoding.DecodeString(b.B)
	return string(out), err
}

// valueOf decodes a Bind value: null, {"t": text} or {"b": base64}.
func valueOf(raw json.RawMessage) ([]byte, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var v struct {
		T *string `json:"t"`
		B *string `json:"b"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	if v.T != nil {
		return []byte(*v.T), nil
	}
	if v.B != nil {
		return base64.StdEncoding.DecodeString(*v.B)
	}
	return []byte{}, nil
}

// message is the protocol message a WireMsg stands for.
func message(m *WireMsg) (pgproto3.FrontendMessage, error) {
	switch m.M {
	case "Q":
		sql, err := textOf(m.SQL)
		return &pgproto3.Query{String: sql}, err
	case "P":
		name, err := textOf(m.Name)
		if err != nil {
			return nil, err
		}
		sql, err := textOf(m.SQL)
		return &pgproto3.Parse{Name: name, Query: sql, ParameterOIDs: m.OIDs}, err
	case "B":
		portal, err := textOf(m.Portal)
		if err != nil {
			return nil, err
		}
		stmt, err := textOf(m.Stmt)
		if err != nil {
			return nil, err
		}
		values := make([][]byte, len(m.V))
		for i, raw := range m.V {
			if values[i], err = valueOf(raw); err != nil {
				return nil, err
			}
		}
		return &pgproto3.Bind{DestinationPortal: portal, PreparedStatement: stmt,
			ParameterFormatCodes: m.PF, Parameters: values, ResultFormatCodes: m.RF}, nil
	case "D":
		name, err := textOf(m.Name)
		return &pgproto3.Describe{ObjectType: kindByte(m.Kind), Name: name}, err
	case "E":
		portal, err := textOf(m.Portal)
		return &pgproto3.Execute{Portal: portal, MaxRows: m.Max}, err
	case "C":
		name, err := textOf(m.Name)
		return &pgproto3.Close{ObjectType: kindByte(m.Kind), Name: name}, err
	case "S":
		return &pgproto3.Sync{}, nil
	case "H":
		return &pgproto3.Flush{}, nil
	case "d":
		data, err := base64.StdEncoding.DecodeString(m.Data)
		return &pgproto3.CopyData{Data: data}, err
	case "c":
		return &pgproto3.CopyDone{}, nil
	case "f":
		msg, err := textOf(m.Msg)
		return &pgproto3.CopyFail{Message: msg}, err
	case "F":
		raw, err := base64.StdEncoding.DecodeString(m.Raw)
		if err != nil {
			return nil, err
		}
		var f pgproto3.FunctionCall
		return &f, f.Decode(raw)
	}
	return nil, fmt.Errorf("a message %q the replayer does not send", m.M)
}

func kindByte(k string) byte {
	if k == "" {
		return 'S'
	}
	return k[0]
}

func isCopy(m string) bool { return m == "d" || m == "c" || m == "f" }

// isWire says whether a replay file's header is a wire capture's.
func isWire(header []byte) bool {
	var h Header
	return json.Unmarshal(header, &h) == nil && h.Version == WireFormatVersion
}

func runWire(o options, _ []byte, lines [][]byte) error {
	if o.mode != "timed" && o.mode != "think" && o.mode != "fast" {
		return fmt.Errorf("-mode %q: timed, think or fast", o.mode)
	}
	sessions := make([]WireSession, len(lines))
	for i, line := range lines {
		if err := json.Unmarshal(line, &sessions[i]); err != nil {
			return fmt.Errorf("session %d: %v", i+1, err)
		}
	}
	ctx, cancel := signalled()
	defer cancel()
	st := newStats()
	records, logDone := startLog(o, o.logPath)
	cpu := cpuNow()
	start := time.Now()
	base := start.Add(100 * time.Millisecond)
	ctx, stopLimit := withLimit(ctx, o)
	defer stopLimit()
	stopProgress := startProgress(o, start, st)
	var retriesSkipped sync.Map
	var wg sync.WaitGroup
	for i := range sessions {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			n := replayWire(ctx, o, i, &sessions[i], base, st, records)
			if n > 0 {
				retriesSkipped.Store(i, n)
			}
		}(i)
	}
	wg.Wait()
	close(records)
	logDone.Wait()
	stopProgress()
	wall := time.Since(start)
	user, system := cpuSince(cpu)
	skipped := 0
	retriesSkipped.Range(func(_, v any) bool { skipped += v.(int); return true })
	st.retriesSkipped = skipped
	return writeStats(o, st, len(sessions), wall, user, system, nil)
}

func wireConfig(o options, s *WireSession) (*pgconn.Config, error) {
	cfg, err := connConfig(o, &Session{User: s.User, DB: s.DB})
	if err != nil {
		return nil, err
	}
	for k, v := range s.Params {
		switch k {
		case "user", "database", "replication", "application_name":
			continue // who and where: the replay's; its name: the benchmark's (PGAPPNAME)
		}
		cfg.RuntimeParams[k] = v
	}
	cfg.RuntimeParams["lock_timeout"] = o.lockTimeout
	return cfg, nil
}

// replayWire replays one session; it returns the statements of the retries it did not
// send (their first attempt succeeded here).
func replayWire(ctx context.Context, o options, client int, s *WireSession, base time.Time, st *stats, records chan<- []txRecord) int {
	l := &local{queries: map[int]*QueryStats{}}
	defer st.merge(l)
	batch := make([]txRecord, 0, logBatch)
	defer func() {
		if len(batch) > 0 {
			records <- batch
		}
	}()
	unsent := func(from int) {
		for _, step := range s.Steps[from:] {
			for _, m := range step.Msgs {
				if m.M == "Q" || m.M == "E" {
					l.unsent++
				}
			}
		}
	}
	if o.mode == "timed" && !sleepUntil(ctx, at(base, s.Connect, o.speed)) {
		unsent(0)
		return 0
	}
	cfg, err := wireConfig(o, s)
	if err != nil {
		unsent(0)
		return 0
	}
	cfg.DialFunc = dialRaw
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		st.mu.Lock()
		st.connectErrors[err.Error()]++
		st.mu.Unlock()
		unsent(0)
		return 0
	}
	hc, err := conn.Hijack()
	if err != nil {
		conn.Close(context.Background())
		unsent(0)
		return 0
	}
	defer hc.Conn.Close()
	stopWatch := context.AfterFunc(ctx, func() { _ = hc.Conn.SetDeadline(time.Now()) })
	defer stopWatch()
	fe := hc.Frontend
	var prevEnd time.Time
	var prevStep *WireStep
	txBegan, txScheduled := time.Time{}, time.Time{}
	txFailed, lastTxFailed := false, false
	txno, skipped := 0, 0
	skipping := false
	for si := range s.Steps {
		step := &s.Steps[si]
		inTx := !txBegan.IsZero()
		if !inTx && step.Retry && !lastTxFailed {
			skipping = true // the first attempt succeeded here: the client's retry is not sent
		}
		if skipping {
			for _, m := range step.Msgs {
				if m.M == "Q" || m.M == "E" {
					skipped++ // a statement of a retry not sent
				}
			}
			if step.Idle {
				skipping = false
			}
			continue
		}
		var scheduled time.Time
		switch o.mode {
		case "timed":
			scheduled = at(base, step.T, o.speed)
			if !sleepUntil(ctx, scheduled) {
				unsent(si)
				return skipped
			}
		case "think":
			if prevStep != nil {
				think := step.T - (prevStep.T + prevStep.Dur)
				if think > 0 && !sleepUntil(ctx, prevEnd.Add(time.Duration(float64(think)*o.thinkScale)*time.Microsecond)) {
					unsent(si)
					return skipped
				}
			}
		}
		if ctx.Err() != nil {
			unsent(si)
			return skipped
		}
		now := time.Now()
		if !inTx {
			txBegan = now
			txScheduled = now
			if !scheduled.IsZero() {
				txScheduled = scheduled
			}
			txFailed = false
		}
		failed, broken := sendStep(fe, step, l)
		prevEnd = time.Now()
		prevStep = step
		txFailed = txFailed || failed
		if broken {
			unsent(si + 1)
			return skipped
		}
		if step.Idle {
			end := time.Now()
			lat := end.Sub(txScheduled).Microseconds()
			lag := txBegan.Sub(txScheduled).Microseconds()
			if lag < 0 {
				lag = 0
			}
			l.transaction(st, lat, txFailed)
			if lag > l.lagMax {
				l.lagMax = lag
			}
			batch = append(batch, txRecord{client: client, txno: txno, latency: lat, lag: lag, end: end, failed: txFailed})
			txno++
			if len(batch) == logBatch {
				records <- batch
				batch = make([]txRecord, 0, logBatch)
			}
			lastTxFailed = txFailed
			txBegan = time.Time{}
		}
	}
	return skipped
}

// sendStep sends a step's messages (COPY's data once the server asks for it) and reads
// the answers to ReadyForQuery, counting each statement's outcome. It says whether a
// statement failed, and whether the connection broke.
func sendStep(fe *pgproto3.Frontend, step *WireStep, l *local) (failed, broken bool) {
	var copyMsgs []pgproto3.FrontendMessage
	var pending []int // the q of each Execute sent and not yet answered
	simple := -2      // the q of the simple query in progress (-2: none)
	for i := range step.Msgs {
		m := &step.Msgs[i]
		msg, err := message(m)
		if err != nil {
			return true, false
		}
		if isCopy(m.M) {
			copyMsgs = append(copyMsgs, msg)
			continue
		}
		fe.Send(msg)
		switch m.M {
		case "E":
			pending = append(pending, m.Q)
		case "Q":
			simple = m.Q
		}
	}
	if err := fe.Flush(); err != nil {
		return true, true
	}
	var rows int64
	code := ""
	done := func(q int, tag string, c string) {
		if q < 0 {
			return
		}
		if c != "" {
			l.statement(q, c, 0)
			return
		}
		l.statement(q, "", rowsOf(tag))
	}
	for {
		msg, err := fe.Receive()
		if err != nil {
			return true, true
		}
		switch m := msg.(type) {
		case *pgproto3.CopyInResponse:
			for _, c := range copyMsgs {
				fe.Send(c)
			}
			copyMsgs = nil
			if err := fe.Flush(); err != nil {
				return true, true
			}
		case *pgproto3.CommandComplete:
			if simple != -2 {
				rows += rowsOf(string(m.CommandTag))
			} else if len(pending) > 0 {
				done(pending[0], string(m.CommandTag), "")
				pending = pending[1:]
			}
		case *pgproto3.PortalSuspended, *pgproto3.EmptyQueryResponse:
			if simple == -2 && len(pending) > 0 {
				done(pending[0], "", "")
				pending = pending[1:]
			}
		case *pgproto3.ErrorResponse:
			failed = true
			if simple != -2 {
				if code == "" {
					code = m.Code
				}
			} else if len(pending) > 0 {
				// the error of the first Execute not answered (its Parse, Bind or itself):
				// the server skips the rest to the Sync, as it did in the capture
				done(pending[0], "", m.Code)
				pending = nil
			}
		case *pgproto3.ReadyForQuery:
			if simple != -2 && simple >= 0 {
				if code != "" {
					l.statement(simple, code, 0)
				} else {
					l.statement(simple, "", rows)
				}
			}
			if m.TxStatus == 'E' {
				failed = true
			}
			return failed, false
		}
	}
}

// rowsOf reads a command tag's row count ("UPDATE 3", "INSERT 0 1", "SELECT 10").
func rowsOf(tag string) int64 {
	for i := len(tag) - 1; i >= 0; i-- {
		if tag[i] == ' ' {
			n, err := strconv.ParseInt(tag[i+1:], 10, 64)
			if err == nil {
				return n
			}
			return 0
		}
	}
	return 0
}
