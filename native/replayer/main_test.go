package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func write(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "r.jsonl")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestReadReplayKeepsSessionsTransactionsAndNullParameters(t *testing.T) {
	path := write(t, `{"version":1,"queries":2}
{"id":"a","user":"u","db":"d","connect":0,"tx":[{"stmts":[{"sql":"BEGIN","kind":"simple","t":5,"dur":1,"q":0},{"sql":"UPDATE t SET x = $1 WHERE id = $2","kind":"prepared","name":"P0_1","params":["5",null],"t":7,"dur":2,"q":1}]}]}
`)
	h, sessions, err := readReplay(path)
	if err != nil {
		t.Fatal(err)
	}
	if h.Queries != 2 || len(sessions) != 1 || len(sessions[0].Tx) != 1 {
		t.Fatalf("header %+v sessions %+v", h, sessions)
	}
	st := sessions[0].Tx[0].Stmts[1]
	if st.Kind != "prepared" || st.Name != "P0_1" || *st.Params[0] != "5" || st.Params[1] != nil {
		t.Fatalf("statement %+v", st)
	}
}

func TestReadReplayRefusesAnotherVersion(t *testing.T) {
	if _, _, err := readReplay(write(t, `{"version":2,"queries":0}`+"\n")); err == nil {
		t.Fatal("a replay file of another version was read")
	}
}

func TestASessionThatEndedBeforeAnotherBeganPrecedesIt(t *testing.T) {
	mk := func(first, last int64) Session {
		return Session{Tx: []Tx{{Stmts: []Stmt{{T: first}, {T: last - 1, Dur: 1}}}}}
	}
	// a set-up session (0-10), then two workers (20-50, 25-60), then another set-up (70-80)
	sessions := []Session{mk(0, 10), mk(20, 50), mk(25, 60), mk(70, 80), {}}
	got := predecessors(sessions)
	want := [][]int{nil, {0}, {0}, {0, 1, 2}, nil}
	for i := range want {
		if len(got[i]) != len(want[i]) {
			t.Fatalf("session %d: %v, want %v", i, got[i], want[i])
		}
		for k := range want[i] {
			if got[i][k] != want[i][k] {
				t.Fatalf("session %d: %v, want %v", i, got[i], want[i])
			}
		}
	}
}

func TestTimesScaleWithSpeedAndNamesAreQuoted(t *testing.T) {
	base := time.Unix(100, 0)
	if got := at(base, 2_000_000, 2).Sub(base); got != time.Second {
		t.Fatalf("2 s at speed 2: %v", got)
	}
	if q := quoteIdent(`P"1`); q != `"P""1"` {
		t.Fatalf("quoted %s", q)
	}
}

func TestCommitsGoInTheirCapturedOrder(t *testing.T) {
	g := newCommitGate(5 * time.Second)
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	for _, turn := range []int{2, 0, 1} {
		wg.Add(1)
		go func(turn int) {
			defer wg.Done()
			time.Sleep(time.Duration(2-turn) * 5 * time.Millisecond) // the last turn first
			g.wait(turn)
			mu.Lock()
			order = append(order, turn)
			mu.Unlock()
			g.over(turn)
		}(turn)
	}
	wg.Wait()
	if len(order) != 3 || order[0] != 0 || order[1] != 1 || order[2] != 2 {
		t.Fatalf("commits in %v", order)
	}
	if g.late != 0 {
		t.Fatalf("%d late", g.late)
	}
}

func TestACommitWhoseTurnDoesNotComeGoesAfterTheWait(t *testing.T) {
	g := newCommitGate(20 * time.Millisecond)
	start := time.Now()
	g.wait(1) // turn 0 never ends
	if time.Since(start) < 20*time.Millisecond || g.late != 1 {
		t.Fatalf("waited %v, late %d", time.Since(start), g.late)
	}
}

func TestCommitsAreNumberedByCapturedTime(t *testing.T) {
	sessions := []Session{
		{Tx: []Tx{{Stmts: []Stmt{{SQL: "BEGIN", T: 1}, {SQL: "COMMIT", T: 30}}}}},
		{Tx: []Tx{{Stmts: []Stmt{{SQL: "BEGIN", T: 2}, {SQL: "end;", T: 20}}}, {Stmts: []Stmt{{SQL: "ROLLBACK", T: 40}}}}},
	}
	if n := numberCommits(sessions); n != 2 {
		t.Fatalf("%d commits", n)
	}
	if sessions[1].Tx[0].Stmts[1].turn != 0 || sessions[0].Tx[0].Stmts[1].turn != 1 || sessions[1].Tx[1].Stmts[0].turn != -1 {
		t.Fatalf("turns %+v", sessions)
	}
}

func TestTheGateOpensAfterCommitsWentLate(t *testing.T) {
	g := newCommitGate(5 * time.Millisecond)
	for i := 1; i <= giveUpAfter; i++ {
		g.wait(i) // turn 0 never ends: each goes late
	}
	start := time.Now()
	g.wait(giveUpAfter + 1)
	if !g.open || time.Since(start) > 5*time.Millisecond {
		t.Fatalf("open %v, waited %v", g.open, time.Since(start))
	}
}

