package main

import "sync"

// Request is what a syscall allocates on its way in: the call, its arguments, the path it
// resolves. Stat is what it hands back. Both die when the call returns.
type Request struct {
	Op    int
	Ino   uint64
	Flags uint32
	Path  []byte
	Dir   *Vnode
	Reply *Stat
}

type Stat struct {
	Ino   uint64
	Size  int64
	Mode  uint32
	Nlink uint32
	Mtime int64
	Ctime int64
	Blks  [4]uint64
}

// pathDepth is how many path components a call resolves (target and its ancestors).
const pathDepth = 3

// hotSet is how many vnodes most calls choose from.
const hotSet = 1 << 15

// statCall is one stat(2)-like call: build the request and the path of a random vnode,
// resolve it through the hash table, fill a reply. It allocates three short-lived objects
// and reads the live heap in random places, as a kernel's syscall path does.
func statCall(h *Heap, r *rng, inflight []*Request, slot int) uint64 {
	// Most calls touch a hot set (the top of the tree, as a real namespace's recent
	// directories are); one in eight goes anywhere in the heap.
	x := r.next()
	span := uint64(h.N)
	if x&7 != 0 && span > hotSet {
		span = hotSet
	}
	ino := (x>>3)%span + 1
	req := &Request{Op: 4, Ino: ino, Flags: uint32(ino)}
	// Like a kernel's getname(), the path gets a scratch buffer of its own.
	req.Path = make([]byte, 0, pathBuf)
	v := h.Lookup(ino)
	req.Dir = v
	for d := 0; d < pathDepth && v != nil; d++ {
		req.Path = append(req.Path, '/')
		req.Path = append(req.Path, v.Name...)
		v = v.Parent
	}
	target := req.Dir
	if target == nil {
		return 0
	}
	st := &Stat{Ino: target.Ino, Size: target.Size, Mode: target.Mode, Nlink: target.Nlink,
		Mtime: target.Mtime, Ctime: target.Ctime}
	copy(st.Blks[:], target.Blocks[:4])
	req.Reply = st
	// The table of in-flight calls keeps a request alive for a few calls, as a kernel's
	// does; it is also what makes the request a heap object rather than a stack one.
	inflight[slot%len(inflight)] = req
	var sum uint64
	for _, c := range req.Path {
		sum = sum*31 + uint64(c)
	}
	return sum ^ req.Reply.Ino ^ uint64(req.Dir.Nlink)
}

// pathBuf is the size of a call's path scratch buffer.
const pathBuf = 512

// requestBytes is what one call allocates (Request 64 B, path buffer, Stat 80 B size classes).
const requestBytes = 64 + pathBuf + 80

// RunWork does `ops` calls spread over `workers` goroutines and returns a checksum so the
// work cannot be optimised away.
func RunWork(h *Heap, ops int64, workers int) uint64 {
	if workers < 1 {
		workers = 1
	}
	var wg sync.WaitGroup
	sums := make([]uint64, workers)
	for w := 0; w < workers; w++ {
		share := ops / int64(workers)
		if int64(w) < ops%int64(workers) {
			share++
		}
		wg.Add(1)
		go func(w int, share int64) {
			defer wg.Done()
			r := newRand(uint64(w) + 7)
			inflight := make([]*Request, 16)
			var s uint64
			for i := int64(0); i < share; i++ {
				s += statCall(h, r, inflight, int(i))
			}
			sums[w] = s
		}(w, share)
	}
	wg.Wait()
	var total uint64
	for _, s := range sums {
		total ^= s
	}
	return total
}
