package main

import (
	"os"
	"path/filepath"
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
