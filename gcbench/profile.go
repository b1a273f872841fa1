package main

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"syscall"
	"time"
)

// ---- the tax by attribution ------------------------------------------------------------
//
// Mode profile runs a workload under runtime/pprof's CPU profiler and prints, per leaf PC,
// how many samples fell there; costlab classifies each PC against this binary's own
// disassembly (`go tool objdump`). The profiler is a per-thread CPU-time timer (SIGPROF);
// the rate is raised with runtime.SetCPUProfileRate before the profile starts (pprof then
// prints a harmless "cannot set cpu profile rate" warning on stderr and keeps our rate).
// The kernel checks CPU-time timers at its tick, so above HZ per thread the rate asked
// is not the rate got: the output carries both.

// ProfileResult is what mode profile prints.
type ProfileResult struct {
	Mode     string `json:"mode"`
	Workload string `json:"workload"`
	HzAsked  int    `json:"hz_asked"`
	Samples  int64  `json:"samples"`
	// Leaves is [pc, samples, samples under a GC entry point] per leaf PC.
	Leaves     [][3]uint64 `json:"leaves"`
	WallS      float64     `json:"wall_s"`
	CPUS       float64     `json:"cpu_s"`
	Ops        int64       `json:"ops"`
	GCCPUShare float64     `json:"gc_cpu_share"`
	GCCycles   uint64      `json:"gc_cycles"`
	LiveBytes  uint64      `json:"live_bytes"`
	GOMAXPROCS int         `json:"gomaxprocs"`
	GoVersion  string      `json:"go_version"`
	Checksum   uint64      `json:"checksum"`
}

func processCPU() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// runProfile runs `workload` for d under the profiler.
func runProfile(workload string, live uint64, d time.Duration, hz int, workers int) (ProfileResult, error) {
	res := ProfileResult{Mode: "profile", Workload: workload, HzAsked: hz,
		GOMAXPROCS: runtime.GOMAXPROCS(0), GoVersion: runtime.Version()}
	var h *Heap
	switch workload {
	case "heap":
		h = BuildHeap(CountForLive(live), 1)
	case "server":
	default:
		return res, fmt.Errorf("unknown workload %q: use heap or server", workload)
	}
	runtime.GC()
	a := ReadSnapshot()
	res.LiveBytes = a.HeapLive
	var buf bytes.Buffer
	runtime.SetCPUProfileRate(hz)
	if err := pprof.StartCPUProfile(&buf); err != nil {
		return res, err
	}
	cpu0, t0 := processCPU(), time.Now()
	switch workload {
	case "heap":
		// Chunks of calls until the time is up: about 10 ms of work per chunk per worker.
		const chunk = 20000
		for time.Since(t0) < d {
			res.Checksum ^= RunWork(h, int64(chunk*workers), workers)
			res.Ops += int64(chunk * workers)
		}
	case "server":
		n, sum, err := RunServer(2*workers, d)
		if err != nil {
			pprof.StopCPUProfile()
			return res, err
		}
		res.Ops, res.Checksum = n, sum
	}
	res.WallS = time.Since(t0).Seconds()
	res.CPUS = processCPU() - cpu0
	pprof.StopCPUProfile()
	runtime.KeepAlive(h)
	// A forced cycle ends the window, so the runtime's /cpu/classes estimates are current.
	runtime.GC()
	b := ReadSnapshot()
	res.GCCPUShare = GCShare(a, b)
	res.GCCycles = b.Cycles - a.Cycles - 1
	leaves, total, err := ProfileLeaves(buf.Bytes(), isGCEntry)
	if err != nil {
		return res, err
	}
	res.Samples = total
	res.Leaves = make([][3]uint64, len(leaves))
	for i, l := range leaves {
		res.Leaves[i] = [3]uint64{l.PC, uint64(l.Count), uint64(l.UnderGC)}
	}
	return res, nil
}

func profileMain(workload string, live uint64, seconds float64, hz, workers int) any {
	res, err := runProfile(workload, live, time.Duration(seconds*float64(time.Second)), hz, workers)
	if err != nil {
		fmt.Fprintf(os.Stderr, "gcbench: profile %s: %v\n", workload, err)
		os.Exit(1)
	}
	return res
}

// gcEntries are the runtime functions from which the collector's own work runs: the
// background mark workers, the mutator's mark assists, and sweeping (background, and the
// proportional sweep an allocation does). A sample with one of them on its stack is GC
// work whatever its leaf (memclr, spanOf, a map of the heap's bits).
var gcEntries = map[string]bool{
	"runtime.gcBgMarkWorker": true, "runtime.gcAssistAlloc": true, "runtime.gcAssistAlloc1": true,
	"runtime.bgsweep": true, "runtime.sweepone": true, "runtime.deductSweepCredit": true,
	"runtime.gcMarkDone": true, "runtime.gcMarkTermination": true, "runtime.gcStart": true,
	"runtime.markroot": true, "runtime.gcDrain": true, "runtime.gcDrainN": true,
}

var gcEntryCache = map[uint64]bool{}

// isGCEntry says whether pc lies in one of gcEntries. pprof locations of callers are return
// addresses, so pc-1 is looked up (it is inside the call instruction).
func isGCEntry(pc uint64) bool {
	if v, ok := gcEntryCache[pc]; ok {
		return v
	}
	v := false
	if pc > 0 {
		if f := runtime.FuncForPC(uintptr(pc - 1)); f != nil {
			v = gcEntries[f.Name()]
		}
	}
	gcEntryCache[pc] = v
	return v
}
