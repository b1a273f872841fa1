package main

import (
	"runtime"
	"testing"
	"unsafe"
)

func TestBuildHeapMakesNVnodesAllReachable(t *testing.T) {
	for _, n := range []int{1, 2, 5, 1000, 12345} {
		h := BuildHeap(n, 7)
		if h.N != n {
			t.Fatalf("n=%d: heap says %d", n, h.N)
		}
		if got := h.Reachable(); got != n {
			t.Fatalf("n=%d: %d vnodes reachable from the root", n, got)
		}
	}
}

func TestTreeAndHashTableAgree(t *testing.T) {
	const n = 5000
	h := BuildHeap(n, 3)
	chained := 0
	for _, b := range h.Buckets {
		for v := b; v != nil; v = v.Next {
			chained++
		}
	}
	if chained != n {
		t.Fatalf("hash chains hold %d vnodes, want %d", chained, n)
	}
	for ino := uint64(1); ino <= n; ino++ {
		v := h.Lookup(ino)
		if v == nil || v.Ino != ino {
			t.Fatalf("lookup %d failed", ino)
		}
		if ino > 1 && v.Parent.Kids[(ino-2)%fanout] != v {
			t.Fatalf("vnode %d is not among its parent's kids", ino)
		}
		if v.Peer == nil || len(v.Name) != nameLen {
			t.Fatalf("vnode %d: peer %v, name %q", ino, v.Peer, v.Name)
		}
	}
	if h.Lookup(n+1) != nil {
		t.Fatal("lookup of a missing inode found something")
	}
}

func TestSizeClassesAndEstimate(t *testing.T) {
	if classSize(1) != 8 || classSize(12) != 16 || classSize(272) != 288 || classSize(513) != 4096 {
		t.Fatal("size class rounding is wrong")
	}
	want := uint64(classSize(unsafe.Sizeof(Vnode{})) + 16 + 8)
	if VnodeBytes() != want {
		t.Fatalf("VnodeBytes %d, want %d", VnodeBytes(), want)
	}
	if CountForLive(0) != 1 || CountForLive(VnodeBytes()*1000) != 1000 {
		t.Fatal("CountForLive does not invert VnodeBytes")
	}
}

// The estimate must match what the runtime sees live after a collection, within 10%.
func TestLiveHeapMatchesEstimate(t *testing.T) {
	runtime.GC()
	before := ReadSnapshot().HeapLive
	const n = 200_000
	h := BuildHeap(n, 1)
	runtime.GC()
	after := ReadSnapshot().HeapLive
	runtime.KeepAlive(h)
	grew := float64(after) - float64(before)
	est := float64(uint64(n) * VnodeBytes())
	if grew < 0.9*est || grew > 1.1*est {
		t.Fatalf("live heap grew %.0f bytes for %d vnodes, estimate %.0f", grew, n, est)
	}
}

func TestWorkAllocatesShortLivedObjects(t *testing.T) {
	h := BuildHeap(1000, 1)
	before := ReadSnapshot().Allocated
	const ops = 20_000
	a := RunWork(h, ops, 2)
	grew := ReadSnapshot().Allocated - before
	if grew < ops*requestBytes/2 {
		t.Fatalf("%d calls allocated only %d bytes", ops, grew)
	}
	if b := RunWork(h, ops, 2); a != b {
		t.Fatal("the same work gave a different checksum")
	}
}

// costlab's Java side sizes its live set as live / 312 vnodes (src/labs/gc/java.rs,
// GO_VNODE_BYTES); a change here must change that constant too.
func TestVnodeBytesIsWhatCostlabAssumes(t *testing.T) {
	if VnodeBytes() != 312 {
		t.Fatalf("VnodeBytes() = %d; update GO_VNODE_BYTES in src/labs/gc/java.rs", VnodeBytes())
	}
}