func TestShareBalancesStatementsLargestFirstAndIsDeterministic(t *testing.T) {
	mk := func(n int) Session {
		tx := Tx{}
		for i := 0; i < n; i++ {
			tx.Stmts = append(tx.Stmts, Stmt{})
		}
		return Session{Tx: []Tx{tx}}
	}
	sessions := []Session{mk(1), mk(10), mk(9), mk(4), mk(5), mk(1)}
	got := share(sessions, 2)
	// 10 -> w0, 9 -> w1, 5 -> w1 (9 < 10), 4 -> w0, then 1, 1: 15 and 15
	want := [][]int{{0, 1, 3}, {2, 4, 5}}
	for w := range want {
		if fmt.Sprint(got[w]) != fmt.Sprint(want[w]) {
			t.Fatalf("share %v, want %v", got, want)
		}
	}
	if fmt.Sprint(share(sessions, 2)) != fmt.Sprint(got) {
		t.Fatal("two shares of the same sessions differ")
	}
	if got := share(sessions, 1); len(got) != 1 || len(got[0]) != len(sessions) {
		t.Fatalf("one worker: %v", got)
	}
}

func TestAWorkerReadsItsSessionsTheirWaitsAndTheStart(t *testing.T) {
	input := `{"version":1,"queries":1}
N 3
S 2 0,1
{"id":"c","user":"u","db":"d","connect":0,"tx":[{"stmts":[{"sql":"SELECT 1","kind":"simple","t":5,"dur":1,"q":0}]}]}
END
GO 1700000000000000000
DONE 0
`
	r := bufio.NewReader(strings.NewReader(input))
	readied := false
	p, base, err := readWorkerInput(r, func() { readied = true })
	if err != nil {
		t.Fatal(err)
	}
	if !readied || len(p.sessions) != 1 || p.ids[0] != 2 || fmt.Sprint(p.before[0]) != "[0 1]" || len(p.done) != 3 {
		t.Fatalf("part %+v", p)
	}
	if base.UnixNano() != 1700000000000000000 {
		t.Fatalf("start %v", base)
	}
	// what follows GO is left for the worker's reader
	if rest, _ := r.ReadString('\n'); rest != "DONE 0\n" {
		t.Fatalf("rest %q", rest)
	}
	p.end(0)
	p.end(0) // told twice (its own end, then the parent's): closed once
	select {
	case <-p.done[0]:
	default:
		t.Fatal("session 0 not ended")
	}
	for _, bad := range []string{"N 1\nS 1 -\n", "N 2\nS 0 7\n", "N 1\nGO 5\n", "N 1\nX\n"} {
		_, _, err := readWorkerInput(bufio.NewReader(strings.NewReader(`{"version":1,"queries":0}`+"\n"+bad+"{}\nEND\n")), func() {})
		if err == nil {
			t.Fatalf("%q read", bad)
		}
	}
}

func TestTheParentAddsUpItsWorkersFigures(t *testing.T) {
	st := newStats()
	a := partial{Queries: []*QueryStats{{Q: 0, Calls: 3, Rows: 2, States: map[string]int{"40P01": 1}}},
		Statements: 3, Transactions: 2, OkTx: 1, FailedTx: 1, LagMax: 5, SumAll: 1.5, SqAll: 2.25,
		ConnectErrors: map[string]int{"refused": 1}}
	b := partial{Queries: []*QueryStats{{Q: 0, Calls: 2, Rows: 2}, {Q: 1, Calls: 1}},
		Statements: 3, Transactions: 3, OkTx: 3, LagMax: 9, SumAll: 3, SqAll: 3}
	st.add(a)
	st.add(b)
	q := st.queries[0]
	if st.statements != 6 || st.transactions != 5 || st.okTx != 4 || st.failedTx != 1 || st.lagMax != 9 ||
		q.Calls != 5 || q.Rows != 4 || q.States["40P01"] != 1 || st.queries[1].Calls != 1 ||
		st.connectErrors["refused"] != 1 || st.sumAll != 4.5 {
		t.Fatalf("merged %+v %+v", st, q)
	}
}

func TestASessionAheadByMoreThanTheDriftWaitsForTheOthers(t *testing.T) {
	at := func(us ...int64) *Session {
		tx := Tx{}
		for _, u := range us {
			tx.Stmts = append(tx.Stmts, Stmt{T: u})
		}
		return &Session{Tx: []Tx{tx}}
	}
	// two sessions from 0 s; a third that has no statement holds no one
	step := newInStep([]*Session{at(0), at(0), {}}, time.Second, ended)
	ctx := context.Background()
	step.begin(ctx, 0, 900_000) // within the drift of session 1 (at 0): goes at once
	released := make(chan struct{})
	go func() {
		step.begin(ctx, 0, 2_500_000) // 2.5 s: more than 1 s past session 1
		close(released)
	}()
	select {
	case <-released:
		t.Fatal("a session 2.5 s ahead went on")
	case <-time.After(50 * time.Millisecond):
	}
	step.place(1, 1_000_000) // session 1 at 1 s: 2.5 s is still too far
	select {
	case <-released:
		t.Fatal("went on with the others 1.5 s behind")
	case <-time.After(50 * time.Millisecond):
	}
	step.end(1) // session 1 ended: no one holds it
	select {
	case <-released:
	case <-time.After(2 * time.Second):
		t.Fatal("still held after the other session ended")
	}
	if waits, waited := step.figures(); waits != 1 || waited < 0.09 {
		t.Fatalf("waits %d, waited %.3f s", waits, waited)
	}
	// another process's sessions hold it too, until they move on
	two := newInStep([]*Session{at(0)}, time.Second, 0)
	done := make(chan struct{})
	go func() { two.begin(ctx, 0, 3_000_000); close(done) }()
	select {
	case <-done:
		t.Fatal("went on ahead of the other process")
	case <-time.After(50 * time.Millisecond):
	}
	two.setOthers(2_500_000)
	<-done
	// a cancelled replay is never held
	cctx, cancel := context.WithCancel(ctx)
	three := newInStep([]*Session{at(0), at(0)}, time.Second, ended)
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	three.begin(cctx, 0, 9_000_000)
}
