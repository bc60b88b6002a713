package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/alecthomas/kong"

	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/host"
)

var searchCommand = &command{
	name:     "search",
	summary:  "find the k most similar rows of a data file for each query",
	synopsis: "search --data FILE --queries FILE --k K [--metric cosine|dot|l2] [--device auto|gpu|cpu] [--backend B] [--adapter NAME] [--power high|low] [--json]",
	help: `
For every row of --queries, find the K rows of --data most similar to it.
The search is exact: every row is scored. IDs are row numbers of --data,
counting from 0; results are best first, equal scores by lower ID.

Files are .npy (2-D, float32 or float16, little-endian, C order) or .fvecs,
chosen by extension. Both must have the same dimension and at least one
row. A row with NaN or infinite values, or under cosine a zero row, is an
error that names it.

Flags:
  --data FILE      the vectors to search (required)
  --queries FILE   the query vectors (required)
  --k K            results per query, at least 1 (required); K above the
                   number of rows returns every row
  --metric M       cosine (default), dot (inner product), or l2 (squared
                   Euclidean distance; lower is better, and it is the score)
  --device D       auto (default): a hardware GPU that passes the probe,
                   else the CPU, without failing; gpu: any adapter that
                   passes the probe, software ones included, or fail;
                   cpu: the pure-Go path only` + selectionHelp + `
                   (--backend, --adapter and --power apply to auto and gpu)
  --json           print JSON (schema: cmd/umbra/README.md)

Output: comment lines starting with '#' name the backend, adapter and
inputs; then a table with one line per hit: query, rank, id, score.`,
	example: `
umbra search --data docs.npy --queries questions.npy --k 5
umbra search --data base.fvecs --queries query.fvecs --k 100 --metric l2 --device gpu --json`,
}

type searchCmd struct {
	Data      string         `name:"data" placeholder:"FILE"`
	Queries   string         `name:"queries" placeholder:"FILE"`
	K         count          `name:"k" placeholder:"K"`
	Metric    choice         `name:"metric" choices:"cosine,dot,l2" default:"cosine" placeholder:"M"`
	Device    choice         `name:"device" choices:"auto,gpu,cpu" default:"auto" placeholder:"D"`
	Selection selectionFlags `embed:""`
	JSON      bool           `name:"json"`
	// Args catches positional arguments, to point at the flags.
	Args []string `arg:"" optional:"" hidden:""`
}

func (s *searchCmd) Validate(kctx *kong.Context) error {
	switch len(s.Args) {
	case 0:
	case 3:
		return usagef("unexpected arguments %s: search takes its inputs as flags: umbra search --data %s --queries %s --k %s",
			strings.Join(s.Args, " "), s.Args[0], s.Args[1], s.Args[2])
	default:
		return usagef("unexpected argument %q: search takes its inputs as flags: --data FILE --queries FILE --k K", s.Args[0])
	}
	for _, name := range []string{"data", "queries", "k"} {
		if !given(kctx, name) {
			return usagef("missing required flag --%s", name)
		}
	}
	if s.K < 1 {
		return usagef("--k must be at least 1, got %d", s.K)
	}
	return nil
}

// searchJSON is what search --json prints; README.md documents it.
type searchJSON struct {
	Backend   string       `json:"backend"` // "gpu" or "cpu": what served these searches
	Adapter   *adapterJSON `json:"adapter"` // the GPU the index holds, or null
	Route     string       `json:"route"`   // under --device auto with a GPU: how searches are routed
	CPUKernel string       `json:"cpu_kernel"`
	Reason    string       `json:"reason"` // why --device auto fell back to the CPU
	Hint      string       `json:"hint"`
	Metric    string       `json:"metric"`
	K         int          `json:"k"`
	Dim       int          `json:"dim"`
	Rows      int          `json:"rows"`
	Data      string       `json:"data"`
	Queries   string       `json:"queries"`
	Results   []resultJSON `json:"results"`
}

type resultJSON struct {
	Hits []hitJSON `json:"hits"`
}

type hitJSON struct {
	ID    uint64 `json:"id"`
	Score score  `json:"score"`
}

// score is a float32 printed with the fewest digits that read back to the
// same float32. JSON has no infinities (a dot product or squared distance
// can overflow float32), so those print as the strings "+Inf" and "-Inf".
type score float32

func (s score) text() string {
	f := float64(s)
	switch {
	case math.IsInf(f, 1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	case math.IsNaN(f):
		return "NaN"
	}
	return strconv.FormatFloat(f, 'g', -1, 32)
}

func (s score) MarshalJSON() ([]byte, error) {
	f := float64(s)
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return []byte(`"` + s.text() + `"`), nil
	}
	return []byte(s.text()), nil
}

