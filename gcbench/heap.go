package main

import (
	"strconv"
	"unsafe"
)

// Vnode is a file-system node as a kernel keeps it in memory: identity and attributes,
// the directory tree (parent and children), a hash-bucket chain, a cross link (a hard link
// or mount point) and a few block numbers. About 2 million of them make the 640 MB live
// heap of the Biscuit evaluation; what matters to the collector is that they are many,
// small and full of pointers.
type Vnode struct {
	Ino    uint64
	Size   int64
	Mode   uint32
	Nlink  uint32
	Mtime  int64
	Ctime  int64
	Parent *Vnode
	Next   *Vnode // next in the same hash bucket
	Peer   *Vnode // a cross edge, so the graph is not a tree
	Kids   [fanout]*Vnode
	Name   string
	Blocks [20]uint64
}

const (
	fanout  = 4
	nameLen = 12
)

// Heap is the live heap: every vnode is reachable from Root through the tree, and from
// Buckets through the hash chains.
type Heap struct {
	Root    *Vnode
	Buckets []*Vnode
	N       int
}

// Go's small-object size classes up to 512 bytes (runtime/sizeclasses.go); an object
// occupies its class's size, which is what the heap estimate must count.
var sizeClasses = []uintptr{8, 16, 24, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224,
	240, 256, 288, 320, 352, 384, 416, 448, 480, 512}

func classSize(n uintptr) uintptr {
	for _, c := range sizeClasses {
		if n <= c {
			return c
		}
	}
	return (n + 4095) &^ 4095
}

// VnodeBytes is the heap one vnode costs: the object in its size class, its name, and its
// slot in the hash table (about one slot per vnode).
func VnodeBytes() uint64 {
	return uint64(classSize(unsafe.Sizeof(Vnode{})) + classSize(nameLen) + unsafe.Sizeof((*Vnode)(nil)))
}

// CountForLive is how many vnodes make a live heap of about `live` bytes (at least 1).
func CountForLive(live uint64) int {
	n := live / VnodeBytes()
	if n < 1 {
		n = 1
	}
	return int(n)
}

func hashIno(ino uint64) uint64 {
	ino ^= ino >> 33
	ino *= 0xff51afd7ed558ccd
	ino ^= ino >> 33
	return ino
}

// BuildHeap makes n vnodes: a tree of fan-out 4 (node i's parent is (i-1)/4), each node
// also chained into a hash table by inode number and linked to one random other node.
func BuildHeap(n int, seed uint64) *Heap {
	if n < 1 {
		n = 1
	}
	nodes := make([]*Vnode, n)
	buckets := make([]*Vnode, bucketCount(n))
	rng := newRand(seed)
	for i := 0; i < n; i++ {
		v := &Vnode{Ino: uint64(i) + 1, Size: int64(rng.next() % 65536), Mode: 0o100644, Nlink: 1}
		v.Name = makeName(i)
		for b := range v.Blocks {
			v.Blocks[b] = uint64(i)*32 + uint64(b)
		}
		if i > 0 {
			p := nodes[(i-1)/fanout]
			v.Parent = p
			p.Kids[(i-1)%fanout] = v
			p.Mode = 0o40755
		}
		slot := hashIno(v.Ino) & uint64(len(buckets)-1)
		v.Next = buckets[slot]
		buckets[slot] = v
		nodes[i] = v
	}
	for i := 0; i < n; i++ {
		nodes[i].Peer = nodes[rng.next()%uint64(n)]
	}
	// nodes is dropped here: the tree and the table are what keep the vnodes alive.
	return &Heap{Root: nodes[0], Buckets: buckets, N: n}
}

// bucketCount is the hash table size: the power of two nearest n, so a slot is a mask
// away and chains average about one vnode.
func bucketCount(n int) int {
	b := 1
	for b*3/2 < n {
		b *= 2
	}
	return b
}

// makeName gives each vnode a distinct name of exactly nameLen bytes in its own allocation.
func makeName(i int) string {
	b := make([]byte, nameLen)
	for k := range b {
		b[k] = '0'
	}
	s := strconv.Itoa(i)
	b[0] = 'f'
	copy(b[nameLen-len(s):], s)
	return string(b)
}

// Lookup finds the vnode with inode number ino through the hash table.
func (h *Heap) Lookup(ino uint64) *Vnode {
	for v := h.Buckets[hashIno(ino)&uint64(len(h.Buckets)-1)]; v != nil; v = v.Next {
		if v.Ino == ino {
			return v
		}
	}
	return nil
}

// Reachable counts the distinct vnodes reachable from the root through every pointer a
// vnode holds (tree, chains and cross edges).
func (h *Heap) Reachable() int {
	seen := make(map[*Vnode]bool, h.N)
	stack := []*Vnode{h.Root}
	for len(stack) > 0 {
		v := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if v == nil || seen[v] {
			continue
		}
		seen[v] = true
		stack = append(stack, v.Parent, v.Next, v.Peer)
		stack = append(stack, v.Kids[:]...)
	}
	return len(seen)
}

// rng is a small xorshift generator: deterministic per seed, no allocation, no locks.
type rng struct{ s uint64 }

func newRand(seed uint64) *rng { return &rng{s: seed*0x9e3779b97f4a7c15 + 1} }

func (r *rng) next() uint64 {
	r.s ^= r.s << 13
	r.s ^= r.s >> 7
	r.s ^= r.s << 17
	return r.s
}
