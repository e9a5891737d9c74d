// pgfsbench-wirecap records a PostgreSQL workload at the wire: a relay the clients (or
// their pooler) connect through for the capture's seconds, every byte passed on unchanged
// both ways, what the clients sent written down per session as it came (startup
// parameters; Parse with its parameter type OIDs; Bind with its formats and values, a
// binary value kept as binary; Describe, Execute with its row limit, Sync, Flush, Close;
// simple queries, several statements in one message kept as one; COPY data both ways;
// function calls), and what the server answered that tells how each step went (command
// tags, errors with their SQLSTATE, the transaction status, COPY responses,
// notifications), each with its time. A password or a SASL message is relayed and never
// written down.
//
// TLS: a client asking for it gets it with a certificate made at start (-client-tls; a
// client that verifies the server's certificate refuses it, as it should); the server is
// reached as -upstream-sslmode says (disable, prefer, require: libpq's words). SCRAM passes
// through (the relay holds no password); channel binding cannot pass a relay, by design.
//
// Output: JSON lines on standard output (the capture's file, opened by pgfsbench), one an
// event. SIGUSR1 ends the recording and new connections; the sessions then open are
// relayed until they end, or -drain after. SIGTERM ends everything at once.
package main

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgproto3"
)

const (
	sslRequest    = 80877103
	gssEncRequest = 80877104
	cancelRequest = 80877102
	protocol3     = 196608
	maxStartup    = 10000
	maxMessage    = 1 << 30
)

type options struct {
	listen, upstreamHost, ready, sslmode string
	upstreamPort                         int
	clientTLS                            bool
	drain                                time.Duration
}

// recorder writes the events, one JSON line each, from every session.
type recorder struct {
	mu     sync.Mutex
	out    *bufio.Writer
	start  time.Time
	on     atomic.Bool
	events atomic.Int64
	bytes  atomic.Int64
}

func (r *recorder) write(ev map[string]any) {
	if !r.on.Load() {
		return
	}
	ev["t"] = time.Since(r.start).Microseconds()
	line, err := json.Marshal(ev)
	if err != nil {
		return
	}
	r.mu.Lock()
	r.out.Write(line)
	r.out.WriteByte('\n')
	r.mu.Unlock()
	r.events.Add(1)
	r.bytes.Add(int64(len(line) + 1))
}

func (r *recorder) flush() {
	r.mu.Lock()
	r.out.Flush()
	r.mu.Unlock()
}

// value is a Bind parameter as written down: text when it is valid UTF-8 and was sent as
// text, else its bytes in base64; nil for NULL.
func value(v []byte, binaryFormat bool) any {
	if v == nil {
		return nil
	}
	if !binaryFormat && utf8.Valid(v) {
		return map[string]string{"t": string(v)}
	}
	return map[string]string{"b": base64.StdEncoding.EncodeToString(v)}
}

func text(s string) any {
	if utf8.ValidString(s) {
		return s
	}
	return map[string]string{"b": base64.StdEncoding.EncodeToString([]byte(s))}
}