func (o *searchCmd) Run(ctx context.Context, e *env) error {
	// The choices the grammar allows are the engine's names: these cannot fail.
	metric, err := engine.ParseMetric(string(o.Metric))
	if err != nil {
		return usagef("%s", cause(err))
	}
	device, err := engine.ParseDevice(string(o.Device))
	if err != nil {
		return usagef("%s", cause(err))
	}
	data, err := loadMatrix(ctx, e, "--data", o.Data)
	if err != nil {
		return err
	}
	if data.Rows == 0 {
		return fmt.Errorf("--data %s holds no vectors (0 rows): nothing to search", o.Data)
	}
	queries, err := loadMatrix(ctx, e, "--queries", o.Queries)
	if err != nil {
		return err
	}
	if queries.Rows == 0 {
		return fmt.Errorf("--queries %s holds no vectors (0 rows): nothing to search for", o.Queries)
	}
	if queries.Dim != data.Dim {
		return fmt.Errorf("dimension mismatch: --queries %s has dimension %d, --data %s has dimension %d",
			o.Queries, queries.Dim, o.Data, data.Dim)
	}

	cfg := engine.Config{Dim: data.Dim, Metric: metric, Device: device, Adapter: o.Selection.adapterSelect()}
	addCtx, done := e.progress.engineStep(ctx, fmt.Sprintf("indexing %d rows", data.Rows))
	ix, err := engine.New(ctx, cfg)
	if err != nil {
		done()
		var ae *engine.AdapterError
		if errors.As(err, &ae) && ae.Hint != "" {
			return fmt.Errorf("--device %s: %s; %s", device, cliWording(cause(err)), cliWording(oneLine(ae.Hint)))
		}
		return fmt.Errorf("--device %s: %s (run 'umbra probe' to see every adapter)", device, cause(err))
	}
	defer ix.Close()
	_, err = ix.AddFlat(addCtx, data.Data)
	done()
	if err != nil {
		return fmt.Errorf("--data %s: %s", o.Data, cause(err))
	}
	rows := data.Rows
	data = nil // the index holds its own copy

	qs := make([][]float32, queries.Rows)
	for i := range qs {
		qs[i] = queries.Row(i)
	}
	searchCtx, done := e.progress.engineStep(ctx, fmt.Sprintf("searching %d queries in %d rows", len(qs), rows))
	var tr engine.Trace
	all, err := ix.SearchBatch(engine.WithTrace(searchCtx, &tr), qs, int(o.K))
	done()
	if err != nil {
		if errors.Is(err, engine.ErrNonFinite) || errors.Is(err, engine.ErrZeroVector) || errors.Is(err, engine.ErrDimMismatch) {
			return fmt.Errorf("--queries %s: %s", o.Queries, cause(err))
		}
		return fmt.Errorf("search: %s", cause(err))
	}

	info := ix.Info()
	out := searchJSON{
		Backend:   string(servedBy(info, tr)),
		Route:     routeOf(info),
		CPUKernel: info.CPUKernel,
		Reason:    cliWording(oneLine(info.Reason)),
		Hint:      cliWording(info.Hint),
		Metric:    metric.String(),
		K:         int(o.K),
		Dim:       ix.Dim(),
		Rows:      ix.Len(),
		Data:      o.Data,
		Queries:   o.Queries,
		Results:   make([]resultJSON, len(all)),
	}
	if info.Backend == engine.BackendGPU {
		a := adapterOf(info.Adapter)
		out.Adapter = &a
	}
	for i, hits := range all {
		r := resultJSON{Hits: make([]hitJSON, len(hits))}
		for j, h := range hits {
			r.Hits[j] = hitJSON{ID: h.ID, Score: score(h.Score)}
		}
		out.Results[i] = r
	}
	if o.JSON {
		// One line: results can run to many thousands of hits.
		return json.NewEncoder(e.stdout).Encode(out)
	}
	return writeSearchText(e.stdout, out)
}

// servedBy says which path served the search: under Device Auto an index
// holding a GPU routes each call to the path expected to finish first, so
// Info.Backend alone does not say; the trace records it.
func servedBy(info engine.Info, tr engine.Trace) engine.Backend {
	if tr.Backend != "" {
		return tr.Backend
	}
	return info.Backend
}

// loadMatrix reads a data file, naming the flag it came from in errors.
func loadMatrix(ctx context.Context, e *env, flagName, path string) (*host.Matrix, error) {
	if err := notDir(flagName, path); err != nil {
		return nil, err
	}
	done := e.progress.step("loading " + path)
	m, err := host.ReadMatrixFile(ctx, path)
	done()
	if err != nil {
		return nil, fmt.Errorf("%s: %s", flagName, cause(err))
	}
	return m, nil
}

// notDir refuses a directory where a vector file belongs, before the
// reader judges it by its extension or fails twice over reading it.
func notDir(flagName, path string) error {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return fmt.Errorf("%s %s is a directory: want a .npy or .fvecs file", flagName, path)
	}
	return nil
}

func writeSearchText(w io.Writer, r searchJSON) error {
	switch {
	case r.Adapter != nil && r.Backend == string(engine.BackendGPU):
		fmt.Fprintf(w, "# backend gpu: %s (%s, %s), driver %s\n", r.Adapter.Name, r.Adapter.Backend, r.Adapter.Type, r.Adapter.Driver)
	case r.Adapter != nil:
		fmt.Fprintf(w, "# backend cpu (%s), faster than %s (%s) for this size: %s\n", r.CPUKernel, r.Adapter.Name, r.Adapter.Backend, r.Route)
	case r.Reason != "":
		fmt.Fprintf(w, "# backend cpu (%s); GPU not used: %s (see 'umbra probe')\n", r.CPUKernel, r.Reason)
	default:
		fmt.Fprintf(w, "# backend cpu (%s)\n", r.CPUKernel)
	}
	fmt.Fprintf(w, "# metric %s, k %d; data %s: %d rows of dimension %d; queries %s: %d rows\n",
		r.Metric, r.K, r.Data, r.Rows, r.Dim, r.Queries, len(r.Results))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "query\trank\tid\tscore")
	for q, res := range r.Results {
		for rank, h := range res.Hits {
			fmt.Fprintf(tw, "%d\t%d\t%d\t%s\n", q, rank+1, h.ID, h.Score.text())
		}
	}
	return tw.Flush()
}

// routeOf says in words how Auto routes searches, or nothing when it does
// not route (CPU, or Device GPU).
func routeOf(info engine.Info) string {
	if info.Routing == nil {
		return ""
	}
	return info.Routing.String()
}
