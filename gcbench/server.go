package main

import (
	"bufio"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// The server-shaped workload: clients send batches of text requests over loopback TCP; the
// server parses each line, looks the key up in a map, allocates a response and writes a
// reply line; the client parses the replies. Both ends run in this process, so a CPU
// profile sees the parser, the map, the allocator and the collector, as a server's would.
//
// Request:  "GET <key> <n>\n"        key is "k" and a decimal number, n a small count
// Reply:    "OK <key> <value> <sum>\n" or "NO <key>\n"

// Record is what the server's table holds per key.
type Record struct {
	Key   string
	Value int64
	Tags  []string
	Next  *Record // a neighbour, so the table is a graph the collector walks
}

// Response is allocated per request and dropped after the reply is written.
type Response struct {
	Rec  *Record
	Key  []byte
	Sum  int64
	Prev *Response
}

const (
	serverKeys  = 1 << 17
	serverBatch = 32
)

// NewTable builds the server's map of keys.
func NewTable(n int) map[string]*Record {
	m := make(map[string]*Record, n)
	var prev *Record
	for i := 0; i < n; i++ {
		k := "k" + strconv.Itoa(i)
		r := &Record{Key: k, Value: int64(i) * 7, Tags: []string{"t" + strconv.Itoa(i%97)}, Next: prev}
		m[k] = r
		prev = r
	}
	return m
}

// parseRequest splits "GET <key> <n>" into its key and count; ok is false for a malformed line.
func parseRequest(line []byte) (key []byte, n int, ok bool) {
	if len(line) < 6 || line[0] != 'G' || line[1] != 'E' || line[2] != 'T' || line[3] != ' ' {
		return nil, 0, false
	}
	rest := line[4:]
	sp := -1
	for i := 0; i < len(rest); i++ {
		if rest[i] == ' ' {
			sp = i
			break
		}
	}
	if sp <= 0 {
		return nil, 0, false
	}
	key = rest[:sp]
	digits := rest[sp+1:]
	if len(digits) == 0 {
		return nil, 0, false
	}
	for i := 0; i < len(digits); i++ {
		c := digits[i]
		if c < '0' || c > '9' {
			return nil, 0, false
		}
		n = n*10 + int(c-'0')
	}
	return key, n, true
}

// handle answers one request into out.
func handle(tbl map[string]*Record, line []byte, out []byte, prev *Response) ([]byte, *Response) {
	key, n, ok := parseRequest(line)
	if !ok {
		return append(out, "ERR\n"...), prev
	}
	rec := tbl[string(key)]
	if rec == nil {
		out = append(out, "NO "...)
		out = append(out, key...)
		return append(out, '\n'), prev
	}
	resp := &Response{Rec: rec, Key: append([]byte(nil), key...), Prev: prev}
	// The record chain: each r is a random heap object, and the first instruction to touch
	// it is the bounds check of r.Tags[0] (CMPQ 0x20(r), $0: len(r.Tags) > 0), which folds
	// the load of the record's line into the compare. A profile's samples pile up on that
	// check (or on the jump after it: skid) while the miss is served; the gc lab's
	// classifier must charge them to memory, not to safety. TestChainFirstTouchIsACheck
	// keeps this case in the compiled code.
	r := rec
	for i := 0; i < n && r != nil; i++ {
		resp.Sum += r.Value + int64(len(r.Tags[0]))
		r = r.Next
	}
	out = append(out, "OK "...)
	out = append(out, resp.Key...)
	out = append(out, ' ')
	out = strconv.AppendInt(out, resp.Rec.Value, 10)
	out = append(out, ' ')
	out = strconv.AppendInt(out, resp.Sum, 10)
	out = append(out, '\n')
	return out, resp
}

func serveConn(c net.Conn, tbl map[string]*Record) {
	defer c.Close()
	rd := bufio.NewReaderSize(c, 16<<10)
	var out []byte
	var prev *Response
	for {
		out = out[:0]
		for k := 0; k < serverBatch; k++ {
			line, err := rd.ReadSlice('\n')
			if err != nil {
				return
			}
			out, prev = handle(tbl, line[:len(line)-1], out, prev)
			if k%8 == 7 {
				prev = nil // a short chain of recent responses stays live, then is dropped
			}
		}
		if _, err := c.Write(out); err != nil {
			return
		}
	}
}

// clientLoop sends batches until stop is set and returns requests answered and a checksum;
// answered counts them as they come (one add per batch), so a window can be cut out of the
// run.
func clientLoop(addr string, seed uint64, stop *atomic.Bool, answered *atomic.Int64) (int64, uint64, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return 0, 0, err
	}
	defer c.Close()
	rd := bufio.NewReaderSize(c, 16<<10)
	r := newRand(seed)
	var buf []byte
	var done int64
	var sum uint64
	for !stop.Load() {
		buf = buf[:0]
		for k := 0; k < serverBatch; k++ {
			buf = append(buf, "GET k"...)
			buf = strconv.AppendUint(buf, r.next()%(serverKeys+serverKeys/16), 10)
			buf = append(buf, ' ')
			buf = strconv.AppendUint(buf, r.next()%8, 10)
			buf = append(buf, '\n')
		}
		if _, err := c.Write(buf); err != nil {
			return done, sum, err
		}
		for k := 0; k < serverBatch; k++ {
			line, err := rd.ReadSlice('\n')
			if err != nil {
				return done, sum, err
			}
			sum += replyValue(line)
			done++
		}
		answered.Add(serverBatch)
	}
	return done, sum, nil
}

// replyValue is the last number of an OK reply, 0 otherwise.
func replyValue(line []byte) uint64 {
	if len(line) < 3 || line[0] != 'O' {
		return 0
	}
	end := len(line) - 1
	i := end
	for i > 0 && line[i-1] != ' ' {
		i--
	}
	var v uint64
	for ; i < end; i++ {
		v = v*10 + uint64(line[i]-'0')
	}
	return v
}

// RunServer serves and loads `conns` connections over 127.0.0.1 for warmup + d and returns
// the requests answered (warm-up included) and a checksum. begin and end (either may be nil)
// are called when the measured d starts and ends, with the load running, and are given the
// count of requests answered (whole batches, live), so the caller can count the window's own.
func RunServer(conns int, warmup, d time.Duration, begin, end func(answered *atomic.Int64)) (int64, uint64, error) {
	tbl := NewTable(serverKeys)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, 0, err
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serveConn(c, tbl)
		}
	}()
	var stop atomic.Bool
	var wg sync.WaitGroup
	var total, answered atomic.Int64
	var sum atomic.Uint64
	errs := make(chan error, conns)
	for i := 0; i < conns; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			n, s, err := clientLoop(ln.Addr().String(), uint64(i)+1, &stop, &answered)
			total.Add(n)
			sum.Add(s)
			if err != nil && !errors.Is(err, io.EOF) {
				errs <- err
			}
		}(i)
	}
	time.Sleep(warmup)
	if begin != nil {
		begin(&answered)
	}
	time.Sleep(d)
	if end != nil {
		end(&answered)
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for e := range errs {
		return total.Load(), sum.Load(), e
	}
	return total.Load(), sum.Load(), nil
}
