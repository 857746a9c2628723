package cli

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"syscall"
)

// profileEnv names a directory: when set, `reef daemon` writes CPU
// profiles of its run there, cpu-<pid>-<n>.pprof, a new one from each
// SIGUSR1 on (so that a benchmark's phases can be told apart), and a heap
// profile at its end, heap-<pid>.pprof (for `go tool pprof`). A
// developer's aid for the lab benchmarks (docs/development.md); it is read
// from the environment, not the config, so that no node runs it by
// accident.
const profileEnv = "REEF_PROFILE_DIR"

// startProfile starts the CPU profile when profileEnv is set and returns
// the function that ends it and writes the heap profile.
func startProfile(stderr io.Writer) (stop func()) {
	dir := os.Getenv(profileEnv)
	if dir == "" {
		return func() {}
	}
	pid := os.Getpid()
	fail := func(err error) { fmt.Fprintf(stderr, "reef: %s: %v\n", profileEnv, err) }
	n := 0
	var cpu *os.File
	begin := func() {
		n++
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("cpu-%d-%d.pprof", pid, n)))
		if err != nil {
			fail(err)
			return
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fail(err)
			f.Close()
			return
		}
		cpu = f
	}
	end := func() {
		if cpu != nil {
			pprof.StopCPUProfile()
			cpu.Close()
			cpu = nil
		}
	}
	begin()
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case <-usr1:
				end()
				writeHeap(filepath.Join(dir, fmt.Sprintf("heap-%d-%d.pprof", pid, n)), fail)
				begin()
			case <-done:
				end()
				return
			}
		}
	}()
	return func() {
		signal.Stop(usr1)
		close(done)
		<-stopped
		heap, err := os.Create(filepath.Join(dir, fmt.Sprintf("heap-%d.pprof", pid)))
		if err != nil {
			fail(err)
			return
		}
		defer heap.Close()
		runtime.GC()
		if err := pprof.Lookup("heap").WriteTo(heap, 0); err != nil {
			fail(err)
		}
	}
}

// writeHeap writes a heap profile after a GC, so that in-use is what is
// live: at each SIGUSR1, a benchmark phase's end.
func writeHeap(path string, fail func(error)) {
	f, err := os.Create(path)
	if err != nil {
		fail(err)
		return
	}
	defer f.Close()
	runtime.GC()
	if err := pprof.WriteHeapProfile(f); err != nil {
		fail(err)
	}
}
