package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/bench/peers"
)

// PeerResult is another library's figures on the same data and queries,
// checked against the same float64 reference as the tiers.
type PeerResult struct {
	Name    string `json:"name"` // chromem-go, faiss
	Version string `json:"version,omitempty"`
	Index   string `json:"index,omitempty"` // what was searched: Collection.QueryEmbedding, IndexFlatIP, IndexFlatL2
	Premise string `json:"premise"`
	// Threads is the peer's own thread count where it reports one
	// (faiss.omp_get_max_threads()).
	Threads int `json:"threads,omitempty"`
	// Skipped is true when the peer cannot run here (not installed, or not
	// for this metric); Install says how to get it.
	Skipped    bool   `json:"skipped,omitempty"`
	SkipReason string `json:"skip_reason,omitempty"`
	Install    string `json:"install,omitempty"`
	Error      string `json:"error,omitempty"`

	// One query per call, queries in turn as the tiers have them.
	Timing
	// RatioVsUmbra is this peer's median over the fallback tier's median
	// (above 1: umbra is faster); RatioVsResident the same over the
	// resident tier's.
	RatioVsUmbra    *float64 `json:"ratio_vs_umbra,omitempty"`
	RatioVsResident *float64 `json:"ratio_vs_resident,omitempty"`

	// The batch: every query of Batch.Queries answered by one call (or a
	// loop, for a peer without a batch call).
	BatchPremise         string    `json:"batch_premise,omitempty"`
	BatchMedianMS        *float64  `json:"batch_median_ms,omitempty"`
	BatchMinMS           *float64  `json:"batch_min_ms,omitempty"`
	BatchMaxMS           *float64  `json:"batch_max_ms,omitempty"`
	BatchJitter          *float64  `json:"batch_jitter,omitempty"`
	BatchGroupsMS        []float64 `json:"batch_groups_ms,omitempty"`
	BatchRatioVsUmbra    *float64  `json:"batch_ratio_vs_umbra,omitempty"`
	BatchRatioVsResident *float64  `json:"batch_ratio_vs_resident,omitempty"`
	BatchTopKMatch       *bool     `json:"batch_topk_match,omitempty"`

	// The checks: query 0's top-k (TopKMatch, TopKExact) and every batch
	// query's (BatchTopKMatch) against float64 references; MaxAbsDiff is
	// over the scores of all those hits.
	MaxAbsDiff  *float64 `json:"max_abs_diff,omitempty"`
	TopKMatch   *bool    `json:"topk_match,omitempty"`
	TopKExact   *bool    `json:"topk_exact,omitempty"`
	Pass        *bool    `json:"pass,omitempty"`
	CheckDetail string   `json:"check_detail,omitempty"`

	oneCheck, batchCheck *answerCheck
}

// BatchResult is umbra's SearchBatch over the batch the peers answer.
type BatchResult struct {
	Queries     int         `json:"queries"`
	QueriesFrom string      `json:"queries_from"`
	Repeat      int         `json:"repeat"`
	Runs        int         `json:"runs"`
	Tiers       []BatchTier `json:"tiers"`
}

// BatchTier is one umbra index answering the batch in one SearchBatch call.
type BatchTier struct {
	Name    string `json:"name"` // fallback or resident
	Premise string `json:"premise"`
	Error   string `json:"error,omitempty"`
	Timing
	PerQueryMS  *float64 `json:"per_query_ms,omitempty"` // median / queries
	MaxAbsDiff  *float64 `json:"max_abs_diff,omitempty"`
	TopKMatch   *bool    `json:"topk_match,omitempty"`
	TopKExact   *bool    `json:"topk_exact,omitempty"`
	Pass        *bool    `json:"pass,omitempty"`
	CheckDetail string   `json:"check_detail,omitempty"`
}

// peerState is what a run with peers keeps between its steps.
type peerState struct {
	chromem    *peers.Chromem
	chromemRes *PeerResult
	faissRes   *PeerResult
	python     string

	batch [][]float32
	refs  []*Reference // one per batch query
}

func (p *peerState) results() []PeerResult {
	var out []PeerResult
	for _, r := range []*PeerResult{p.chromemRes, p.faissRes} {
		if r != nil {
			r.finish()
			out = append(out, *r)
		}
	}
	return out
}

