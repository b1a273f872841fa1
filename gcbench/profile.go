package main

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// ---- the tax by attribution ------------------------------------------------------------
//
// Mode profile runs a workload under a CPU sampler and reports what it sampled; costlab
// classifies each sample against this binary's own disassembly (`go tool objdump`).
//
// Two samplers:
//   - perf (preferred): costlab runs this program under `perf record -e cpu-clock -F hz
//     --control fifo:CTL,ACK -D -1`, events off; this program turns them on (writes "enable"
//     to CTL, waits for "ack" on ACK) after the warm-up and off when the window ends, so the
//     heap build and the warm-up are never sampled. The samples are in perf's file.
//   - pprof (fallback, where perf is missing or not allowed): runtime/pprof's per-thread
//     CPU-time timer (SIGPROF), whose rate the kernel caps at its tick (HZ per thread);
//     the stacks are printed here.
// Either way the window is the same: warm-up, then `seconds` of the workload sampled.

// ProfileResult is what mode profile prints.
type ProfileResult struct {
	Mode     string `json:"mode"`
	Workload string `json:"workload"`
	Sampler  string `json:"sampler"`
	HzAsked  int    `json:"hz_asked"`
	// Samples and Stacks are pprof's: [count, leaf pc, caller pcs...] per distinct stack.
	Samples int64      `json:"samples"`
	Stacks  [][]uint64 `json:"stacks"`
	WarmupS float64    `json:"warmup_s"`
	WallS   float64    `json:"wall_s"`
	CPUS    float64    `json:"cpu_s"`
	// CPUUserS and CPUSysS split cpu_s by mode (getrusage): the kernel's part is what a
	// sampler that sees it should find in kernel mode.
	CPUUserS float64 `json:"cpu_user_s"`
	CPUSysS  float64 `json:"cpu_sys_s"`
	Ops      int64   `json:"ops"`
	// OpsTotal counts every op of the run, the warm-up's too: the work a whole-run measure
	// (costlab price --verify --work) divides by.
	OpsTotal   int64   `json:"ops_total"`
	GCCPUShare float64 `json:"gc_cpu_share"`
	GCCycles   uint64  `json:"gc_cycles"`
	LiveBytes  uint64  `json:"live_bytes"`
	GOMAXPROCS int     `json:"gomaxprocs"`
	GoVersion  string  `json:"go_version"`
	Checksum   uint64  `json:"checksum"`
}

// processCPU is the CPU time this process has used so far in user and in kernel mode, in
// seconds.
func processCPU() (user, sys float64) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0, 0
	}
	return float64(ru.Utime.Nano()) / 1e9, float64(ru.Stime.Nano()) / 1e9
}

// sampler turns CPU sampling on and off around the measured window.
type sampler interface {
	start() error
	stop() error
}

type pprofSampler struct {
	hz  int
	buf bytes.Buffer
}

func (p *pprofSampler) start() error {
	// Raising the rate first makes StartCPUProfile print a harmless "cannot set cpu
	// profile rate" warning on stderr and keep ours.
	runtime.SetCPUProfileRate(p.hz)
	return pprof.StartCPUProfile(&p.buf)
}

func (p *pprofSampler) stop() error {
	pprof.StopCPUProfile()
	return nil
}

// perfSampler drives `perf record --control fifo:CTL,ACK`.
type perfSampler struct {
	ctl, ack *os.File
}

func openPerfControl(ctlPath, ackPath string) (*perfSampler, error) {
	// perf holds both fifos open read-write, so neither open blocks.
	ctl, err := os.OpenFile(ctlPath, os.O_WRONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("perf control fifo: %w", err)
	}
	ack, err := os.OpenFile(ackPath, os.O_RDONLY, 0)
	if err != nil {
		ctl.Close()
		return nil, fmt.Errorf("perf ack fifo: %w", err)
	}
	return &perfSampler{ctl: ctl, ack: ack}, nil
}

// command sends one control command and waits for perf's "ack".
func (p *perfSampler) command(cmd string) error {
	if _, err := p.ctl.WriteString(cmd + "\n"); err != nil {
		return fmt.Errorf("perf %s: %w", cmd, err)
	}
	// A fifo is pollable, so the deadline holds: a perf that never answers is an error,
	// not a hang.
	_ = p.ack.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 16)
	n, err := p.ack.Read(buf)
	if err != nil {
		return fmt.Errorf("perf %s: no ack: %w", cmd, err)
	}
	if !strings.HasPrefix(string(buf[:n]), "ack") {
		return fmt.Errorf("perf %s: answered %q", cmd, buf[:n])
	}
	return nil
}

func (p *perfSampler) start() error { return p.command("enable") }
func (p *perfSampler) stop() error  { return p.command("disable") }

// profileOpts is what mode profile is asked.
type profileOpts struct {
	workload       string
	live           uint64
	warmup, window time.Duration
	hz, workers    int
	sampler        string // "pprof" or "perf"
	perfCtl        string
	perfAck        string
}

