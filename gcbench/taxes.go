package main

import (
	"runtime"
	"runtime/debug"
	"sort"
	"time"
)

// ---- bounds checks -------------------------------------------------------------------
//
// The same source is built twice, once plainly and once with -gcflags=-B (no bounds
// checks in package main); costlab runs both and divides. The kernel indexes two tables
// with data-dependent indices the compiler cannot prove in range, so every access keeps
// its check in the plain build.

const (
	boundsTable  = 4096
	boundsIdx    = 1 << 16
	boundsRounds = 200
)

//go:noinline
func boundsKernel(tbl, out []uint32, idx []int32, rounds int) uint32 {
	var acc uint32
	for r := 0; r < rounds; r++ {
		for i := 0; i < len(idx); i++ {
			k := int(idx[i])
			v := tbl[k] ^ uint32(i)
			out[k] += v
			acc += out[(k+r)&(boundsTable-1)]
		}
	}
	return acc
}

// BoundsSamples times the kernel `reps` times and returns ns (thread CPU time) per inner
// iteration.
func BoundsSamples(reps int) ([]float64, uint32) {
	tbl := make([]uint32, boundsTable)
	out := make([]uint32, boundsTable)
	idx := make([]int32, boundsIdx)
	r := newRand(3)
	for i := range tbl {
		tbl[i] = uint32(r.next())
	}
	for i := range idx {
		idx[i] = int32(r.next() % boundsTable)
	}
	var sink uint32
	samples := make([]float64, 0, reps)
	onOwnThread(func() {
		sink += boundsKernel(tbl, out, idx, boundsRounds/4) // warm-up
		for s := 0; s < reps; s++ {
			t := threadCPUNanos()
			sink += boundsKernel(tbl, out, idx, boundsRounds)
			samples = append(samples, float64(threadCPUNanos()-t)/float64(boundsRounds*boundsIdx))
		}
	})
	return samples, sink
}

// ---- stack-check prologue ------------------------------------------------------------
//
// A Go function that calls others starts with a check that its stack has room (compare SP
// with the goroutine's stack guard, branch to morestack). //go:nosplit removes it. The two
// callers below are the same code but for that line; the leaf they call is small enough
// that the compiler drops its check in both cases, so the difference is one prologue per
// call to the caller.

//go:noinline
func leaf(x uint64) uint64 { return x*0x9e3779b97f4a7c15 + 1 }

// Two pairs, declared in opposite orders: where a function lands in the binary (its
// alignment against fetch blocks and branch predictors) can move a call by more than a
// prologue costs, so each side is the mean of one early and one late copy.

//go:noinline
func callerChecked(x uint64) uint64 { return leaf(x) ^ leaf(x>>7) }

//go:noinline
//go:nosplit
func callerNosplit(x uint64) uint64 { return leaf(x) ^ leaf(x>>7) }

//go:noinline
//go:nosplit
func callerNosplit2(x uint64) uint64 { return leaf(x) ^ leaf(x>>7) }

//go:noinline
func callerChecked2(x uint64) uint64 { return leaf(x) ^ leaf(x>>7) }

const prologueCalls = 10_000_000

func callLoop(f func(uint64) uint64, n int) uint64 {
	var acc uint64
	for i := 0; i < n; i++ {
		acc = f(acc + uint64(i))
	}
	return acc
}

// PrologueSamples alternates the two variants `reps` times; ns (thread CPU time) per call
// to the caller, each the mean over the two copies of that variant.
// checked1 and checked2 are the two checked copies on their own: the same code in two
// places, the A/A pair that shows how far layout alone moves a call.
func PrologueSamples(reps int) (checked, nosplit, checked1, checked2 []float64, sink uint64) {
	onOwnThread(func() {
		timed := func(f func(uint64) uint64) float64 {
			t := threadCPUNanos()
			sink += callLoop(f, prologueCalls)
			return float64(threadCPUNanos()-t) / prologueCalls
		}
		for _, f := range []func(uint64) uint64{callerChecked, callerNosplit, callerChecked2, callerNosplit2} {
			sink += callLoop(f, prologueCalls/10)
		}
		// Alternate which variant goes first, so neither always follows the other.
		for s := 0; s < reps; s++ {
			var c1, c2 float64
			if s%2 == 0 {
				c1, c2 = timed(callerChecked), timed(callerChecked2)
				nosplit = append(nosplit, (timed(callerNosplit)+timed(callerNosplit2))/2)
			} else {
				nosplit = append(nosplit, (timed(callerNosplit2)+timed(callerNosplit))/2)
				c2, c1 = timed(callerChecked2), timed(callerChecked)
			}
			checked = append(checked, (c1+c2)/2)
			checked1 = append(checked1, c1)
			checked2 = append(checked2, c2)
		}
	})
	return checked, nosplit, checked1, checked2, sink
}