// answerCheck is how a set of answers compares with their references.
type answerCheck struct {
	diff         float64
	match, exact bool
	pass         bool
	detail       string
}

// compare checks answers[i] against refs[i] for every i: the top-k IDs up
// to near-ties, and the scores given.
func (h *harness) compare(refs []*Reference, answers [][]umbra.Hit) *answerCheck {
	c := &answerCheck{match: true, exact: true, pass: true}
	if len(answers) != len(refs) {
		*c = answerCheck{detail: fmt.Sprintf("%d answers for %d queries", len(answers), len(refs))}
		return c
	}
	which := func(i int) string {
		if len(refs) == 1 {
			return ""
		}
		return fmt.Sprintf("batch query %d: ", i)
	}
	for i, ref := range refs {
		d := ref.HitsDiff(answers[i])
		c.diff = max(c.diff, d)
		tk := ref.CompareTopK(answers[i], h.opt.K)
		c.exact = c.exact && tk.Exact
		switch {
		case !tk.Match:
			c.match = false
			if c.pass {
				c.detail = fmt.Sprintf("%stop-%d differs from the float64 reference from rank %d on", which(i), h.opt.K, tk.Rank)
			}
			c.pass = false
		case d > ref.Threshold:
			if c.pass {
				c.detail = fmt.Sprintf("%stop-%d scores off by %.3g > threshold %.3g", which(i), h.opt.K, d, ref.Threshold)
			}
			c.pass = false
		}
	}
	return c
}

// finish turns the peer's checks into its report fields.
func (p *PeerResult) finish() {
	if p.Skipped {
		return
	}
	var diff float64
	pass := p.Error == ""
	for _, c := range []*answerCheck{p.oneCheck, p.batchCheck} {
		if c == nil {
			continue
		}
		diff = max(diff, c.diff)
		if !c.pass && pass {
			p.CheckDetail = c.detail
		}
		pass = pass && c.pass
	}
	if p.oneCheck != nil {
		p.TopKMatch, p.TopKExact = ptr(p.oneCheck.match), ptr(p.oneCheck.exact)
	}
	if p.batchCheck != nil {
		p.BatchTopKMatch = ptr(p.batchCheck.match)
	}
	if p.oneCheck != nil || p.batchCheck != nil {
		p.MaxAbsDiff = finite(diff)
		p.Pass = ptr(pass)
	}
}

const (
	chromemBatchPremise  = "the batch as one chromem-go QueryEmbedding call after another (it has no batch query)"
	faissBatchPremise    = "the batch as one index.search call on a (queries, dim) float32 array (normalised first under cosine)"
	fallbackBatchPremise = "engine SearchBatch on the fallback's index, every query in one call, validated and prepared first"
	residentBatchPremise = "engine SearchBatch on the resident GPU index, every query in one call, top-k selected on the device"
)

// openPeers fills chromem-go with the run's vectors and checks its answer
// for query 0, and finds a Python that imports FAISS.
func (h *harness) openPeers(ctx context.Context) {
	c := &PeerResult{Name: "chromem-go", Version: peers.ChromemVersion(), Index: "Collection.QueryEmbedding",
		Premise: peers.ChromemPremise, BatchPremise: chromemBatchPremise}
	h.peers.chromemRes = c
	if h.opt.Metric != umbra.Cosine {
		c.Skipped, c.SkipReason = true, fmt.Sprintf("chromem-go computes cosine similarity only (this run: %s)", h.opt.Metric)
	} else {
		h.progress("filling a chromem-go collection with %d vectors", h.w.N())
		col, err := peers.NewChromem(ctx, h.w.Data, h.w.Dim)
		if err == nil {
			var top []umbra.Hit
			if top, err = col.Search(ctx, h.w.Queries[0], h.opt.K); err == nil {
				c.oneCheck = h.compare([]*Reference{h.ref}, [][]umbra.Hit{top})
				h.peers.chromem = col
			}
		}
		if err != nil {
			c.Error = err.Error()
		}
	}

	index := "IndexFlatIP"
	if h.opt.Metric == umbra.L2 {
		index = "IndexFlatL2"
	}
	f := &PeerResult{Name: "faiss", Index: index, BatchPremise: faissBatchPremise, Premise: peers.FAISSPremise(index, 0, h.opt.Metric)}
	h.peers.faissRes = f
	h.progress("looking for a Python with faiss and numpy")
	py, err := peers.FindFAISS(ctx, h.opt.Pythons)
	if err != nil {
		f.Skipped, f.Install = true, peers.FAISSInstall
		f.SkipReason = "no Python here imports faiss and numpy (" + err.Error() + ")"
		return
	}
	h.peers.python = py
}

