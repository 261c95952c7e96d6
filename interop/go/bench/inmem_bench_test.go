// Package bench measures Go COSI's in-memory state the way Talos builds it,
// as a baseline for the Rust benchmark in cosi/benches/state.rs.
//
// Each benchmark mirrors one Rust measurement; see BENCHMARKS.md. As on the
// Rust side, every ID and resource is built before the timed loop, and creates
// go into a fresh state every createBatch creates. Run at GOMAXPROCS=2, the
// Rust side's two tokio workers:
//
//	go test ./bench -run '^$' -bench 'Create|Get|Update|List|WatchFanOut' -benchmem -cpu 2 -count 3
package bench

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/meta"
	"github.com/cosi-project/runtime/pkg/resource/typed"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/impl/inmem"
	"github.com/cosi-project/runtime/pkg/state/impl/namespaced"
)

const (
	benchNamespace = resource.Namespace("bench")
	benchType      = resource.Type("BenchSpecs.bench.cosi.dev")
	listSize       = 10_000
	// createBatch is how many creates go into one state before the next starts empty.
	createBatch = 10_000
)

// BenchSpec is the spec of the benchmark resource: the same fields as the
// Rust BenchSpec (a counter and a 256-byte string payload).
type BenchSpec struct {
	Payload string
	Value   uint64
}

// DeepCopy implements typed.DeepCopyable. Go strings are immutable, so copying
// the struct is a deep copy (the payload bytes are shared, not copied).
func (s BenchSpec) DeepCopy() BenchSpec { return s }

// BenchExtension provides the resource definition.
type BenchExtension struct{}

// ResourceDefinition implements meta.ResourceDefinitionProvider.
func (BenchExtension) ResourceDefinition() meta.ResourceDefinitionSpec {
	return meta.ResourceDefinitionSpec{
		Type:             benchType,
		DefaultNamespace: benchNamespace,
	}
}

// BenchResource is the typed resource used by every benchmark.
type BenchResource = typed.Resource[BenchSpec, BenchExtension]

func newBench(id resource.ID, value uint64) *BenchResource {
	return typed.NewResource[BenchSpec, BenchExtension](
		resource.NewMetadata(benchNamespace, benchType, id, resource.VersionUndefined),
		// A spec of realistic size, with a payload of its own (as the Rust
		// resources have), built before the timed loop.
		BenchSpec{Value: value, Payload: strings.Repeat("x", 256)},
	)
}

func benchKind() resource.Kind {
	return resource.NewMetadata(benchNamespace, benchType, "", resource.VersionUndefined)
}

// newState builds the state as Talos does: one inmem state per namespace,
// each collection's history starting at 8 events and growing to 1024 (gap
// 4). These are also the Rust memory state's defaults, so both sides keep
// (and let go of) the same events. COSI_BENCH_HISTORY=initial,max,gap sets
// other values (the Rust benchmarks read it too): 100,100,5 is Go COSI's
// own default.
func newState() state.State { //nolint:ireturn
	initial, maxCapacity, gap := 8, 1024, 4

	if setting := os.Getenv("COSI_BENCH_HISTORY"); setting != "" {
		if _, err := fmt.Sscanf(setting, "%d,%d,%d", &initial, &maxCapacity, &gap); err != nil {
			panic(fmt.Sprintf("COSI_BENCH_HISTORY=%q: want initial,max,gap: %v", setting, err))
		}
	}

	build := inmem.NewStateWithOptions(
		inmem.WithHistoryInitialCapacity(initial),
		inmem.WithHistoryMaxCapacity(maxCapacity),
		inmem.WithHistoryGap(gap),
	)

	return state.WrapCore(namespaced.NewState(func(ns resource.Namespace) state.CoreState { return build(ns) }))
}

// ids returns n IDs formatted as format, built once, before any timed loop.
func ids(format string, n int) []resource.ID {
	out := make([]resource.ID, n)
	for i := range out {
		out[i] = fmt.Sprintf(format, i)
	}

	return out
}

func stateWith(b *testing.B, ids []resource.ID) state.State { //nolint:ireturn
	b.Helper()

	st := newState()
	ctx := context.Background()

	for i, id := range ids {
		if err := st.Create(ctx, newBench(id, uint64(i))); err != nil {
			b.Fatal(err)
		}
	}

	return st
}

