// Go COSI's controller runtime, as a baseline for the Rust benchmark in
// cosi/benches/runtime.rs: the same scenarios, with hand-written controllers
// through the public API (controller.Controller, controller.QController) on
// the in-memory state built as Talos builds it: the chain, the chain beside a
// busy neighbour, four CPU-bound controllers side by side, and the preloaded
// transforms. See BENCHMARKS.md, section "Controller runtime, in memory". Run with:
//
//	go test ./bench -run '^$' -bench Runtime -benchtime 1x -cpu 2
//
// One benchmark op is a whole scenario (a chain of 2,000 or 300 samples, or
// five transform runs); the numbers are the custom metrics (percentiles of
// the samples, median of the runs), not ns/op. Runtime metrics are disabled.
package bench

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/siderolabs/gen/optional"
	"go.uber.org/zap"

	"github.com/cosi-project/runtime/pkg/controller"
	cosiruntime "github.com/cosi-project/runtime/pkg/controller/runtime"
	"github.com/cosi-project/runtime/pkg/controller/runtime/options"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/meta"
	"github.com/cosi-project/runtime/pkg/resource/typed"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
)

const (
	numType       = resource.Type("Nums.bench.cosi.dev")
	textType      = resource.Type("Texts.bench.cosi.dev")
	transformIn   = resource.Namespace("in")
	transformOut  = resource.Namespace("out")
	transformSize = 100_000
	transformRuns = 5
	// neighbourRounds is the busy neighbour's work per reconcile (about 8 ms),
	// parallelRounds a parallel controller's per item (about 80 µs).
	neighbourRounds  = 2_000_000
	parallelRounds   = 20_000
	parallelInputs   = 2_000
	parallelCount    = 4
	neighbourSamples = 500
	// waitLimit bounds every wait, so that a broken controller fails the
	// benchmark instead of hanging it.
	waitLimit = time.Minute
)

// NumSpec is the spec of Num, as the Rust Num: one integer.
type NumSpec struct {
	Value int64
}

// DeepCopy implements typed.DeepCopyable.
func (s NumSpec) DeepCopy() NumSpec { return s }

// NumExtension provides the resource definition of Num.
type NumExtension struct{}

// ResourceDefinition implements meta.ResourceDefinitionProvider.
func (NumExtension) ResourceDefinition() meta.ResourceDefinitionSpec {
	return meta.ResourceDefinitionSpec{Type: numType, DefaultNamespace: "c0"}
}

// Num is the chain's resource and the transform's input.
type Num = typed.Resource[NumSpec, NumExtension]

func newNum(namespace resource.Namespace, id resource.ID, value int64) *Num {
	return typed.NewResource[NumSpec, NumExtension](
		resource.NewMetadata(namespace, numType, id, resource.VersionUndefined),
		NumSpec{Value: value},
	)
}

// TextSpec is the spec of Text, as the Rust Text: one string.
type TextSpec struct {
	Value string
}

// DeepCopy implements typed.DeepCopyable.
func (s TextSpec) DeepCopy() TextSpec { return s }

// TextExtension provides the resource definition of Text.
type TextExtension struct{}

// ResourceDefinition implements meta.ResourceDefinitionProvider.
func (TextExtension) ResourceDefinition() meta.ResourceDefinitionSpec {
	return meta.ResourceDefinitionSpec{Type: textType, DefaultNamespace: transformOut}
}

// Text is the transform's output.
type Text = typed.Resource[TextSpec, TextExtension]

func newText(id resource.ID) *Text {
	return typed.NewResource[TextSpec, TextExtension](
		resource.NewMetadata(transformOut, textType, id, resource.VersionUndefined),
		TextSpec{},
	)
}

func chainNamespace(index int) resource.Namespace { return fmt.Sprintf("c%d", index) }

// linkController copies every Num of c{index} into c{index+1}. The Rust Link
// sets this input at its first reconcile (its macro declares inputs
// statically); a Go controller declares it in Inputs, to the same effect.
type linkController struct {
	index int
}

func (ctrl linkController) Name() string { return fmt.Sprintf("link%d", ctrl.index) }

func (ctrl linkController) Inputs() []controller.Input {
	return []controller.Input{{Namespace: chainNamespace(ctrl.index), Type: numType, Kind: controller.InputWeak}}
}

func (ctrl linkController) Outputs() []controller.Output {
	return []controller.Output{{Type: numType, Kind: controller.OutputShared}}
}