// peerItems are the in-process peers timed in the tiers' groups.
func (h *harness) peerItems() []*timed {
	col, c := h.peers.chromem, h.peers.chromemRes
	if col == nil || c.Error != "" {
		return nil
	}
	return []*timed{{
		name: "chromem-go",
		call: func(ctx context.Context, slot int) (time.Duration, error) {
			start := time.Now()
			_, err := col.Search(ctx, h.query(slot), h.opt.K)
			return time.Since(start), err
		},
		fail: func(err error) { c.Error = err.Error() },
		done: func(g []float64) { c.Timing = timingOf(g) },
	}}
}

// runPeers times the batch (umbra's SearchBatch and chromem-go, in groups
// of their own), then runs FAISS in its process, and states every peer as a
// ratio to umbra.
func (h *harness) runPeers(ctx context.Context) error {
	if h.opt.Batch > 0 {
		if err := h.timeBatch(ctx); err != nil {
			return err
		}
	}
	if h.peers.python != "" {
		h.runFAISS(ctx)
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	h.peerRatios()
	return nil
}

// timeBatch checks every batch answer against a float64 reference of its
// query, then times the batch calls interleaved in their own groups.
func (h *harness) timeBatch(ctx context.Context) error {
	qs := h.w.BatchQueries(h.opt.Batch)
	h.peers.batch = qs
	br := &BatchResult{Queries: len(qs), QueriesFrom: h.w.BatchFrom, Repeat: h.opt.BatchRepeat, Runs: h.opt.BatchRuns}
	if len(h.w.Batch) < len(qs) {
		br.QueriesFrom = fmt.Sprintf("the run's %d queries, repeated in turn", len(h.w.Queries))
	}
	h.rep.Batch = br
	h.peers.refs = make([]*Reference, len(qs))
	for i, q := range qs {
		h.progress("float64 reference of batch query %d/%d", i+1, len(qs))
		h.peers.refs[i] = NewReference(h.w.Data, h.w.Dim, q, h.opt.Metric)
		if h.opt.Threshold > 0 {
			h.peers.refs[i].Threshold = h.opt.Threshold
		}
	}
	k := h.opt.K
	var items []*timed
	// The umbra tiers that ran answer the batch on their own index.
	type umbraBatch struct {
		t       Tier
		ix      *engine.Index
		premise string
	}
	var ub []umbraBatch
	if r := h.result[TierFallback]; r != nil && r.Ran() && r.Error == "" && h.cpuIx != nil {
		ub = append(ub, umbraBatch{TierFallback, h.cpuIx, fallbackBatchPremise})
	}
	if r := h.result[TierResident]; r != nil && r.Ran() && r.Error == "" && h.gpuIx != nil {
		ub = append(ub, umbraBatch{TierResident, h.gpuIx, residentBatchPremise})
	}
	br.Tiers = make([]BatchTier, len(ub))
	for i, u := range ub {
		bt := &br.Tiers[i]
		bt.Name, bt.Premise = string(u.t), u.premise
		h.progress("checking the batch answers of %s", u.t)
		all, err := u.ix.SearchBatch(ctx, qs, k)
		if err != nil {
			bt.Error = err.Error()
			bt.Pass = ptr(false)
			continue
		}
		c := h.compare(h.peers.refs, all)
		bt.MaxAbsDiff, bt.TopKMatch, bt.TopKExact, bt.Pass = finite(c.diff), ptr(c.match), ptr(c.exact), ptr(c.pass)
		bt.CheckDetail = c.detail
		ix := u.ix
		items = append(items, &timed{
			name: "batch " + string(u.t),
			call: func(ctx context.Context, _ int) (time.Duration, error) {
				start := time.Now()
				_, err := ix.SearchBatch(ctx, qs, k)
				return time.Since(start), err
			},
			fail: func(err error) { bt.Error, bt.Pass = err.Error(), ptr(false) },
			done: func(g []float64) {
				bt.Timing = timingOf(g)
				if bt.Ran() {
					bt.PerQueryMS = finite(*bt.MedianMS / float64(len(qs)))
				}
			},
		})
	}
	if col, c := h.peers.chromem, h.peers.chromemRes; col != nil && c.Error == "" {
		h.progress("checking the batch answers of chromem-go")
		all, err := col.SearchBatch(ctx, qs, k)
		if err != nil {
			c.Error = err.Error()
		} else {
			c.batchCheck = h.compare(h.peers.refs, all)
			items = append(items, &timed{
				name: "batch chromem-go",
				call: func(ctx context.Context, _ int) (time.Duration, error) {
					start := time.Now()
					_, err := col.SearchBatch(ctx, qs, k)
					return time.Since(start), err
				},
				fail: func(err error) { c.Error = err.Error() },
				done: func(g []float64) {
					t := timingOf(g)
					c.BatchMedianMS, c.BatchMinMS, c.BatchMaxMS, c.BatchJitter, c.BatchGroupsMS = t.MedianMS, t.MinMS, t.MaxMS, t.Jitter, t.GroupsMS
				},
			})
		}
	}
	if len(items) == 0 {
		return nil
	}
	return h.rotate(ctx, "batch: ", items, h.opt.BatchRepeat, h.opt.BatchRuns, h.opt.Warmup)
}

// runFAISS runs faiss_flat.py on the same data, queries and batch, with
// the same groups, and checks its answers.
func (h *harness) runFAISS(ctx context.Context) {
	f := h.peers.faissRes
	h.progress("FAISS: writing the data and timing %s in %s", f.Index, h.peers.python)
	res, err := peers.RunFAISS(ctx, peers.FAISSRun{Python: h.peers.python, Metric: h.opt.Metric, K: h.opt.K,
		Repeat: h.opt.Repeat, Runs: h.opt.Runs, Warmup: h.opt.Warmup,
		BatchRepeat: h.opt.BatchRepeat, BatchRuns: h.opt.BatchRuns}, h.w.Data, h.w.Dim, h.w.Queries, h.peers.batch)
	if err != nil {
		f.Error = err.Error()
		return
	}
	f.Version, f.Threads, f.Index = res.Version, res.Threads, res.Index
	f.Premise = peers.FAISSPremise(res.Index, res.Threads, h.opt.Metric)
	if blas := peers.DescribeBLAS(res.BLAS); blas != "" {
		f.Premise += "; " + blas
	}
	f.Timing = timingOf(res.GroupsMS)
	f.oneCheck = h.compare([]*Reference{h.ref}, [][]umbra.Hit{res.Top})
	if len(h.peers.batch) > 0 {
		t := timingOf(res.BatchGroupsMS)
		f.BatchMedianMS, f.BatchMinMS, f.BatchMaxMS, f.BatchJitter, f.BatchGroupsMS = t.MedianMS, t.MinMS, t.MaxMS, t.Jitter, t.GroupsMS
		f.batchCheck = h.compare(h.peers.refs, res.BatchTop)
	}
}

// ratio is a over b, absent when either is.
func ratioOf(a, b *float64) *float64 {
	if a == nil || b == nil || *b <= 0 {
		return nil
	}
	return finite(*a / *b)
}

// peerRatios states every peer's medians as multiples of umbra's.
func (h *harness) peerRatios() {
	var fb, res, bfb, bres *float64
	if r := h.result[TierFallback]; r != nil && r.Error == "" {
		fb = r.MedianMS
	}
	if r := h.result[TierResident]; r != nil && r.Error == "" {
		res = r.MedianMS
	}
	if b := h.rep.Batch; b != nil {
		for _, t := range b.Tiers {
			if t.Error != "" {
				continue
			}
			switch Tier(t.Name) {
			case TierFallback:
				bfb = t.MedianMS
			case TierResident:
				bres = t.MedianMS
			}
		}
	}
	for _, p := range []*PeerResult{h.peers.chromemRes, h.peers.faissRes} {
		if p == nil || p.Skipped || p.Error != "" {
			continue
		}
		p.RatioVsUmbra, p.RatioVsResident = ratioOf(p.MedianMS, fb), ratioOf(p.MedianMS, res)
		p.BatchRatioVsUmbra, p.BatchRatioVsResident = ratioOf(p.BatchMedianMS, bfb), ratioOf(p.BatchMedianMS, bres)
	}
}
