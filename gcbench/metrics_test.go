package main

import (
	"bufio"
	"math"
	"runtime"
	"strings"
	"testing"
)

func TestSnapshotAcrossAForcedCycle(t *testing.T) {
	runtime.GC()
	a := ReadSnapshot()
	runtime.GC()
	b := ReadSnapshot()
	if b.Cycles-a.Cycles < 1 {
		t.Fatalf("cycles %d -> %d across runtime.GC", a.Cycles, b.Cycles)
	}
	if b.PauseCount()-a.PauseCount() < 2 {
		t.Fatalf("pauses %d -> %d: a cycle has two", a.PauseCount(), b.PauseCount())
	}
	if GCPauseCount() != b.PauseCount() {
		t.Fatal("GCPauseCount disagrees with the snapshot")
	}
	if p := MaxPause(a, b); p <= 0 || p > 10 {
		t.Fatalf("max pause %v s", p)
	}
	if s := GCShare(a, b); math.IsNaN(s) || s < 0 || s > 1 {
		t.Fatalf("gc share %v", s)
	}
	if b.CPUTotal < b.GCTotal || b.GCTotal < b.GCIdle {
		t.Fatalf("cpu classes do not nest: %+v", b)
	}
}

func TestShareArithmetic(t *testing.T) {
	a := Snapshot{CPUTotal: 10, CPUIdle: 2, GCTotal: 1, GCIdle: 0}
	b := Snapshot{CPUTotal: 30, CPUIdle: 4, GCTotal: 7, GCIdle: 2}
	// busy = 20 - 2 = 18; gc = 6
	if got := GCShare(a, b); math.Abs(got-6.0/18) > 1e-12 {
		t.Fatalf("share %v", got)
	}
	// without idle mark: (6 - 2) / (18 - 2)
	if got := GCShareBusy(a, b); math.Abs(got-4.0/16) > 1e-12 {
		t.Fatalf("busy share %v", got)
	}
	if GCShare(a, a) != 0 {
		t.Fatal("an empty window must give 0")
	}
}

func TestMaxPauseTakesHighestGrownBucket(t *testing.T) {
	buckets := []float64{0, 1e-6, 1e-5, 1e-4, math.Inf(1)}
	a := Snapshot{PauseCounts: []uint64{0, 3, 1, 0}, PauseBuckets: buckets}
	b := Snapshot{PauseCounts: []uint64{0, 5, 2, 0}, PauseBuckets: buckets}
	if got := MaxPause(a, b); got != 1e-4 {
		t.Fatalf("max pause %v, want the upper edge 1e-4", got)
	}
	b.PauseCounts[3] = 1
	if got := MaxPause(a, b); got != 1e-4 {
		t.Fatalf("open-ended bucket: %v, want its lower edge", got)
	}
	if MaxPause(a, a) != 0 {
		t.Fatal("no pause must give 0")
	}
}

func TestParseVmHWM(t *testing.T) {
	text := "Name:\tgcbench\nVmPeak:\t  200 kB\nVmHWM:\t  123456 kB\nVmRSS:\t 1000 kB\n"
	if got := parseVmHWM(bufio.NewScanner(strings.NewReader(text))); got != 123456*1024 {
		t.Fatalf("VmHWM %d", got)
	}
	if parseVmHWM(bufio.NewScanner(strings.NewReader("VmRSS: 1 kB\n"))) != 0 {
		t.Fatal("missing VmHWM must give 0")
	}
	if PeakRSS() == 0 {
		t.Fatal("no VmHWM in /proc/self/status")
	}
}

func TestTaxKernelsRun(t *testing.T) {
	s, _ := BoundsSamples(1)
	c, n, c1, c2, _ := PrologueSamples(1)
	if len(s) != 1 || len(c) != 1 || len(n) != 1 || s[0] <= 0 || c[0] <= 0 || n[0] <= 0 {
		t.Fatalf("bounds %v checked %v nosplit %v", s, c, n)
	}
	if len(c1) != 1 || len(c2) != 1 || c[0] != (c1[0]+c2[0])/2 {
		t.Fatalf("checked %v is not the mean of its copies %v %v", c, c1, c2)
	}
	if !boundsChecked() {
		t.Fatal("a plain build must check bounds")
	}
}

func TestWriteBarrierSeesMarking(t *testing.T) {
	h := BuildHeap(CountForLive(32<<20), 1)
	res := WriteBarrierSamples(h, 2)
	runtime.KeepAlive(h)
	if len(res.PtrMarking) == 0 {
		t.Skipf("no chunk fell inside a mark phase (marks took %v s)", res.MarkSeconds)
	}
	if len(res.PtrMarking) != len(res.PtrIdle) || len(res.IntMarking) != len(res.IntIdle) {
		t.Fatalf("unpaired samples: %+v", res)
	}
}