func (ctrl linkController) Run(ctx context.Context, r controller.Runtime, _ *zap.Logger) error {
	from, to := chainNamespace(ctrl.index), chainNamespace(ctrl.index+1)
	kind := resource.NewMetadata(from, numType, "", resource.VersionUndefined)

	for {
		select {
		case <-ctx.Done():
			return nil
		case <-r.EventCh():
		}

		nums, err := safe.ReaderList[*Num](ctx, r, kind)
		if err != nil {
			return err
		}

		for num := range nums.All() {
			value := num.TypedSpec().Value

			if err := safe.WriterModify(ctx, r, newNum(to, num.Metadata().ID(), 0), func(out *Num) error {
				out.TypedSpec().Value = value

				return nil
			}); err != nil {
				return err
			}
		}
	}
}

// crunch is pure CPU work, the same arithmetic as the Rust benchmark's:
// rounds steps of splitmix64 from seed, each depending on the last.
func crunch(seed uint64, rounds int) uint64 {
	x := seed
	for range rounds {
		x += 0x9e3779b97f4a7c15
		z := x
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		x = z ^ (z >> 31)
	}

	return x
}

// crunchController reads every Num of from and, for each, crunches for
// rounds steps and writes the result as a Text of to: the busy neighbour
// (from "busy", 2,000,000 rounds) and the parallel controllers (from
// p{index}, 20,000 rounds).
type crunchController struct {
	name     string
	from, to resource.Namespace
	rounds   int
}

func (ctrl crunchController) Name() string { return ctrl.name }

func (ctrl crunchController) Inputs() []controller.Input {
	return []controller.Input{{Namespace: ctrl.from, Type: numType, Kind: controller.InputWeak}}
}

func (ctrl crunchController) Outputs() []controller.Output {
	return []controller.Output{{Type: textType, Kind: controller.OutputShared}}
}

func (ctrl crunchController) Run(ctx context.Context, r controller.Runtime, _ *zap.Logger) error {
	kind := resource.NewMetadata(ctrl.from, numType, "", resource.VersionUndefined)

	for {
		select {
		case <-ctx.Done():
			return nil
		case <-r.EventCh():
		}

		nums, err := safe.ReaderList[*Num](ctx, r, kind)
		if err != nil {
			return err
		}

		for num := range nums.All() {
			value := strconv.FormatUint(crunch(uint64(num.TypedSpec().Value), ctrl.rounds), 10)
			text := typed.NewResource[TextSpec, TextExtension](
				resource.NewMetadata(ctrl.to, textType, num.Metadata().ID(), resource.VersionUndefined),
				TextSpec{},
			)

			if err := safe.WriterModify(ctx, r, text, func(text *Text) error {
				text.TypedSpec().Value = value

				return nil
			}); err != nil {
				return err
			}
		}
	}
}

// transformController is the reconcile-controller transform: on every wake-up
// it lists all inputs and modifies every output.
type transformController struct{}

func (transformController) Name() string { return "transform" }

func (transformController) Inputs() []controller.Input {
	return []controller.Input{{Namespace: transformIn, Type: numType, Kind: controller.InputWeak}}
}

func (transformController) Outputs() []controller.Output {
	return []controller.Output{{Type: textType, Kind: controller.OutputExclusive}}
}

func (transformController) Run(ctx context.Context, r controller.Runtime, _ *zap.Logger) error {
	kind := resource.NewMetadata(transformIn, numType, "", resource.VersionUndefined)

	for {
		select {
		case <-ctx.Done():
			return nil
		case <-r.EventCh():
		}

		nums, err := safe.ReaderList[*Num](ctx, r, kind)
		if err != nil {
			return err
		}

		for num := range nums.All() {
			value := strconv.FormatInt(num.TypedSpec().Value, 10)

			if err := safe.WriterModify(ctx, r, newText(num.Metadata().ID()), func(text *Text) error {
				text.TypedSpec().Value = value

				return nil
			}); err != nil {
				return err
			}
		}
	}
}

// queueTransform is the queue-controller transform: one input per item, four
// at once.
type queueTransform struct{}

func (queueTransform) Name() string { return "queue-transform" }

func (queueTransform) Settings() controller.QSettings {
	return controller.QSettings{
		Inputs:      []controller.Input{{Namespace: transformIn, Type: numType, Kind: controller.InputQPrimary}},
		Outputs:     []controller.Output{{Type: textType, Kind: controller.OutputExclusive}},
		Concurrency: optional.Some[uint](4),
	}
}