// ---- write barrier -------------------------------------------------------------------
//
// While the collector marks, every pointer store into the heap goes through the write
// barrier (both old and new pointers are recorded for the marker); otherwise the store
// only tests the barrier flag. Automatic GC is turned off, so the only cycle is one we
// start with runtime.GC(); the barrier is on exactly between the end of that cycle's
// first stop-the-world pause (sweep termination enables it) and its second (mark
// termination disables it). The runtime counts GC pauses as they end
// (/sched/pauses/total/gc:seconds), so a chunk of stores counts as "marking" when that
// count reads one past the cycle's start both before and after the chunk, and as "not
// marking" when no cycle runs at all. Integer stores into the same objects are timed the
// same way as a control: they pay the marker's cache and memory traffic but no barrier.

const (
	wbTargets = 4096
	wbChunk   = 1 << 16
)

type wbState struct {
	objs []*Vnode
	idx  []uint32
}

//go:noinline
func storePointers(s *wbState, base int) {
	objs, idx := s.objs, s.idx
	for i := 0; i < wbChunk; i++ {
		j := idx[(base+i)&(len(idx)-1)]
		objs[j&(wbTargets-1)].Peer = objs[(j>>12)&(wbTargets-1)]
	}
}

//go:noinline
func storeInts(s *wbState, base int) {
	objs, idx := s.objs, s.idx
	for i := 0; i < wbChunk; i++ {
		j := idx[(base+i)&(len(idx)-1)]
		objs[j&(wbTargets-1)].Size = int64(j >> 12)
	}
}

// WBResult is, per GC cycle, the median ns per store of each kind, marking or not.
type WBResult struct {
	PtrMarking, PtrIdle, IntMarking, IntIdle []float64
	MarkingChunks                            []int
	MarkSeconds                              []float64
}

// timeChunk is the thread CPU time per store of one chunk (see threadCPUNanos: a chunk
// during which the marker took our P, or the kernel our CPU, is not charged that time).
func timeChunk(f func(*wbState, int), s *wbState, base int) float64 {
	t := threadCPUNanos()
	f(s, base)
	return float64(threadCPUNanos()-t) / wbChunk
}

func medianOf(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	c := append([]float64(nil), v...)
	sort.Float64s(c)
	if len(c)%2 == 1 {
		return c[len(c)/2]
	}
	return (c[len(c)/2-1] + c[len(c)/2]) / 2
}

// WriteBarrierSamples runs `cycles` forced GC cycles over heap h and times stores while
// each marks and, just before, while nothing does.
func WriteBarrierSamples(h *Heap, cycles int) WBResult {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	old := debug.SetGCPercent(-1)
	defer debug.SetGCPercent(old)
	runtime.GC() // finish any cycle the build started; from here nothing runs unasked

	s := &wbState{objs: make([]*Vnode, wbTargets), idx: make([]uint32, 1<<16)}
	r := newRand(11)
	for i := range s.objs {
		s.objs[i] = h.Lookup(r.next()%uint64(h.N) + 1)
	}
	for i := range s.idx {
		s.idx[i] = uint32(r.next())
	}
	var res WBResult
	base := 0
	for c := 0; c < cycles; c++ {
		var pi, ii []float64
		start := GCPauseCount()
		for k := 0; k < 64; k++ {
			pi = append(pi, timeChunk(storePointers, s, base))
			ii = append(ii, timeChunk(storeInts, s, base))
			base += wbChunk
		}
		if GCPauseCount() != start {
			continue // something collected after all; this cycle's baseline is void
		}
		var pm, im []float64
		done := make(chan struct{})
		t0 := time.Now()
		go func() { runtime.GC(); close(done) }()
		marking := start + 1
	loop:
		for k := 0; ; k++ {
			select {
			case <-done:
				break loop
			default:
			}
			f, into := storePointers, &pm
			if k%2 == 1 {
				f, into = storeInts, &im
			}
			before := GCPauseCount()
			ns := timeChunk(f, s, base)
			base += wbChunk
			if before == marking && GCPauseCount() == marking {
				*into = append(*into, ns)
			}
		}
		res.MarkSeconds = append(res.MarkSeconds, time.Since(t0).Seconds())
		if len(pm) == 0 || len(im) == 0 {
			continue
		}
		res.PtrIdle = append(res.PtrIdle, medianOf(pi))
		res.IntIdle = append(res.IntIdle, medianOf(ii))
		res.PtrMarking = append(res.PtrMarking, medianOf(pm))
		res.IntMarking = append(res.IntMarking, medianOf(im))
		res.MarkingChunks = append(res.MarkingChunks, len(pm)+len(im))
	}
	return res
}
