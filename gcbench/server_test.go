package main

import (
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestChainCheckFoldsTheRecordLoad keeps the server workload's case of a check that is the
// first touch of an object: in handle's record chain, the bounds check of r.Tags[0] must
// compile to a compare that reads the record (a memory operand based on the record's
// register) and branches to runtime.panicBounds. costlab's classifier is tested on that
// shape (its samples are the record's cache miss, charged to memory); if a compiler or an
// edit makes the check register-only, the workload no longer exercises the rule.
func TestChainCheckFoldsTheRecordLoad(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go on PATH to run go tool objdump")
	}
	src, err := os.ReadFile("server.go")
	if err != nil {
		t.Fatal(err)
	}
	line := 0
	for i, l := range strings.Split(string(src), "\n") {
		if strings.Contains(l, "resp.Sum += r.Value + int64(len(r.Tags[0]))") {
			line = i + 1
		}
	}
	if line == 0 {
		t.Fatal("the record chain's line is not in server.go")
	}
	// The test binary is stripped (no symbols to disassemble by name), so build the program
	// as costlab does.
	exe := t.TempDir() + "/gcbench"
	build := exec.Command(goBin, "build", "-trimpath", "-o", exe, ".")
	build.Env = append(os.Environ(), "GOTOOLCHAIN=local", "GOFLAGS=", "CGO_ENABLED=0")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v: %s", err, b)
	}
	cmd := exec.Command(goBin, "tool", "objdump", "-s", `^main\.handle$`, exe)
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go tool objdump: %v: %s", err, stderrOf(err))
	}
	type inst struct {
		file, op, args string
		addr           uint64
	}
	var insts []inst
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Split(l, "\t")
		var fields []string
		for _, x := range f {
			if x = strings.TrimSpace(x); x != "" {
				fields = append(fields, x)
			}
		}
		if len(fields) < 4 || !strings.HasPrefix(fields[1], "0x") {
			continue
		}
		addr, err := strconv.ParseUint(fields[1][2:], 16, 64)
		if err != nil {
			continue
		}
		op, args, _ := strings.Cut(fields[3], " ")
		insts = append(insts, inst{fields[0], op, strings.TrimSpace(args), addr})
	}
	at := func(addr uint64) int {
		for i, in := range insts {
			if in.addr == addr {
				return i
			}
		}
		return -1
	}
	// reachesPanic: straight-line code from i (following JMPs) calls panicBounds.
	reachesPanic := func(i int) bool {
		for hops := 0; i >= 0 && i < len(insts) && hops < 8; hops++ {
			in := insts[i]
			switch {
			case in.op == "CALL":
				return strings.HasPrefix(in.args, "runtime.panicBounds")
			case in.op == "JMP":
				a, err := strconv.ParseUint(strings.TrimPrefix(in.args, "0x"), 16, 64)
				if err != nil {
					return false
				}
				i = at(a)
			default:
				i++
			}
		}
		return false
	}
	mem := regexp.MustCompile(`\((AX|BX|CX|DX|SI|DI|R[0-9]+)\)`)
	where := "server.go:" + strconv.Itoa(line)
	for i, in := range insts {
		if in.file != where || !(strings.HasPrefix(in.op, "CMP") || strings.HasPrefix(in.op, "TEST")) {
			continue
		}
		m := mem.FindStringSubmatch(in.args)
		if m == nil || m[1] == "R14" || i+1 >= len(insts) {
			continue
		}
		j := insts[i+1]
		if !strings.HasPrefix(j.op, "J") || j.op == "JMP" {
			continue
		}
		target, err := strconv.ParseUint(strings.TrimPrefix(j.args, "0x"), 16, 64)
		if err != nil {
			continue
		}
		if reachesPanic(i+2) || reachesPanic(at(target)) {
			return
		}
	}
	t.Fatalf("no compare with a memory operand branching to panicBounds on %s in main.handle:\n%s", where, out)
}

func stderrOf(err error) string {
	if e, ok := err.(*exec.ExitError); ok {
		return strings.TrimSpace(string(e.Stderr))
	}
	return ""
}
