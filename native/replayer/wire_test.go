package main

import (
	"encoding/json"
	"net"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
)

func TestForgetEndsPreparedStatementsAsTheServerDoes(t *testing.T) {
	p := map[string]string{"a": "SELECT 1", "B": "SELECT 2", "c": "SELECT 3"}
	forget(p, "DEALLOCATE a")
	if _, ok := p["a"]; ok {
		t.Fatal("DEALLOCATE a left a prepared")
	}
	forget(p, `deallocate prepare "B"`)
	if _, ok := p["B"]; ok {
		t.Fatal(`DEALLOCATE PREPARE "B" left B prepared`)
	}
	forget(p, "SELECT 'DEALLOCATE c'")
	if _, ok := p["c"]; !ok {
		t.Fatal("a literal that reads DEALLOCATE ended c")
	}
	forget(p, "SET x = 1; DISCARD ALL")
	if len(p) != 0 {
		t.Fatalf("DISCARD ALL left %v", p)
	}
	p["d"] = "SELECT 4"
	forget(p, "DEALLOCATE ALL;")
	if len(p) != 0 {
		t.Fatalf("DEALLOCATE ALL left %v", p)
	}
}

func msgs(t *testing.T, text string) []WireMsg {
	t.Helper()
	var out []WireMsg
	if err := json.Unmarshal([]byte(text), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// a server that answers each message as the script says, then ReadyForQuery
func fakeServer(t *testing.T, conn net.Conn, answers func(pgproto3.FrontendMessage) []pgproto3.BackendMessage) {
	be := pgproto3.NewBackend(conn, conn)
	go func() {
		for {
			m, err := be.Receive()
			if err != nil {
				return
			}
			for _, a := range answers(m) {
				be.Send(a)
			}
			if err := be.Flush(); err != nil {
				return
			}
		}
	}()
}

func TestAWireStepIsSentAsItCameAndCountedByStatement(t *testing.T) {
	client, server := net.Pipe()
	defer client.Close()
	var got []string
	var bind *pgproto3.Bind
	fakeServer(t, server, func(m pgproto3.FrontendMessage) []pgproto3.BackendMessage {
		switch x := m.(type) {
		case *pgproto3.Parse:
			got = append(got, "P")
			if len(x.ParameterOIDs) != 2 || x.ParameterOIDs[0] != 3802 {
				t.Errorf("parameter types not as sent: %v", x.ParameterOIDs)
			}
			return []pgproto3.BackendMessage{&pgproto3.ParseComplete{}}
		case *pgproto3.Bind:
			got = append(got, "B")
			c := *x
			bind = &c
			return []pgproto3.BackendMessage{&pgproto3.BindComplete{}}
		case *pgproto3.Execute:
			got = append(got, "E")
			if len(got) > 4 {
				return []pgproto3.BackendMessage{&pgproto3.ErrorResponse{Severity: "ERROR", Code: "23505"}}
			}
			return []pgproto3.BackendMessage{&pgproto3.CommandComplete{CommandTag: []byte("INSERT 0 1")}}
		case *pgproto3.Sync:
			got = append(got, "S")
			return []pgproto3.BackendMessage{&pgproto3.ReadyForQuery{TxStatus: 'I'}}
		case *pgproto3.Query:
			got = append(got, "Q")
			return []pgproto3.BackendMessage{&pgproto3.CopyInResponse{}}
		case *pgproto3.CopyData:
			got = append(got, "d")
			return nil
		case *pgproto3.CopyDone:
			got = append(got, "c")
			return []pgproto3.BackendMessage{&pgproto3.CommandComplete{CommandTag: []byte("COPY 2")}, &pgproto3.ReadyForQuery{TxStatus: 'I'}}
		}
		return nil
	})
	fe := pgproto3.NewFrontend(client, client)
	l := &local{queries: map[int]*QueryStats{}}
	step := WireStep{Msgs: msgs(t, `[
		{"m":"P","name":"s1","sql":"INSERT INTO t VALUES ($1, $2)","oids":[3802,17],"q":-1},
		{"m":"B","portal":"","stmt":"s1","pf":[0,1],"v":[{"t":"{\"a\":1}"},{"b":"AAEC"}],"rf":[],"q":-1},
		{"m":"E","portal":"","max":0,"q":0},
		{"m":"B","portal":"","stmt":"s1","pf":[0,1],"v":[{"t":"{}"},null],"rf":[],"q":-1},
		{"m":"E","portal":"","max":0,"q":0},
		{"m":"S","q":-1}]`), Idle: true}
	failed, broken := sendStep(fe, &step, l)
	if broken || !failed {
		t.Fatalf("failed %v broken %v", failed, broken)
	}
	if bind == nil || string(bind.Parameters[0]) != "{}" || bind.Parameters[1] != nil || bind.ParameterFormatCodes[1] != 1 {
		t.Fatalf("the last Bind not as sent: %+v", bind)
	}
	q := l.queries[0]
	if q.Calls != 2 || q.Errors != 1 || q.States["23505"] != 1 || q.Rows != 1 {
		t.Fatalf("counted %+v", q)
	}
	// COPY: its data sent once the server asks for it
	copyStep := WireStep{Msgs: msgs(t, `[
		{"m":"Q","sql":"COPY t FROM STDIN","q":1},
		{"m":"d","data":"MQkyCg==","q":-1},{"m":"d","data":"Mwk0Cg==","q":-1},{"m":"c","q":-1}]`), Idle: true}
	if failed, broken := sendStep(fe, &copyStep, l); failed || broken {
		t.Fatalf("COPY failed %v broken %v", failed, broken)
	}
	if l.queries[1].Rows != 2 || l.queries[1].Calls != 1 {
		t.Fatalf("COPY counted %+v", l.queries[1])
	}
	want := "PBEBESQddc"
	gotS := ""
	for _, g := range got {
		gotS += g
	}
	if gotS != want {
		t.Fatalf("sent %s, want %s", gotS, want)
	}
}