// frontend turns one message of a client into its event (nil: not written down).
func frontend(kind byte, body []byte) (map[string]any, error) {
	switch kind {
	case 'Q':
		var m pgproto3.Query
		if err := m.Decode(body); err != nil {
			return nil, err
		}
		return map[string]any{"m": "Q", "sql": text(m.String)}, nil
	case 'P':
		var m pgproto3.Parse
		if err := m.Decode(body); err != nil {
			return nil, err
		}
		return map[string]any{"m": "P", "name": text(m.Name), "sql": text(m.Query), "oids": m.ParameterOIDs}, nil
	case 'B':
		var m pgproto3.Bind
		if err := m.Decode(body); err != nil {
			return nil, err
		}
		values := make([]any, len(m.Parameters))
		for i, v := range m.Parameters {
			f := int16(0)
			switch {
			case len(m.ParameterFormatCodes) == 1:
				f = m.ParameterFormatCodes[0]
			case i < len(m.ParameterFormatCodes):
				f = m.ParameterFormatCodes[i]
			}
			values[i] = value(v, f == 1)
		}
		return map[string]any{
			"m": "B", "portal": text(m.DestinationPortal), "stmt": text(m.PreparedStatement),
			"pf": m.ParameterFormatCodes, "v": values, "rf": m.ResultFormatCodes,
		}, nil
	case 'D':
		var m pgproto3.Describe
		if err := m.Decode(body); err != nil {
			return nil, err
		}
		return map[string]any{"m": "D", "kind": string(m.ObjectType), "name": text(m.Name)}, nil
	case 'E':
		var m pgproto3.Execute
		if err := m.Decode(body); err != nil {
			return nil, err
		}
		return map[string]any{"m": "E", "portal": text(m.Portal), "max": m.MaxRows}, nil
	case 'C':
		var m pgproto3.Close
		if err := m.Decode(body); err != nil {
			return nil, err
		}
		return map[string]any{"m": "C", "kind": string(m.ObjectType), "name": text(m.Name)}, nil
	case 'S':
		return map[string]any{"m": "S"}, nil
	case 'H':
		return map[string]any{"m": "H"}, nil
	case 'd':
		return map[string]any{"m": "d", "data": base64.StdEncoding.EncodeToString(body)}, nil
	case 'c':
		return map[string]any{"m": "c"}, nil
	case 'f':
		var m pgproto3.CopyFail
		if err := m.Decode(body); err != nil {
			return nil, err
		}
		return map[string]any{"m": "f", "msg": text(m.Message)}, nil
	case 'F':
		return map[string]any{"m": "F", "raw": base64.StdEncoding.EncodeToString(body)}, nil
	case 'X':
		return map[string]any{"m": "X"}, nil
	case 'p':
		return nil, nil // a password, a SASL response: relayed, never written down
	}
	return map[string]any{"m": "?", "kind": string(kind)}, nil
}

// backend turns one message of the server into its event (nil: not written down).
func backend(kind byte, body []byte) (map[string]any, error) {
	switch kind {
	case 'C':
		var m pgproto3.CommandComplete
		if err := m.Decode(body); err != nil {
			return nil, err
		}
		return map[string]any{"m": "C", "tag": string(m.CommandTag)}, nil
	case 'E':
		var m pgproto3.ErrorResponse
		if err := m.Decode(body); err != nil {
			return nil, err
		}
		return map[string]any{"m": "E", "code": m.Code, "severity": m.SeverityUnlocalized}, nil
	case 'Z':
		var m pgproto3.ReadyForQuery
		if err := m.Decode(body); err != nil {
			return nil, err
		}
		return map[string]any{"m": "Z", "status": string(m.TxStatus)}, nil
	case 'G':
		return map[string]any{"m": "G"}, nil
	case 'H':
		return map[string]any{"m": "H"}, nil
	case 'A':
		var m pgproto3.NotificationResponse
		if err := m.Decode(body); err != nil {
			return nil, err
		}
		return map[string]any{"m": "A", "channel": text(m.Channel)}, nil
	case 'I':
		return map[string]any{"m": "I"}, nil
	case 'd':
		return map[string]any{"m": "d", "n": len(body)}, nil // COPY TO's data: its size
	case 'c':
		return map[string]any{"m": "c"}, nil
	case 's':
		return map[string]any{"m": "s"}, nil
	case '1', '2', '3':
		return map[string]any{"m": string(kind)}, nil
	case 'R':
		if len(body) >= 4 && binary.BigEndian.Uint32(body) == 0 {
			return map[string]any{"m": "R"}, nil // authenticated
		}
	}
	return nil, nil
}

// readMessage reads one typed message: its kind, its body, and the bytes as they came.
func readMessage(r *bufio.Reader) (byte, []byte, []byte, error) {
	head := make([]byte, 5)
	if _, err := io.ReadFull(r, head); err != nil {
		return 0, nil, nil, err
	}
	n := int(binary.BigEndian.Uint32(head[1:]))
	if n < 4 || n > maxMessage {
		return 0, nil, nil, fmt.Errorf("a message of %d bytes", n)
	}
	raw := make([]byte, 1+n)
	copy(raw, head)
	if _, err := io.ReadFull(r, raw[5:]); err != nil {
		return 0, nil, nil, err
	}
	return head[0], raw[5:], raw, nil
}

func readStartup(r io.Reader) ([]byte, uint32, error) {
	head := make([]byte, 8)
	if _, err := io.ReadFull(r, head); err != nil {
		return nil, 0, err
	}
	n := int(binary.BigEndian.Uint32(head))
	if n < 8 || n > maxStartup {
		return nil, 0, fmt.Errorf("a startup packet of %d bytes", n)
	}
	raw := make([]byte, n)
	copy(raw, head)
	if _, err := io.ReadFull(r, raw[8:]); err != nil {
		return nil, 0, err
	}
	return raw, binary.BigEndian.Uint32(head[4:]), nil
}

