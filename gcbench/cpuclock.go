package main

import (
	"runtime"
	"syscall"
	"time"
	"unsafe"
)

// clockThreadCPU is CLOCK_THREAD_CPUTIME_ID: CPU time of the calling thread only.
const clockThreadCPU = 3

// threadCPUNanos is the CPU time the calling OS thread has used, in ns. The tax kernels are
// timed with it (their goroutine locked to its thread) rather than with the wall clock, so
// that time the thread spends descheduled — by the kernel on a shared machine, or while a
// GC worker holds its P — is not charged to the kernel. Falls back to the wall clock if
// the call fails.
func threadCPUNanos() int64 {
	var ts syscall.Timespec
	_, _, errno := syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPU, uintptr(unsafe.Pointer(&ts)), 0)
	if errno != 0 {
		return time.Now().UnixNano()
	}
	return ts.Nano()
}

// onOwnThread runs f with its goroutine wired to one OS thread, so threadCPUNanos
// readings inside f are of the same thread.
func onOwnThread(f func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	f()
}
