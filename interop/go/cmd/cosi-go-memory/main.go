// Command cosi-go-memory measures memory per stored resource in Go COSI's
// in-memory state: the resident set before and after storing 1,000,000
// resources of the benchmark type (a uint64 and a 256-byte string of its own),
// divided by the count. The Rust side is cosi/benches/memory.rs.
//
// The state is built as Talos builds it (state.WrapCore(namespaced.NewState(...))
// of inmem states with Talos' history settings).
// Each resource is built just before its create, as a program builds what it
// writes. Both measurements are taken after runtime.GC and
// debug.FreeOSMemory, so garbage and memory the runtime could return do not
// count against Go. Linux only: it reads VmRSS from /proc/self/status.
// With -owner NAME every resource is created owned by NAME, as a controller
// creates its outputs (the Rust side's --owner).
//
//	GOMAXPROCS=2 go run ./cmd/cosi-go-memory [-owner NAME] [count]
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/meta"
	"github.com/cosi-project/runtime/pkg/resource/typed"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/impl/inmem"
	"github.com/cosi-project/runtime/pkg/state/impl/namespaced"
)

// BenchSpec is the spec of the benchmark resource, as in interop/go/bench.
type BenchSpec struct {
	Payload string
	Value   uint64
}

// DeepCopy implements typed.DeepCopyable.
func (s BenchSpec) DeepCopy() BenchSpec { return s }

// BenchExtension provides the resource definition.
type BenchExtension struct{}

// ResourceDefinition implements meta.ResourceDefinitionProvider.
func (BenchExtension) ResourceDefinition() meta.ResourceDefinitionSpec {
	return meta.ResourceDefinitionSpec{Type: "BenchSpecs.bench.cosi.dev", DefaultNamespace: "bench"}
}

func rss() uint64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		panic(err)
	}
	defer f.Close() //nolint:errcheck

	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		if rest, ok := strings.CutPrefix(scanner.Text(), "VmRSS:"); ok {
			kib, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				panic(err)
			}

			return kib * 1024
		}
	}

	panic("no VmRSS line")
}

func settle() {
	runtime.GC()
	debug.FreeOSMemory()
}

func main() {
	count := 1_000_000

	owner := flag.String("owner", "", "create every resource owned by this name")
	flag.Parse()

	if flag.NArg() > 0 {
		n, err := strconv.Atoi(flag.Arg(0))
		if err != nil {
			panic(err)
		}

		count = n
	}

	ctx := context.Background()
	// Talos' history settings, which are the Rust state's defaults too.
	build := inmem.NewStateWithOptions(
		inmem.WithHistoryInitialCapacity(8),
		inmem.WithHistoryMaxCapacity(1024),
		inmem.WithHistoryGap(4),
	)
	st := state.WrapCore(namespaced.NewState(func(ns resource.Namespace) state.CoreState { return build(ns) }))

	settle()

	before := rss()

	var stats runtime.MemStats

	runtime.ReadMemStats(&stats)
	heapBefore := stats.HeapAlloc

	for i := range count {
		res := typed.NewResource[BenchSpec, BenchExtension](
			resource.NewMetadata("bench", "BenchSpecs.bench.cosi.dev", fmt.Sprintf("r%07d", i), resource.VersionUndefined),
			BenchSpec{Value: uint64(i), Payload: strings.Repeat("x", 256)},
		)
		if err := st.Create(ctx, res, state.WithCreateOwner(*owner)); err != nil {
			panic(err)
		}
	}

	settle()

	after := rss()

	runtime.ReadMemStats(&stats)

	list, err := st.List(ctx, resource.NewMetadata("bench", "BenchSpecs.bench.cosi.dev", "", resource.VersionUndefined))
	if err != nil {
		panic(err)
	}

	if len(list.Items) != count {
		panic(fmt.Sprintf("stored %d of %d", len(list.Items), count))
	}

	owned := ""
	if *owner != "" {
		owned = fmt.Sprintf(" owned by %q", *owner)
	}

	fmt.Printf("memory: %d resources%s, RSS before %.1f MiB, after %.1f MiB: %.0f B per resource (live heap %.0f B per resource)\n",
		count, owned, float64(before)/1048576, float64(after)/1048576,
		float64(after-before)/float64(count), float64(stats.HeapAlloc-heapBefore)/float64(count))

	runtime.KeepAlive(st)
}