func (queueTransform) Reconcile(ctx context.Context, _ *zap.Logger, r controller.QRuntime, item resource.Pointer) error {
	num, err := safe.ReaderGet[*Num](ctx, r, item)
	if err != nil {
		if state.IsNotFoundError(err) {
			return nil
		}

		return err
	}

	value := strconv.FormatInt(num.TypedSpec().Value, 10)

	return safe.WriterModify(ctx, r, newText(item.ID()), func(text *Text) error {
		text.TypedSpec().Value = value

		return nil
	})
}

func (queueTransform) MapInput(context.Context, *zap.Logger, controller.QRuntime, controller.ReducedResourceMetadata) ([]resource.Pointer, error) {
	return nil, nil // no mapped inputs
}

// startedRuntime is a running controller runtime and the way to stop it.
type startedRuntime struct {
	cancel context.CancelFunc
	done   chan error
}

func newRuntime(b *testing.B, st state.State) *cosiruntime.Runtime {
	b.Helper()

	rt, err := cosiruntime.NewRuntime(st, zap.NewNop(), options.WithMetrics(false))
	if err != nil {
		b.Fatal(err)
	}

	return rt
}

func start(rt *cosiruntime.Runtime) startedRuntime {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)

	go func() { done <- rt.Run(ctx) }()

	return startedRuntime{cancel: cancel, done: done}
}

func (s startedRuntime) stop(b *testing.B) {
	b.Helper()
	s.cancel()

	if err := <-s.done; err != nil {
		b.Fatal(err)
	}
}

