package main

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
)

// body is a message's body (its type and length taken off), as the loop hands it on.
func body(t *testing.T, m pgproto3.BackendMessage) (byte, []byte) {
	t.Helper()
	b, err := m.Encode(nil)
	if err != nil {
		t.Fatal(err)
	}
	return b[0], b[5:]
}

// kinds lists the messages' types in what the loop would send.
func kinds(t *testing.T, b []byte) string {
	t.Helper()
	out := ""
	for len(b) >= 5 {
		size := int(uint32(b[1])<<24 | uint32(b[2])<<16 | uint32(b[3])<<8 | uint32(b[4]))
		out += string(b[0])
		b = b[1+size:]
	}
	if len(b) != 0 {
		t.Fatalf("%d bytes left over", len(b))
	}
	return out
}

func TestTheLoopSendsAsTheClientDidAndCountsTheAnswers(t *testing.T) {
	one, other := "1", ""
	update := Stmt{SQL: "UPDATE t SET x = x + $1 WHERE id = $2", Kind: "prepared", Name: "u", Params: []*string{&one, nil}, Q: 0}
	again := update
	renamed := Stmt{SQL: "SELECT $1::text", Kind: "prepared", Name: "u", Params: []*string{&other}, Q: 1}
	unnamed := Stmt{SQL: "SELECT $1::int", Kind: "unnamed", Params: []*string{&one}, Q: 2}
	simple := Stmt{SQL: "BEGIN; SELECT 1", Kind: "simple", Q: 3}
	s := &Session{Tx: []Tx{{Stmts: []Stmt{update, again}}, {Stmts: []Stmt{renamed, unnamed, simple}}}}
	records := make(chan []txRecord, 4)
	st := newStats()
	p := newPart(1)
	p.sessions, p.ids, p.before = []*Session{s}, []int{0}, [][]int{nil}
	lp := &loop{p: p, ctx: context.Background(), st: st, records: records, active: 1}
	ls := &loopSession{s: s, fd: -1, prepared: map[string]string{}, l: local{queries: map[int]*QueryStats{}}, state: loopBusy}

	answer := func(msgs ...pgproto3.BackendMessage) {
		for _, m := range msgs {
			kind, b := body(t, m)
			lp.message(ls, kind, b)
		}
	}
	ready := &pgproto3.ReadyForQuery{TxStatus: 'T'}
	sent := func(stmt *Stmt) string {
		ls.begin(stmt)
		return kinds(t, ls.out)
	}

	// first: parsed under its name, then bound and executed
	if got := sent(&s.Tx[0].Stmts[0]); got != "PBDES" {
		t.Fatalf("first execution sends %q", got)
	}
	answer(&pgproto3.ParseComplete{}, &pgproto3.BindComplete{}, &pgproto3.NoData{},
		&pgproto3.CommandComplete{CommandTag: []byte("UPDATE 1")}, ready)
	if ls.prepared["u"] != update.SQL || ls.si != 1 || ls.state != loopReady {
		t.Fatalf("after the first: prepared %v, at %d, state %d", ls.prepared, ls.si, ls.state)
	}
	// the same statement again: bound only
	if got := sent(&s.Tx[0].Stmts[1]); got != "BDES" {
		t.Fatalf("second execution sends %q", got)
	}
	answer(&pgproto3.BindComplete{}, &pgproto3.CommandComplete{CommandTag: []byte("UPDATE 1")}, ready)
	if ls.ti != 1 || ls.si != 0 || ls.l.transactions != 1 || ls.l.okTx != 1 {
		t.Fatalf("after the transaction: at %d.%d, %+v", ls.ti, ls.si, ls.l)
	}
	// the name for another statement: closed, parsed anew; it fails (not prepared)
	if got := sent(&s.Tx[1].Stmts[0]); got != "CPBDES" {
		t.Fatalf("a renamed statement sends %q", got)
	}
	answer(&pgproto3.ErrorResponse{Severity: "ERROR", Code: "42601", Message: "syntax"}, ready)
	if _, ok := ls.prepared["u"]; ok {
		t.Fatalf("a failed Parse left the name prepared: %v", ls.prepared)
	}
	// unnamed: parsed and bound each time; simple: one Query, rows of every statement
	if got := sent(&s.Tx[1].Stmts[1]); got != "PBDES" {
		t.Fatalf("an unnamed statement sends %q", got)
	}
	answer(&pgproto3.ParseComplete{}, &pgproto3.CommandComplete{CommandTag: []byte("SELECT 1")}, ready)
	if got := sent(&s.Tx[1].Stmts[2]); got != "Q" {
		t.Fatalf("a simple statement sends %q", got)
	}
	answer(&pgproto3.CommandComplete{CommandTag: []byte("BEGIN")},
		&pgproto3.CommandComplete{CommandTag: []byte("SELECT 3")}, ready)

	q := ls.l.queries
	if q[0].Calls != 2 || q[0].Rows != 2 || q[1].Errors != 1 || q[1].States["42601"] != 1 ||
		q[2].Rows != 1 || q[3].Rows != 3 {
		t.Fatalf("per statement: %+v %+v %+v %+v", *q[0], *q[1], *q[2], *q[3])
	}
	if ls.l.statements != 5 || ls.l.transactions != 2 || ls.l.failedTx != 1 || ls.l.okTx != 1 {
		t.Fatalf("figures %+v", ls.l)
	}
	// the session ends: its log lines and figures handed on, whoever waits told
	lp.finish(ls)
	if got := <-records; len(got) != 2 || !got[1].failed || got[0].failed {
		t.Fatalf("log %+v", got)
	}
	select {
	case <-p.done[0]:
	default:
		t.Fatal("the session's end not told")
	}
	if st.statements != 5 || st.failedTx != 1 || lp.active != 0 {
		t.Fatalf("merged %d statements, %d failed, %d active", st.statements, st.failedTx, lp.active)
	}
}

func TestTheLoopCountsWhatABrokenConnectionLeavesUnsent(t *testing.T) {
	s := &Session{Tx: []Tx{
		{Stmts: []Stmt{{SQL: "BEGIN", Kind: "simple"}, {SQL: "SELECT 1", Kind: "simple", Q: 1}}},
		{Stmts: []Stmt{{SQL: "SELECT 2", Kind: "simple", Q: 1}}},
	}}
	p := newPart(1)
	p.sessions, p.ids, p.before = []*Session{s}, []int{0}, [][]int{nil}
	lp := &loop{p: p, ctx: context.Background(), st: newStats(), records: make(chan []txRecord, 1), active: 1}
	ls := &loopSession{s: s, fd: -1, prepared: map[string]string{}, l: local{queries: map[int]*QueryStats{}}, state: loopBusy}
	// the first statement answered, the second sent when the server went away
	kind, b := body(t, &pgproto3.ReadyForQuery{TxStatus: 'T'})
	lp.message(ls, kind, b)
	ls.state = loopBusy
	lp.broken(ls)
	if ls.l.statements != 2 || ls.l.queries[1].States["client"] != 1 || ls.l.unsent != 1 {
		t.Fatalf("figures %+v %+v", ls.l, ls.l.queries[1])
	}
	if ls.state != loopDone || lp.active != 0 {
		t.Fatalf("state %d active %d", ls.state, lp.active)
	}
}
