package nat

import (
	"fmt"
	"net/netip"
	"runtime"
	"testing"

	"github.com/vishvananda/netns"

	"github.com/reefcni/reef/nat/arpfilter"
	"github.com/reefcni/reef/nat/hostport"
	"github.com/reefcni/reef/nat/nft"
)

// `make bench` runs these (root only):
//
//	go test -run '^$' -bench . -benchtime 200x ./nat/

const benchPods = 1000

func benchPod(i int) Pod {
	return Pod{Veth: fmt.Sprintf("reef%011x", i), IPs: []netip.Addr{netip.AddrFrom4([4]byte{10, 244, byte(i >> 8), byte(i)})}}
}

// inBenchNetns moves the benchmark's goroutine, locked to its thread, into
// a throw-away namespace and returns a Kernel of the caller's namespace:
// the daemon's case, where no socket needs a setns. A benchmark that ends
// early takes the locked thread with it, so no thread leaves a foreign
// namespace behind.
func inBenchNetns(b *testing.B) (k *Kernel, leave func()) {
	n, _ := testNetns(b)
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		b.Fatal(err)
	}
	target, err := netns.GetFromPath(n.Path())
	if err != nil {
		b.Fatal(err)
	}
	if err := netns.Set(target); err != nil {
		b.Fatal(err)
	}
	return NewKernel(), func() {
		if err := netns.Set(orig); err != nil {
			b.Fatalf("back to the original netns: %v", err) // the locked thread dies with the goroutine
		}
		orig.Close()
		target.Close()
		runtime.UnlockOSThread()
	}
}

// withPods programs reef's tables with benchPods pods and returns what it
// wanted.
func withPods(b *testing.B, k *Kernel) []nft.Table {
	var pods []Pod
	for i := 0; i < benchPods; i++ {
		pods = append(pods, benchPod(i))
	}
	want := Desired(testPools(), pods)
	if err := k.Apply(nft.Diff(want, nil)); err != nil {
		b.Fatal(err)
	}
	return want
}

// BenchmarkPodElement: one pod's element added (ADD) or removed (DEL),
// each in its own batch, with 1,000 pods' elements in the set.
func BenchmarkPodElement(b *testing.B) {
	b.Run("add", func(b *testing.B) {
		k, leave := inBenchNetns(b)
		defer leave()
		withPods(b, k)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := k.AddPod(benchPod(benchPods + i)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("del", func(b *testing.B) {
		k, leave := inBenchNetns(b)
		defer leave()
		withPods(b, k)
		for i := 0; i < b.N; i++ {
			if err := k.AddPod(benchPod(benchPods + i)); err != nil {
				b.Fatal(err)
			}
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := k.DelPod(benchPod(benchPods + i)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkDriftCheck: the nftables part of a reconcile pass with 1,000
// pods and nothing to repair: desired state, read both tables, diff.
func BenchmarkDriftCheck(b *testing.B) {
	k, leave := inBenchNetns(b)
	defer leave()
	withPods(b, k)
	var pods []Pod
	for i := 0; i < benchPods; i++ {
		pods = append(pods, benchPod(i))
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		w := Desired(testPools(), pods)
		have, err := k.Read(IDs(w))
		if err != nil {
			b.Fatal(err)
		}
		if p := nft.Diff(w, have); !p.Empty() {
			b.Fatalf("drift in a quiet kernel: %+v", p.Changes)
		}
	}
}

// BenchmarkRepairDeletedTable: a pass after `nft delete table arp reef`
// with 1,000 pods: read, diff, recreate the table with every element.
func BenchmarkRepairDeletedTable(b *testing.B) {
	k, leave := inBenchNetns(b)
	defer leave()
	want := withPods(b, k)
	arp := []nft.TableID{arpfilter.TableID}
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		if err := k.DeleteTables(arp); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		have, err := k.Read(IDs(want))
		if err != nil {
			b.Fatal(err)
		}
		if err := k.Apply(nft.Diff(want, have)); err != nil {
			b.Fatal(err)
		}
	}
}

// benchHostPortPod is benchPod with one hostPort (TCP 10000+i to 80).
func benchHostPortPod(i int) Pod {
	p := benchPod(i)
	p.Ports = []hostport.Mapping{{Proto: 6, Port: uint16(10000 + i), PodPort: 80}}
	return p
}

// BenchmarkHostPort is issue 13's figures, with 1,000 pods that have a
// hostPort each: "add" is one more pod's elements (ARP element, mapping,
// hairpin pair) in one batch, as ADD does; "drift" is the nftables part
// of a reconcile pass (desired state of all three tables, read, diff).
func BenchmarkHostPort(b *testing.B) {
	setup := func(b *testing.B) (*Kernel, []Pod, func()) {
		k, leave := inBenchNetns(b)
		var pods []Pod
		for i := 0; i < benchPods; i++ {
			pods = append(pods, benchHostPortPod(i))
		}
		if err := k.Apply(nft.Diff(Desired(testPools(), pods), nil)); err != nil {
			leave()
			b.Fatal(err)
		}
		return k, pods, leave
	}
	b.Run("add", func(b *testing.B) {
		k, _, leave := setup(b)
		defer leave()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := k.AddPod(benchHostPortPod(benchPods + i)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("drift", func(b *testing.B) {
		k, pods, leave := setup(b)
		defer leave()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			w := Desired(testPools(), pods)
			have, err := k.Read(IDs(w))
			if err != nil {
				b.Fatal(err)
			}
			if p := nft.Diff(w, have); !p.Empty() {
				b.Fatalf("drift in a quiet kernel: %+v", p.Changes)
			}
		}
	})
}
