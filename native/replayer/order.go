package main

import (
	"regexp"
	"sort"
	"sync"
	"time"
)

// commitRE is a statement that ends a transaction by committing it (COMMIT, END, or a
// PREPARE TRANSACTION), not ROLLBACK.
var commitRE = regexp.MustCompile(`(?i)^\s*(COMMIT|END|PREPARE\s+TRANSACTION)\b`)

// commitGate holds each COMMIT until the commits captured before it have been sent and
// answered: the replay's commits in the capture's order, as Oracle's replay keeps its
// commit order. A commit waits at most maxWait for its turn, then goes, counted as out of
// order. Holding commits alone can deadlock with the rows a transaction holds (one that
// waits for its turn holds a row the turn before it needs, which then waits for its lock):
// after giveUpAfter commits went late the gate opens for the rest of the replay, and the
// run says so, rather than wait a second for every commit (a hot row makes it every one).
type commitGate struct {
	mu      sync.Mutex
	cond    *sync.Cond
	next    int          // the turn now
	done    map[int]bool // turns over, waiting for the ones before them
	maxWait time.Duration
	late    int64 // commits that went before their turn (waited maxWait)
	open    bool  // given up: commits go in whatever order they come
}

const giveUpAfter = 3

// numberCommits gives each captured COMMIT its turn, by its captured time (sessions
// first, then statements, for the ties), and returns how many there are.
func numberCommits(sessions []Session) int {
	type ref struct {
		t       int64
		s, x, i int
	}
	var all []ref
	for s := range sessions {
		for x := range sessions[s].Tx {
			for i := range sessions[s].Tx[x].Stmts {
				st := &sessions[s].Tx[x].Stmts[i]
				st.turn = -1
				if commitRE.MatchString(st.SQL) {
					all = append(all, ref{st.T, s, x, i})
				}
			}
		}
	}
	sort.SliceStable(all, func(a, b int) bool { return all[a].t < all[b].t })
	for n, r := range all {
		sessions[r.s].Tx[r.x].Stmts[r.i].turn = n
	}
	return len(all)
}

func newCommitGate(maxWait time.Duration) *commitGate {
	g := &commitGate{done: map[int]bool{}, maxWait: maxWait}
	g.cond = sync.NewCond(&g.mu)
	return g
}

// wait returns when it is “turn“'s turn, or after maxWait.
func (g *commitGate) wait(turn int) {
	deadline := time.Now().Add(g.maxWait)
	g.mu.Lock()
	defer g.mu.Unlock()
	for g.next < turn && !g.open {
		left := time.Until(deadline)
		if left <= 0 {
			g.late++
			if g.late >= giveUpAfter {
				g.open = true
				g.cond.Broadcast()
			}
			return
		}
		// sync.Cond has no timeout: a timer wakes every waiter when this one's ends
		t := time.AfterFunc(left, func() { g.mu.Lock(); g.cond.Broadcast(); g.mu.Unlock() })
		g.cond.Wait()
		t.Stop()
	}
}

// over marks “turn“ as done (committed, failed, or never to be sent): the turn moves
// past every turn that is done.
func (g *commitGate) over(turn int) {
	if g == nil || turn < 0 {
		return
	}
	g.mu.Lock()
	g.done[turn] = true
	for g.done[g.next] {
		delete(g.done, g.next)
		g.next++
	}
	g.cond.Broadcast()
	g.mu.Unlock()
}
