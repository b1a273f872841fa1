package main

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"
	"time"
)

// pb builds protobuf bytes by hand for the decoder tests.
type pb struct{ b []byte }

func (p *pb) varint(x uint64) {
	for x >= 0x80 {
		p.b = append(p.b, byte(x)|0x80)
		x >>= 7
	}
	p.b = append(p.b, byte(x))
}
func (p *pb) u(field int, x uint64) { p.varint(uint64(field)<<3 | 0); p.varint(x) }
func (p *pb) msg(field int, body []byte) {
	p.varint(uint64(field)<<3 | 2)
	p.varint(uint64(len(body)))
	p.b = append(p.b, body...)
}

func TestProfileStacksDecodesHandMadeProfile(t *testing.T) {
	var prof pb
	// Two locations, one sample packed (locations 1 then 2), one unpacked (location 2 only),
	// and fields the decoder must skip (string table, a fixed64, period).
	prof.msg(6, []byte("cpu"))
	for _, loc := range []struct{ id, addr uint64 }{{1, 0x401000}, {2, 0x402000}} {
		var l pb
		l.u(1, loc.id)
		l.u(2, 1)
		l.u(3, loc.addr)
		prof.msg(4, l.b)
	}
	var s1, ids, vals pb
	ids.varint(1)
	ids.varint(2)
	vals.varint(3)
	vals.varint(30000)
	s1.msg(1, ids.b)
	s1.msg(2, vals.b)
	prof.msg(2, s1.b)
	var s2 pb
	s2.u(1, 2)
	s2.u(2, 5)
	s2.u(2, 50000)
	prof.msg(2, s2.b)
	prof.b = append(prof.b, 0x61, 1, 2, 3, 4, 5, 6, 7, 8) // field 12, fixed64
	prof.u(12, 10000)
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	w.Write(prof.b)
	w.Close()
	for _, data := range [][]byte{prof.b, gz.Bytes()} {
		stacks, total, err := ProfileStacks(data)
		if err != nil {
			t.Fatal(err)
		}
		got := fmt.Sprint(stacks)
		want := "[{[4198400 4202496] 3} {[4202496] 5}]"
		if total != 8 || got != want {
			t.Fatalf("got %s total %d, want %s total 8", got, total, want)
		}
	}
	if _, _, err := ProfileStacks(prof.b[:len(prof.b)-1]); err == nil {
		t.Fatal("a truncated profile must be an error")
	}
	var bad pb
	var s3 pb
	s3.u(1, 9)
	s3.u(2, 1)
	bad.msg(2, s3.b)
	if _, _, err := ProfileStacks(bad.b); err == nil {
		t.Fatal("a sample naming a missing location must be an error")
	}
}

//go:noinline
func spinFor(d time.Duration) uint64 {
	var x uint64 = 1
	for t := time.Now(); time.Since(t) < d; {
		for i := 0; i < 10000; i++ {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	return x
}

func TestProfileStacksReadsARealProfile(t *testing.T) {
	var buf bytes.Buffer
	if err := pprof.StartCPUProfile(&buf); err != nil {
		t.Skip("profiler busy:", err)
	}
	spinFor(300 * time.Millisecond)
	pprof.StopCPUProfile()
	stacks, total, err := ProfileStacks(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	spin := false
	for _, st := range stacks {
		sum += st.Count
		if runtime.FuncForPC(uintptr(st.PCs[0])) == nil {
			t.Fatalf("leaf %#x is in no function of this binary", st.PCs[0])
		}
		for _, pc := range st.PCs {
			if f := runtime.FuncForPC(uintptr(pc)); f != nil && strings.HasSuffix(f.Name(), ".spinFor") {
				spin = true
			}
		}
	}
	if sum != total || total == 0 {
		t.Fatalf("stacks sum to %d, total %d", sum, total)
	}
	if !spin {
		t.Fatal("no sampled stack passes through spinFor, which took the whole window")
	}
}

func TestServerAnswersAndParses(t *testing.T) {
	key, n, ok := parseRequest([]byte("GET k12 7"))
	if !ok || string(key) != "k12" || n != 7 {
		t.Fatalf("parse: %q %d %v", key, n, ok)
	}
	for _, bad := range []string{"", "PUT k1 2", "GET k1", "GET k1 x", "GET  1"} {
		if _, _, ok := parseRequest([]byte(bad)); ok {
			t.Fatalf("%q parsed", bad)
		}
	}
	tbl := NewTable(100)
	out, _ := handle(tbl, []byte("GET k5 1"), nil, nil)
	if string(out) != "OK k5 35 37\n" {
		t.Fatalf("reply %q", out)
	}
	if replyValue(out) != 37 {
		t.Fatalf("replyValue %d", replyValue(out))
	}
	out, _ = handle(tbl, []byte("GET k500 1"), nil, nil)
	if string(out) != "NO k500\n" {
		t.Fatalf("reply %q", out)
	}
	n2, _, err := RunServer(2, 10*time.Millisecond, 100*time.Millisecond, nil, nil)
	if err != nil || n2 == 0 {
		t.Fatalf("server: %d requests, %v", n2, err)
	}
}
