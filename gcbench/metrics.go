package main

import (
	"bufio"
	"math"
	"os"
	"runtime/metrics"
	"strconv"
	"strings"
)

// The runtime/metrics names read. The /cpu/classes figures are estimates the runtime
// accumulates at the end of each GC cycle, not live counters, so a window must run from one
// cycle's end to another's to be exact (see Window).
const (
	mCPUTotal  = "/cpu/classes/total:cpu-seconds"
	mCPUIdle   = "/cpu/classes/idle:cpu-seconds"
	mGCTotal   = "/cpu/classes/gc/total:cpu-seconds"
	mGCIdle    = "/cpu/classes/gc/mark/idle:cpu-seconds"
	mCycles    = "/gc/cycles/total:gc-cycles"
	mPauses    = "/sched/pauses/total/gc:seconds"
	mHeapLive  = "/gc/heap/live:bytes"
	mAllocated = "/gc/heap/allocs:bytes"
)

// Snapshot is one reading of the runtime's GC figures.
type Snapshot struct {
	CPUTotal, CPUIdle, GCTotal, GCIdle float64
	Cycles                             uint64
	HeapLive, Allocated                uint64
	PauseCounts                        []uint64
	PauseBuckets                       []float64
}

var names = []string{mCPUTotal, mCPUIdle, mGCTotal, mGCIdle, mCycles, mPauses, mHeapLive, mAllocated}

// ReadSnapshot reads every figure in one metrics.Read call.
func ReadSnapshot() Snapshot {
	s := make([]metrics.Sample, len(names))
	for i, n := range names {
		s[i].Name = n
	}
	metrics.Read(s)
	var out Snapshot
	for _, m := range s {
		switch m.Name {
		case mCPUTotal:
			out.CPUTotal = floatOf(m)
		case mCPUIdle:
			out.CPUIdle = floatOf(m)
		case mGCTotal:
			out.GCTotal = floatOf(m)
		case mGCIdle:
			out.GCIdle = floatOf(m)
		case mCycles:
			out.Cycles = uintOf(m)
		case mHeapLive:
			out.HeapLive = uintOf(m)
		case mAllocated:
			out.Allocated = uintOf(m)
		case mPauses:
			if m.Value.Kind() == metrics.KindFloat64Histogram {
				h := m.Value.Float64Histogram()
				out.PauseCounts = append([]uint64(nil), h.Counts...)
				out.PauseBuckets = append([]float64(nil), h.Buckets...)
			}
		}
	}
	return out
}

func floatOf(m metrics.Sample) float64 {
	if m.Value.Kind() == metrics.KindFloat64 {
		return m.Value.Float64()
	}
	return math.NaN()
}

func uintOf(m metrics.Sample) uint64 {
	if m.Value.Kind() == metrics.KindUint64 {
		return m.Value.Uint64()
	}
	return 0
}

// PauseCount is how many GC stop-the-world pauses have ended: two per cycle (sweep
// termination, which turns the write barrier on, and mark termination, which turns it off).
func (s Snapshot) PauseCount() uint64 {
	var c uint64
	for _, x := range s.PauseCounts {
		c += x
	}
	return c
}

// GCShare is the GC's share of the CPU time the process used between two snapshots:
// GC time (assists, dedicated, fractional and idle mark workers, pauses) over all time
// minus the time Ps sat idle. Idle mark workers are counted as GC: on a machine whose
// cores are all busy (the paper's servers) that work would fall to the other workers and
// the mutator's assists. GCShareBusy leaves them out of both sides.
func GCShare(a, b Snapshot) float64 {
	busy := (b.CPUTotal - a.CPUTotal) - (b.CPUIdle - a.CPUIdle)
	if busy <= 0 {
		return 0
	}
	return (b.GCTotal - a.GCTotal) / busy
}

// GCShareBusy is the GC share without idle mark workers: the CPU the GC took from work the
// program would otherwise have done.
func GCShareBusy(a, b Snapshot) float64 {
	idleMark := b.GCIdle - a.GCIdle
	busy := (b.CPUTotal - a.CPUTotal) - (b.CPUIdle - a.CPUIdle) - idleMark
	if busy <= 0 {
		return 0
	}
	return (b.GCTotal - a.GCTotal - idleMark) / busy
}

// MaxPause is the longest GC pause that ended between two snapshots, in seconds: the upper
// edge of the highest histogram bucket whose count grew (the runtime's buckets are a few
// per cent wide). Zero when no pause ended; the lower edge when the bucket is open-ended.
func MaxPause(a, b Snapshot) float64 {
	for i := len(b.PauseCounts) - 1; i >= 0; i-- {
		var before uint64
		if i < len(a.PauseCounts) {
			before = a.PauseCounts[i]
		}
		if b.PauseCounts[i] > before {
			hi := b.PauseBuckets[i+1]
			if math.IsInf(hi, 1) {
				return b.PauseBuckets[i]
			}
			return hi
		}
	}
	return 0
}

// PeakRSS is the process's high-water resident set (VmHWM) in bytes, or 0 if unknown.
func PeakRSS() uint64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	return parseVmHWM(bufio.NewScanner(f))
}

func parseVmHWM(sc *bufio.Scanner) uint64 {
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "VmHWM:") {
			continue
		}
		f := strings.Fields(strings.TrimPrefix(line, "VmHWM:"))
		if len(f) == 0 {
			return 0
		}
		kb, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return 0
		}
		return kb * 1024
	}
	return 0
}

// MemAvailable is the kernel's estimate of memory available to a new program, in bytes,
// or 0 if unknown.
func MemAvailable() uint64 {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "MemAvailable:") {
			f := strings.Fields(strings.TrimPrefix(line, "MemAvailable:"))
			if len(f) > 0 {
				if kb, err := strconv.ParseUint(f[0], 10, 64); err == nil {
					return kb * 1024
				}
			}
		}
	}
	return 0
}

// GCPauseCount reads only the pause histogram's total count: cheap enough to call around
// every sub-millisecond chunk of work.
func GCPauseCount() uint64 {
	s := []metrics.Sample{{Name: mPauses}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64Histogram {
		return 0
	}
	var c uint64
	for _, x := range s[0].Value.Float64Histogram().Counts {
		c += x
	}
	return c
}