// cycleLimit bounds the wait for a GC cycle to end (a workload that allocates too little
// for a cycle in that time is sampled over a window of plain time).
const cycleLimit = 5 * time.Second

// untilCycleEnds calls step until the runtime completes a GC cycle (or cycleLimit passes).
// The sampled window runs from one cycle's end to another's: a window of whole cycles,
// so where the window falls in the collector's rhythm (marking, sweeping, neither) does
// not move the GC share from one process to the next.
func untilCycleEnds(step func()) {
	s := []metrics.Sample{{Name: mCycles}}
	metrics.Read(s)
	c0 := s[0].Value.Uint64()
	for t := time.Now(); time.Since(t) < cycleLimit; {
		step()
		metrics.Read(s)
		if s[0].Value.Uint64() != c0 {
			return
		}
	}
}

// runProfile builds the workload, runs it for the warm-up unsampled, then for the window
// sampled: from the first GC cycle end after the warm-up to the first after `window`.
func runProfile(o profileOpts) (ProfileResult, error) {
	res := ProfileResult{Mode: "profile", Workload: o.workload, Sampler: o.sampler, HzAsked: o.hz,
		WarmupS: o.warmup.Seconds(), GOMAXPROCS: runtime.GOMAXPROCS(0), GoVersion: runtime.Version()}
	var s sampler
	var pp *pprofSampler
	switch o.sampler {
	case "pprof":
		pp = &pprofSampler{hz: o.hz}
		s = pp
	case "perf":
		ps, err := openPerfControl(o.perfCtl, o.perfAck)
		if err != nil {
			return res, err
		}
		s = ps
	default:
		return res, fmt.Errorf("unknown sampler %q: use pprof or perf", o.sampler)
	}
	var h *Heap
	switch o.workload {
	case "heap":
		h = BuildHeap(CountForLive(o.live), 1)
	case "server":
	default:
		return res, fmt.Errorf("unknown workload %q: use heap or server", o.workload)
	}
	runtime.GC()
	a := ReadSnapshot()
	res.LiveBytes = a.HeapLive
	var user0, sys0 float64
	var t0 time.Time
	var startErr error
	begin := func() {
		startErr = s.start()
		user0, sys0 = processCPU()
		t0 = time.Now()
	}
	end := func() {
		res.WallS = time.Since(t0).Seconds()
		user, sys := processCPU()
		res.CPUUserS, res.CPUSysS = user-user0, sys-sys0
		res.CPUS = res.CPUUserS + res.CPUSysS
	}
	switch o.workload {
	case "heap":
		// Chunks of calls: about 10 ms of work per chunk per worker.
		const chunk = 20000
		work := func() {
			res.Checksum ^= RunWork(h, int64(chunk*o.workers), o.workers)
			res.OpsTotal += int64(chunk * o.workers)
		}
		w0 := time.Now()
		for time.Since(w0) < o.warmup {
			work()
		}
		untilCycleEnds(work)
		begin()
		for startErr == nil && time.Since(t0) < o.window {
			work()
			res.Ops += int64(chunk * o.workers)
		}
		if startErr == nil {
			untilCycleEnds(func() {
				work()
				res.Ops += int64(chunk * o.workers)
			})
		}
		end()
	case "server":
		// Ops are the requests answered inside the window only, so CPU per request compares
		// builds (the A/B cross-check) without the warm-up in it.
		idle := func() { time.Sleep(time.Millisecond) }
		var ops0 int64
		_, sum, err := RunServer(2*o.workers, o.warmup, o.window,
			func(n *atomic.Int64) { untilCycleEnds(idle); begin(); ops0 = n.Load() },
			func(n *atomic.Int64) { untilCycleEnds(idle); end(); res.Ops = n.Load() - ops0 })
		if err != nil {
			s.stop()
			return res, err
		}
		res.Checksum = sum
	}
	if startErr != nil {
		return res, startErr
	}
	if err := s.stop(); err != nil {
		return res, err
	}
	runtime.KeepAlive(h)
	// A forced cycle ends the window, so the runtime's /cpu/classes estimates are current.
	runtime.GC()
	b := ReadSnapshot()
	res.GCCPUShare = GCShare(a, b)
	res.GCCycles = b.Cycles - a.Cycles - 1
	if pp != nil {
		stacks, total, err := ProfileStacks(pp.buf.Bytes())
		if err != nil {
			return res, err
		}
		res.Samples = total
		res.Stacks = make([][]uint64, len(stacks))
		for i, st := range stacks {
			res.Stacks[i] = append([]uint64{uint64(st.Count)}, st.PCs...)
		}
	}
	return res, nil
}

func profileMain(o profileOpts) any {
	res, err := runProfile(o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "gcbench: profile %s: %v\n", o.workload, err)
		os.Exit(1)
	}
	return res
}
