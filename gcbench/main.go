// Command gcbench is the Go side of costlab's gc lab. It builds a live heap of vnode-like
// objects, runs allocation-heavy work over it and prints one JSON object of what the
// garbage collector cost (mode heap); or it times one of the language-safety taxes
// (bounds, prologue, write-barrier). costlab sets GOGC / GOMEMLIMIT per run and builds
// the bounds kernel twice. Standard library only.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"time"
)

// defaultLive is the Biscuit evaluation's live heap (about 2 million vnodes).
const defaultLive = 640 << 20

func main() {
	live := flag.Uint64("live", 0, "live heap to build, bytes (default 640 MiB, less when memory is short)")
	allocFactor := flag.Float64("alloc", 12, "work: bytes to allocate, as a multiple of the live heap")
	workers := flag.Int("workers", 0, "work: goroutines doing calls (default GOMAXPROCS)")
	reps := flag.Int("reps", 7, "taxes: timed samples (write-barrier: GC cycles)")
	seconds := flag.Float64("seconds", 10, "profile: how long the workload runs under the profiler")
	hz := flag.Int("hz", 1000, "profile: CPU sampling rate asked (samples per CPU-second)")
	warmup := flag.Float64("warmup", 1, "profile: seconds the workload runs before sampling starts")
	samplerName := flag.String("sampler", "pprof", "profile: pprof (runtime/pprof) or perf (under perf record --control)")
	perfCtl := flag.String("perf-ctl", "", "profile, sampler perf: perf's control fifo")
	perfAck := flag.String("perf-ack", "", "profile, sampler perf: perf's ack fifo")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: gcbench [flags] heap|bounds|prologue|write-barrier|profile heap|profile server")
		flag.PrintDefaults()
	}
	flag.Parse()
	mode := "heap"
	if flag.NArg() > 0 {
		mode = flag.Arg(0)
	}
	if *workers <= 0 {
		*workers = runtime.GOMAXPROCS(0)
	}
	if *reps < 1 {
		*reps = 1
	}
	var out any
	switch mode {
	case "heap":
		out = runHeap(liveOrDefault(*live, 4), *allocFactor, *workers)
	case "bounds":
		samples, sink := BoundsSamples(*reps)
		out = map[string]any{"mode": mode, "ns_per_iter": samples, "bounds_checked": boundsChecked(), "sink": sink}
	case "prologue":
		checked, nosplit, c1, c2, sink := PrologueSamples(*reps)
		out = map[string]any{"mode": mode, "checked_ns": checked, "nosplit_ns": nosplit,
			"checked1_ns": c1, "checked2_ns": c2, "sink": sink}
	case "write-barrier":
		l := liveOrDefault(*live, 2)
		h := BuildHeap(CountForLive(l), 1)
		res := WriteBarrierSamples(h, *reps)
		runtime.KeepAlive(h)
		out = map[string]any{"mode": mode, "live_target": l, "ptr_marking_ns": res.PtrMarking,
			"ptr_idle_ns": res.PtrIdle, "int_marking_ns": res.IntMarking, "int_idle_ns": res.IntIdle,
			"marking_chunks": res.MarkingChunks, "mark_s": res.MarkSeconds}
	case "profile":
		workload := "heap"
		if flag.NArg() > 1 {
			workload = flag.Arg(1)
		}
		out = profileMain(profileOpts{workload: workload, live: liveOrDefault(*live, 4),
			warmup: time.Duration(*warmup * float64(time.Second)), window: time.Duration(*seconds * float64(time.Second)),
			hz: *hz, workers: *workers, sampler: *samplerName, perfCtl: *perfCtl, perfAck: *perfAck})
	default:
		fmt.Fprintf(os.Stderr, "gcbench: unknown mode %q: use heap, bounds, prologue, write-barrier or profile\n", mode)
		os.Exit(2)
	}
	enc := json.NewEncoder(os.Stdout)
	if err := enc.Encode(out); err != nil {
		fmt.Fprintf(os.Stderr, "gcbench: writing JSON: %v\n", err)
		os.Exit(1)
	}
}

// liveOrDefault is the asked live heap, or 640 MiB capped so that `mult` times it fits in
// the memory available now.
func liveOrDefault(asked uint64, mult uint64) uint64 {
	if asked > 0 {
		return asked
	}
	l := uint64(defaultLive)
	if avail := MemAvailable(); avail > 0 && l*mult > avail {
		l = avail / mult
	}
	if l < 1<<20 {
		l = 1 << 20
	}
	return l
}

// HeapResult is what mode heap prints.
type HeapResult struct {
	Mode       string  `json:"mode"`
	GOGC       string  `json:"gogc"`
	GOMEMLIMIT string  `json:"gomemlimit"`
	GOMAXPROCS int     `json:"gomaxprocs"`
	Workers    int     `json:"workers"`
	Vnodes     int     `json:"vnodes"`
	LiveTarget uint64  `json:"live_target"`
	LiveBytes  uint64  `json:"live_bytes"`
	BuildS     float64 `json:"build_s"`
	Ops        int64   `json:"ops"`
	AllocBytes uint64  `json:"alloc_bytes"`
	WallS      float64 `json:"wall_s"`
	// GCCPUShare is GC CPU over busy CPU (idle mark workers included), 0..1, measured
	// from the end of the GC cycle before the work to the end of the last cycle in it.
	GCCPUShare     float64 `json:"gc_cpu_share"`
	GCCPUShareBusy float64 `json:"gc_cpu_share_busy"`
	GCCPUS         float64 `json:"gc_cpu_s"`
	BusyCPUS       float64 `json:"busy_cpu_s"`
	GCCycles       uint64  `json:"gc_cycles"`
	MaxPauseS      float64 `json:"max_pause_s"`
	PeakRSSBytes   uint64  `json:"peak_rss_bytes"`
	Checksum       uint64  `json:"checksum"`
	GoVersion      string  `json:"go_version"`
}

func runHeap(live uint64, allocFactor float64, workers int) HeapResult {
	t := time.Now()
	h := BuildHeap(CountForLive(live), 1)
	runtime.GC() // a cycle end: the start of the measured window
	build := time.Since(t).Seconds()
	a := ReadSnapshot()
	ops := int64(allocFactor * float64(live) / requestBytes)
	if ops < 1 {
		ops = 1
	}
	t = time.Now()
	sum := RunWork(h, ops, workers)
	wall := time.Since(t).Seconds()
	b := ReadSnapshot()
	runtime.KeepAlive(h)
	return HeapResult{
		Mode: "heap", GOGC: os.Getenv("GOGC"), GOMEMLIMIT: os.Getenv("GOMEMLIMIT"),
		GOMAXPROCS: runtime.GOMAXPROCS(0), Workers: workers, Vnodes: h.N,
		LiveTarget: live, LiveBytes: a.HeapLive, BuildS: build,
		Ops: ops, AllocBytes: b.Allocated - a.Allocated, WallS: wall,
		GCCPUShare: GCShare(a, b), GCCPUShareBusy: GCShareBusy(a, b),
		GCCPUS: b.GCTotal - a.GCTotal, BusyCPUS: (b.CPUTotal - a.CPUTotal) - (b.CPUIdle - a.CPUIdle),
		GCCycles: b.Cycles - a.Cycles, MaxPauseS: MaxPause(a, b), PeakRSSBytes: PeakRSS(),
		Checksum: sum, GoVersion: runtime.Version(),
	}
}