// percentile is the sorted times' value at fraction (nearest rank), as in the
// Rust benchmark.
func percentile(times []time.Duration, fraction float64) time.Duration {
	if len(times) == 0 {
		return 0
	}

	rank := min(max(int(float64(len(times))*fraction+0.999999999), 1), len(times))

	return times[rank-1]
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// BenchmarkRuntimeChain: Rust runtime chain latency. A sample: update the head
// resource in c0, wait on a watch of the tail resource in c{links} until it
// carries the new value; a tenth as many samples again run first, unrecorded.
func BenchmarkRuntimeChain(b *testing.B) {
	for _, chain := range []struct{ links, samples int }{{10, 2_000}, {100, 300}} {
		b.Run(fmt.Sprintf("links=%d", chain.links), func(b *testing.B) {
			var times []time.Duration

			for range b.N {
				times = append(times, chainLatency(b, chain.links, chain.samples, 0)...)
			}

			slices.Sort(times)
			b.ReportMetric(micros(percentile(times, 0.5)), "median-µs")
			b.ReportMetric(micros(percentile(times, 0.9)), "p90-µs")
			b.ReportMetric(micros(percentile(times, 0.99)), "p99-µs")
			b.ReportMetric(micros(times[len(times)-1]), "max-µs")
		})
	}
}

// BenchmarkRuntimeNeighbour: the chain of ten beside busy neighbours, each a
// controller none of the links reads that crunches for about 8 ms per
// reconcile and that a goroutine wakes every millisecond by writing its
// input, from before the first sample until after the last: one, then two
// (as many as GOMAXPROCS).
func BenchmarkRuntimeNeighbour(b *testing.B) {
	for _, busy := range []int{1, 2} {
		b.Run(fmt.Sprintf("busy=%d", busy), func(b *testing.B) {
			var times []time.Duration

			for range b.N {
				times = append(times, chainLatency(b, 10, neighbourSamples, busy)...)
			}

			slices.Sort(times)
			b.ReportMetric(micros(percentile(times, 0.5)), "median-µs")
			b.ReportMetric(micros(percentile(times, 0.9)), "p90-µs")
			b.ReportMetric(micros(percentile(times, 0.99)), "p99-µs")
			b.ReportMetric(micros(times[len(times)-1]), "max-µs")
		})
	}
}

func chainLatency(b *testing.B, links, samples, neighbours int) []time.Duration {
	b.Helper()

	st := newState()
	rt := newRuntime(b, st)

	for index := range links {
		if err := rt.RegisterController(linkController{index: index}); err != nil {
			b.Fatal(err)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	for index := range neighbours {
		from := fmt.Sprintf("busy%d", index)

		ctrl := crunchController{name: fmt.Sprintf("neighbour%d", index), from: from, to: from + "-out", rounds: neighbourRounds}
		if err := rt.RegisterController(ctrl); err != nil {
			b.Fatal(err)
		}

		if err := st.Create(ctx, newNum(from, "x", 0)); err != nil {
			b.Fatal(err)
		}
	}

	head := newNum(chainNamespace(0), "x", 0)
	if err := st.Create(ctx, head); err != nil {
		b.Fatal(err)
	}

	running := start(rt)

	// The tail's collection gets one write per sample and the next sample
	// waits for it, so the watch is at most one event behind the state: it
	// cannot fall out of the history (100 events), and an Errored event fails
	// the run.
	events := make(chan state.Event, 64)
	tail := resource.NewMetadata(chainNamespace(links), numType, "x", resource.VersionUndefined)

	if err := st.Watch(ctx, tail, events); err != nil {
		b.Fatal(err)
	}

	waitFor := func(value int64) {
		timeout := time.After(waitLimit)

		for {
			select {
			case event := <-events:
				switch event.Type {
				case state.Created, state.Updated:
					num, ok := event.Resource.(*Num)
					if !ok {
						b.Fatalf("the tail is not a Num: %T", event.Resource)
					}

					if num.TypedSpec().Value == value {
						return
					}
				case state.Errored:
					b.Fatalf("the tail watch failed: %v", event.Error)
				case state.Destroyed, state.Bootstrapped, state.Noop:
				}
			case <-timeout:
				b.Fatalf("the tail did not reach %d", value)
			}
		}
	}

	waitFor(0)

	for index := range neighbours {
		stopWriter := startNeighbourWriter(ctx, b, st, fmt.Sprintf("busy%d", index))
		defer stopWriter()
	}

	warmUp := samples / 10
	times := make([]time.Duration, 0, samples)

	for value := int64(1); value <= int64(warmUp+samples); value++ {
		begin := time.Now()

		if _, err := safe.StateUpdateWithConflicts(ctx, st, head.Metadata(), func(num *Num) error {
			num.TypedSpec().Value = value

			return nil
		}); err != nil {
			b.Fatal(err)
		}

		waitFor(value)

		if value > int64(warmUp) {
			times = append(times, time.Since(begin))
		}
	}

	cancel()
	running.stop(b)

	return times
}

// startNeighbourWriter waits until the neighbour reading namespace from has
// reconciled once, then writes its input every millisecond until the
// returned function is called (which waits for the writer to end).
func startNeighbourWriter(ctx context.Context, b *testing.B, st state.State, from resource.Namespace) func() {
	b.Helper()

	output := resource.NewMetadata(from+"-out", textType, "x", resource.VersionUndefined)
	deadline := time.Now().Add(waitLimit)

	for {
		if _, err := st.Get(ctx, output); err == nil {
			break
		}

		pollPause(b, deadline)
	}

	input := resource.NewMetadata(from, numType, "x", resource.VersionUndefined)
	writerCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)

	go func() {
		ticker := time.NewTicker(time.Millisecond)
		defer ticker.Stop()

		for value := int64(1); ; value++ {
			select {
			case <-writerCtx.Done():
				done <- nil

				return
			case <-ticker.C:
			}

			if _, err := safe.StateUpdateWithConflicts(writerCtx, st, input, func(num *Num) error {
				num.TypedSpec().Value = value

				return nil
			}); err != nil && writerCtx.Err() == nil {
				done <- err

				return
			}
		}
	}()

	return func() {
		stop()

		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRuntimeParallel: four independent controllers, each over its own
// 2,000 preloaded inputs, each input crunched for about 80 µs before its
// output is written; timed from Run until every output exists; median of 5 runs.
func BenchmarkRuntimeParallel(b *testing.B) {
	var runs []time.Duration

	for range b.N {
		for range transformRuns {
			runs = append(runs, parallelPreloaded(b))
		}
	}

	slices.Sort(runs)
	b.ReportMetric(millis(percentile(runs, 0.5)), "median-ms")
	b.ReportMetric(millis(runs[0]), "min-ms")
	b.ReportMetric(millis(runs[len(runs)-1]), "max-ms")
}

func parallelPreloaded(b *testing.B) time.Duration {
	b.Helper()

	st := newState()
	rt := newRuntime(b, st)
	ctx := context.Background()

	for index := range parallelCount {
		from := fmt.Sprintf("p%d", index)

		ctrl := crunchController{name: fmt.Sprintf("parallel%d", index), from: from, to: from + "-out", rounds: parallelRounds}
		if err := rt.RegisterController(ctrl); err != nil {
			b.Fatal(err)
		}

		for id := range parallelInputs {
			if err := st.Create(ctx, newNum(from, fmt.Sprintf("n%06d", id), int64(id))); err != nil {
				b.Fatal(err)
			}
		}
	}

	begin := time.Now()
	running := start(rt)
	deadline := begin.Add(waitLimit)

	for index := range parallelCount {
		outputs := resource.NewMetadata(fmt.Sprintf("p%d-out", index), textType, "", resource.VersionUndefined)

		for {
			list, err := st.List(ctx, outputs)
			if err != nil {
				b.Fatal(err)
			}

			if len(list.Items) >= parallelInputs {
				break
			}

			pollPause(b, deadline)
		}
	}

	elapsed := time.Since(begin)

	last := resource.NewMetadata(fmt.Sprintf("p%d-out", parallelCount-1), textType, fmt.Sprintf("n%06d", parallelInputs-1), resource.VersionUndefined)

	output, err := safe.StateGet[*Text](ctx, st, last)
	if err != nil {
		b.Fatal(err)
	}

	if want := strconv.FormatUint(crunch(parallelInputs-1, parallelRounds), 10); output.TypedSpec().Value != want {
		b.Fatalf("a parallel controller wrote %q, not %q", output.TypedSpec().Value, want)
	}

	running.stop(b)

	return elapsed
}

// BenchmarkRuntimeTransform: Rust runtime transform throughput, preloaded: the
// 100,000 inputs exist before the runtime starts; timed from Run until all
// outputs exist; median of 5 runs.
func BenchmarkRuntimeTransform(b *testing.B) {
	for _, queue := range []bool{false, true} {
		name := "reconcile"
		if queue {
			name = "queue"
		}

		b.Run(name, func(b *testing.B) {
			var runs []time.Duration

			for range b.N {
				for range transformRuns {
					runs = append(runs, transformPreloaded(b, queue))
				}
			}

			slices.Sort(runs)
			median := percentile(runs, 0.5)
			b.ReportMetric(millis(median), "median-ms")
			b.ReportMetric(millis(runs[0]), "min-ms")
			b.ReportMetric(millis(runs[len(runs)-1]), "max-ms")
			b.ReportMetric(transformSize/median.Seconds(), "resources/s")
		})
	}
}

func transformPreloaded(b *testing.B, queue bool) time.Duration {
	b.Helper()

	st := newState()
	rt := newRuntime(b, st)

	var err error
	if queue {
		err = rt.RegisterQController(queueTransform{})
	} else {
		err = rt.RegisterController(transformController{})
	}

	if err != nil {
		b.Fatal(err)
	}

	ctx := context.Background()

	for index := range transformSize {
		if err := st.Create(ctx, newNum(transformIn, fmt.Sprintf("n%06d", index), int64(index))); err != nil {
			b.Fatal(err)
		}
	}

	begin := time.Now()
	running := start(rt)

	// Outputs are written in about ID order: wait for the last one, then until
	// all are there, polling every millisecond as the Rust benchmark does.
	last := resource.NewMetadata(transformOut, textType, fmt.Sprintf("n%06d", transformSize-1), resource.VersionUndefined)
	outputs := resource.NewMetadata(transformOut, textType, "", resource.VersionUndefined)
	deadline := begin.Add(waitLimit)

	for {
		if _, err := st.Get(ctx, last); err == nil {
			break
		}

		pollPause(b, deadline)
	}

	for {
		list, err := st.List(ctx, outputs)
		if err != nil {
			b.Fatal(err)
		}

		if len(list.Items) >= transformSize {
			break
		}

		pollPause(b, deadline)
	}

	elapsed := time.Since(begin)

	output, err := safe.StateGet[*Text](ctx, st, last)
	if err != nil {
		b.Fatal(err)
	}

	if want := strconv.Itoa(transformSize - 1); output.TypedSpec().Value != want {
		b.Fatalf("the transform wrote %q, not %q", output.TypedSpec().Value, want)
	}

	running.stop(b)

	return elapsed
}

func pollPause(b *testing.B, deadline time.Time) {
	b.Helper()

	if time.Now().After(deadline) {
		b.Fatal("the transform did not finish")
	}

	time.Sleep(time.Millisecond)
}