func startupParams(raw []byte) map[string]any {
	out := map[string]any{}
	fields := raw[8:]
	for len(fields) > 1 {
		k, rest, ok := cut(fields)
		if !ok || len(k) == 0 {
			break
		}
		v, rest2, ok := cut(rest)
		if !ok {
			break
		}
		if string(k) != "password" {
			out[string(k)] = text(string(v))
		}
		fields = rest2
	}
	return out
}

func cut(b []byte) ([]byte, []byte, bool) {
	for i, c := range b {
		if c == 0 {
			return b[:i], b[i+1:], true
		}
	}
	return nil, nil, false
}

type relay struct {
	o        options
	rec      *recorder
	tlsConf  *tls.Config
	sessions sync.WaitGroup
	next     atomic.Int64
	open     sync.Map // session -> [2]net.Conn
}

func (p *relay) dialUpstream() (net.Conn, error) {
	var c net.Conn
	var err error
	if len(p.o.upstreamHost) > 0 && p.o.upstreamHost[0] == '/' {
		c, err = net.DialTimeout("unix", fmt.Sprintf("%s/.s.PGSQL.%d", p.o.upstreamHost, p.o.upstreamPort), 10*time.Second)
	} else {
		c, err = net.DialTimeout("tcp", net.JoinHostPort(p.o.upstreamHost, strconv.Itoa(p.o.upstreamPort)), 10*time.Second)
	}
	if err != nil || p.o.sslmode == "disable" || c.RemoteAddr().Network() == "unix" {
		return c, err
	}
	req := make([]byte, 8)
	binary.BigEndian.PutUint32(req, 8)
	binary.BigEndian.PutUint32(req[4:], sslRequest)
	if _, err := c.Write(req); err != nil {
		c.Close()
		return nil, err
	}
	answer := make([]byte, 1)
	if _, err := io.ReadFull(c, answer); err != nil {
		c.Close()
		return nil, err
	}
	if answer[0] == 'S' {
		t := tls.Client(c, &tls.Config{InsecureSkipVerify: true}) // libpq's require: not verified
		if err := t.Handshake(); err != nil {
			c.Close()
			return nil, err
		}
		return t, nil
	}
	if p.o.sslmode == "require" {
		c.Close()
		return nil, errors.New("the server refused TLS (-upstream-sslmode require)")
	}
	return c, nil
}

func (p *relay) serve(client net.Conn) {
	defer p.sessions.Done()
	defer client.Close()
	id := p.next.Add(1)
	var raw []byte
	var code uint32
	var err error
	for {
		raw, code, err = readStartup(client)
		if err != nil {
			return
		}
		switch code {
		case sslRequest:
			if p.tlsConf == nil {
				client.Write([]byte{'N'})
				continue
			}
			client.Write([]byte{'S'})
			t := tls.Server(client, p.tlsConf)
			if t.Handshake() != nil {
				return
			}
			client = t
			continue
		case gssEncRequest:
			client.Write([]byte{'N'})
			continue
		case cancelRequest:
			up, err := p.dialUpstream()
			if err == nil {
				up.Write(raw)
				up.Close()
			}
			p.rec.write(map[string]any{"s": id, "d": "F", "m": "cancel"})
			return
		}
		break
	}
	if code != protocol3 {
		return
	}
	up, err := p.dialUpstream()
	if err != nil {
		p.rec.write(map[string]any{"s": id, "d": "F", "m": "upstream", "error": err.Error()})
		return
	}
	defer up.Close()
	p.open.Store(id, [2]net.Conn{client, up})
	defer p.open.Delete(id)
	p.rec.write(map[string]any{"s": id, "d": "F", "m": "startup", "params": startupParams(raw)})
	if _, err := up.Write(raw); err != nil {
		return
	}
	done := make(chan struct{}, 2)
	go p.pump(id, "F", client, up, frontend, done)
	go p.pump(id, "B", up, client, backend, done)
	<-done
	client.Close()
	up.Close()
	<-done
	p.rec.write(map[string]any{"s": id, "d": "F", "m": "end"})
}

