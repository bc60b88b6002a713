package shaders

// What a backend needs, beside the sources, to build umbra's pipelines: the
// variants its probe chooses among, each shader's bind group layout and
// entry points. Both backends (internal/gpu through wgpu, internal/webgpu
// through a browser's WebGPU) build from these, so a variant or a binding
// is named once.

// TeamCandidates are the team widths (invocations per row) a probe
// self-tests and times. Which is fastest depends on the device: a team as
// wide as its subgroup lets a row's sum close with shuffles alone (32 on
// NVIDIA, 8 on lavapipe), while wide teams leave each invocation only a
// few loads of a 768-float row.
var TeamCandidates = []uint32{8, 16, 32, 64}

// Variant is one scoring configuration a probe may choose: a team width
// and whether batches stage their queries in workgroup memory.
type Variant struct {
	Team   uint32
	Staged bool
}

// Variants lists every variant a probe may choose, for one reduction
// (subgroup shuffles or the tree; the device decides which exist).
func Variants() []Variant {
	var out []Variant
	for _, team := range TeamCandidates {
		out = append(out, Variant{Team: team}, Variant{Team: team, Staged: true})
	}
	return out
}

// BindingKind is how a shader declares one binding.
type BindingKind uint8

const (
	ReadOnlyStorage BindingKind = iota // var<storage, read>
	Storage                            // var<storage, read_write>
	Uniform                            // var<uniform>
)

// Binding is one entry of a shader's bind group 0.
type Binding struct {
	Binding uint32
	Kind    BindingKind
}

// The bind group layouts of the shaders, in their binding order (each
// source's header comment describes them).
var (
	ScoresBindings = []Binding{{0, ReadOnlyStorage}, {1, ReadOnlyStorage}, {2, Storage}, {3, Uniform}} // scores.wgsl, quant.wgsl
	SelectBindings = []Binding{{0, ReadOnlyStorage}, {1, Storage}, {2, Storage}, {3, ReadOnlyStorage}} // select.wgsl
	FusedBindings  = []Binding{{0, ReadOnlyStorage}, {1, ReadOnlyStorage}, {2, Storage}, {3, Uniform}, {4, ReadOnlyStorage}}
	MergeBindings  = []Binding{{0, ReadOnlyStorage}, {1, Storage}, {2, Uniform}} // topk.wgsl's merge
	ReadBindings   = []Binding{{0, ReadOnlyStorage}, {1, Storage}, {2, Uniform}} // read.wgsl
)

// The entry points of the shaders.
const (
	ScoresEntry = "main"  // scores.wgsl, quant.wgsl, read.wgsl
	FusedEntry  = "scan"  // topk.wgsl's scan
	MergeEntry  = "merge" // topk.wgsl's merge
)

// SelectEntries are select.wgsl's entry points in the order a radix
// select dispatches them: eight rounds of hist and scan, then compact and
// (for k up to SortLimit) sort.
var SelectEntries = []string{"hist", "scan", "compact", "sort"}