// BenchmarkCreate: Rust memory/create. A fresh state every createBatch
// creates (as on the Rust side), so the state never grows past createBatch
// resources; the resources of a batch are built with the timer stopped.
func BenchmarkCreate(b *testing.B) {
	ctx := context.Background()
	createIDs := ids("r%d", createBatch)

	b.ResetTimer()

	for done := 0; done < b.N; {
		n := min(createBatch, b.N-done)

		b.StopTimer()

		st := newState()
		resources := make([]*BenchResource, n)

		for i := range resources {
			resources[i] = newBench(createIDs[i], uint64(i))
		}

		b.StartTimer()

		for _, res := range resources {
			if err := st.Create(ctx, res); err != nil {
				b.Fatal(err)
			}
		}

		done += n
	}
}

// BenchmarkGet: Rust memory/get. safe.StateGetByID (state.Get + type assertion)
// from 10,000 resources, IDs built beforehand.
func BenchmarkGet(b *testing.B) {
	getIDs := ids("r%06d", listSize)
	st := stateWith(b, getIDs)
	ctx := context.Background()

	b.ResetTimer()

	for i := range b.N {
		res, err := safe.StateGetByID[*BenchResource](ctx, st, getIDs[i%listSize])
		if err != nil {
			b.Fatal(err)
		}

		_ = res
	}
}

// BenchmarkUpdate: Rust memory/update. safe.StateGet, edit the spec, state.Update.
func BenchmarkUpdate(b *testing.B) {
	st := stateWith(b, ids("r%06d", listSize))
	ctx := context.Background()
	ptr := resource.NewMetadata(benchNamespace, benchType, "r000000", resource.VersionUndefined)

	b.ResetTimer()

	for i := range b.N {
		res, err := safe.StateGet[*BenchResource](ctx, st, ptr)
		if err != nil {
			b.Fatal(err)
		}

		res.TypedSpec().Value = uint64(i)

		if err := st.Update(ctx, res); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkListTyped: Rust memory/list/typed/10000. safe.StateListAll.
func BenchmarkListTyped(b *testing.B) {
	st := stateWith(b, ids("r%06d", listSize))
	ctx := context.Background()

	b.ResetTimer()

	for range b.N {
		list, err := safe.StateListAll[*BenchResource](ctx, st)
		if err != nil {
			b.Fatal(err)
		}

		if list.Len() != listSize {
			b.Fatalf("listed %d", list.Len())
		}
	}
}

// BenchmarkListDynamic: Rust memory/list/dynamic/10000. Plain state.List.
func BenchmarkListDynamic(b *testing.B) {
	st := stateWith(b, ids("r%06d", listSize))
	ctx := context.Background()
	kind := benchKind()

	b.ResetTimer()

	for range b.N {
		list, err := st.List(ctx, kind)
		if err != nil {
			b.Fatal(err)
		}

		if len(list.Items) != listSize {
			b.Fatalf("listed %d", len(list.Items))
		}
	}
}

// BenchmarkWatchFanOut: Rust memory/watch_fan_out/watchers/100. Per op: a fresh
// state, 100 WatchKindAggregated watchers on one kind (set up untimed), then
// timed: 100 creates and the wait until every watcher has received all 100
// events. Default history (100 events) holds exactly the 100 creates, so a
// watcher that falls behind cannot overrun; an Errored event fails the run.
func BenchmarkWatchFanOut(b *testing.B) {
	const (
		watchers = 100
		writes   = 100
	)

	kind := benchKind()
	writeIDs := ids("r%d", writes)

	for range b.N {
		b.StopTimer()

		st := newState()
		resources := make([]*BenchResource, writes)

		for i := range resources {
			resources[i] = newBench(writeIDs[i], uint64(i))
		}

		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, watchers)

		for range watchers {
			ch := make(chan []state.Event)

			if err := st.WatchKindAggregated(ctx, kind, ch); err != nil {
				b.Fatal(err)
			}

			go func() {
				seen := 0

				for seen < writes {
					events := <-ch
					for _, ev := range events {
						if ev.Type == state.Errored {
							done <- ev.Error

							return
						}
					}

					seen += len(events)
				}

				done <- nil
			}()
		}

		b.StartTimer()

		for _, res := range resources {
			if err := st.Create(ctx, res); err != nil {
				b.Fatal(err)
			}
		}

		for range watchers {
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		}

		b.StopTimer()
		cancel()
		b.StartTimer()
	}

	b.ReportMetric(float64(watchers*writes)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mdeliveries/s")
}