// pump relays from src to dst message by message, writing each down as decode says.
func (p *relay) pump(id int64, dir string, src, dst net.Conn, decode func(byte, []byte) (map[string]any, error), done chan<- struct{}) {
	defer func() { done <- struct{}{} }()
	r := bufio.NewReaderSize(src, 64<<10)
	// the messages a read brought go on in one write (as the peer sent them): written
	// one by one, a result of many rows cost a system call and a wake-up a row
	w := bufio.NewWriterSize(dst, 64<<10)
	for {
		kind, body, raw, err := readMessage(r)
		if err != nil {
			w.Flush()
			return
		}
		if p.rec.on.Load() {
			ev, err := decode(kind, body)
			if err != nil {
				ev = map[string]any{"m": "?", "kind": string(kind), "error": err.Error()}
			}
			if ev != nil {
				ev["s"] = id
				ev["d"] = dir
				p.rec.write(ev)
			}
		}
		if _, err := w.Write(raw); err != nil {
			return
		}
		if r.Buffered() == 0 { // nothing more in hand: what it has goes on before it waits
			if err := w.Flush(); err != nil {
				return
			}
		}
	}
}

func selfSigned() (*tls.Config, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "pgfsbench-wirecap"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(48 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}, nil
}

func main() {
	var o options
	flag.StringVar(&o.listen, "listen", "127.0.0.1:6543", "where clients connect (host:port)")
	flag.StringVar(&o.upstreamHost, "upstream-host", "/var/run/postgresql", "the server: a host, or its unix socket directory")
	flag.IntVar(&o.upstreamPort, "upstream-port", 5432, "the server's port")
	flag.StringVar(&o.sslmode, "upstream-sslmode", "prefer", "TLS to the server: disable, prefer or require")
	flag.BoolVar(&o.clientTLS, "client-tls", false, "offer TLS to clients (a certificate made at start)")
	flag.DurationVar(&o.drain, "drain", 30*time.Second, "after SIGUSR1, how long the open sessions are still relayed")
	flag.StringVar(&o.ready, "ready", "", "a file written (with the listening address) once clients may connect")
	version := flag.Bool("version", false, "print the version")
	flag.Parse()
	if *version {
		fmt.Println("pgfsbench-wirecap 1")
		return
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "pgfsbench-wirecap:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	if o.sslmode != "disable" && o.sslmode != "prefer" && o.sslmode != "require" {
		return fmt.Errorf("-upstream-sslmode %q: disable, prefer or require", o.sslmode)
	}
	rec := &recorder{out: bufio.NewWriterSize(os.Stdout, 1<<20), start: time.Now()}
	rec.on.Store(true)
	p := &relay{o: o, rec: rec}
	if o.clientTLS {
		conf, err := selfSigned()
		if err != nil {
			return err
		}
		p.tlsConf = conf
	}
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return err
	}
	if o.ready != "" {
		f, err := os.OpenFile(o.ready, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o644)
		if err != nil {
			return err
		}
		fmt.Fprintln(f, ln.Addr().String())
		f.Close()
	}
	rec.write(map[string]any{"m": "begin", "listen": ln.Addr().String(), "upstream": fmt.Sprintf("%s:%d", o.upstreamHost, o.upstreamPort)})
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGUSR1, syscall.SIGTERM, syscall.SIGINT)
	stopFlush := make(chan struct{})
	go func() {
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				rec.flush()
			case <-stopFlush:
				return
			}
		}
	}()
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.sessions.Add(1)
			go p.serve(c)
		}
	}()
	s := <-sig
	rec.write(map[string]any{"m": "stop", "open": count(&p.open)})
	rec.on.Store(false)
	ln.Close()
	<-accepted
	if s == syscall.SIGUSR1 {
		ended := make(chan struct{})
		go func() { p.sessions.Wait(); close(ended) }()
		select {
		case <-ended:
		case <-time.After(o.drain):
		case <-sig:
		}
	}
	p.open.Range(func(_, v any) bool {
		conns := v.([2]net.Conn)
		conns[0].Close()
		conns[1].Close()
		return true
	})
	p.sessions.Wait()
	close(stopFlush)
	rec.flush()
	fmt.Fprintf(os.Stderr, "pgfsbench-wirecap: %d events, %d bytes\n", rec.events.Load(), rec.bytes.Load())
	return nil
}

func count(m *sync.Map) int {
	n := 0
	m.Range(func(_, _ any) bool { n++; return true })
	return n
}
