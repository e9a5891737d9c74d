// jdbclike drives the protocol as the JDBC driver does, for pgfsbench's tests: named
// server-side statements with typed parameters (setInt, setString, setTimestamp: their
// type OIDs sent), binary results asked for, a portal read in pieces (setFetchSize: Execute
// with a row limit, PortalSuspended, Execute again), and the statement closed by name
// before it is prepared again under the same name. It is a client nobody here wrote the
// replay for.
//
//	jdbclike -host 127.0.0.1 -port 6543 -user postgres -db postgres -n 20
package main

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

func main() {
	host := flag.String("host", "127.0.0.1", "")
	port := flag.Int("port", 5432, "")
	user := flag.String("user", "postgres", "")
	db := flag.String("db", "postgres", "")
	n := flag.Int("n", 10, "rounds")
	flag.Parse()
	if err := run(*host, *port, *user, *db, *n); err != nil {
		fmt.Fprintln(os.Stderr, "jdbclike:", err)
		os.Exit(1)
	}
}

func until(fe *pgproto3.Frontend, done func(pgproto3.BackendMessage) bool) error {
	for {
		m, err := fe.Receive()
		if err != nil {
			return err
		}
		if e, ok := m.(*pgproto3.ErrorResponse); ok {
			return fmt.Errorf("%s %s", e.Code, e.Message)
		}
		if done(m) {
			return nil
		}
	}
}

func int4(v int32) []byte {
	b := make([]byte, 4)
	binary.BigEndian.PutUint32(b, uint32(v))
	return b
}

func run(host string, port int, user, db string, n int) error {
	ctx := context.Background()
	conn, err := pgconn.Connect(ctx, fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=disable application_name=jdbclike", host, port, user, db))
	if err != nil {
		return err
	}
	hc, err := conn.Hijack()
	if err != nil {
		return err
	}
	defer hc.Conn.Close()
	fe := hc.Frontend
	ready := func(m pgproto3.BackendMessage) bool { _, ok := m.(*pgproto3.ReadyForQuery); return ok }
	fe.Send(&pgproto3.Query{String: "CREATE TABLE IF NOT EXISTS jdbc_t (id int PRIMARY KEY, name text, at timestamptz)"})
	if err := fe.Flush(); err != nil {
		return err
	}
	if err := until(fe, ready); err != nil {
		return err
	}
	for round := 0; round < n; round++ {
		// insert with typed parameters: int4 binary, text, timestamptz as text with its OID
		fe.Send(&pgproto3.Parse{Name: "S_1", Query: "INSERT INTO jdbc_t VALUES ($1, $2, $3) ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name", ParameterOIDs: []uint32{23, 25, 1184}})
		fe.Send(&pgproto3.Bind{PreparedStatement: "S_1", ParameterFormatCodes: []int16{1, 0, 0},
			Parameters: [][]byte{int4(int32(round)), []byte(fmt.Sprintf("row %d", round)), []byte(time.Unix(1700000000+int64(round), 0).UTC().Format(time.RFC3339))}})
		fe.Send(&pgproto3.Execute{})
		fe.Send(&pgproto3.Sync{})
		if err := fe.Flush(); err != nil {
			return err
		}
		if err := until(fe, ready); err != nil {
			return err
		}
		// read with a fetch size of 2: a portal in pieces, binary results
		fe.Send(&pgproto3.Parse{Name: "S_2", Query: "SELECT id, name FROM jdbc_t WHERE id <= $1 ORDER BY id", ParameterOIDs: []uint32{23}})
		fe.Send(&pgproto3.Bind{DestinationPortal: "C_1", PreparedStatement: "S_2", ParameterFormatCodes: []int16{1}, Parameters: [][]byte{int4(int32(round))}, ResultFormatCodes: []int16{1, 0}})
		fe.Send(&pgproto3.Execute{Portal: "C_1", MaxRows: 2})
		fe.Send(&pgproto3.Flush{})
		if err := fe.Flush(); err != nil {
			return err
		}
		for {
			var suspended, complete bool
			if err := until(fe, func(m pgproto3.BackendMessage) bool {
				switch m.(type) {
				case *pgproto3.PortalSuspended:
					suspended = true
					return true
				case *pgproto3.CommandComplete:
					complete = true
					return true
				}
				return false
			}); err != nil {
				return err
			}
			if complete {
				break
			}
			if suspended {
				fe.Send(&pgproto3.Execute{Portal: "C_1", MaxRows: 2})
				fe.Send(&pgproto3.Flush{})
				if err := fe.Flush(); err != nil {
					return err
				}
			}
		}
		// closed by name, then the same names prepared again next round
		fe.Send(&pgproto3.Close{ObjectType: 'P', Name: "C_1"})
		fe.Send(&pgproto3.Close{ObjectType: 'S', Name: "S_1"})
		fe.Send(&pgproto3.Close{ObjectType: 'S', Name: "S_2"})
		fe.Send(&pgproto3.Sync{})
		if err := fe.Flush(); err != nil {
			return err
		}
		if err := until(fe, ready); err != nil {
			return err
		}
	}
	fe.Send(&pgproto3.Terminate{})
	return fe.Flush()
}
