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

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/cmd/internal/cmdline"
	"github.com/umbravec/umbra/diag"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/host"
	"github.com/umbravec/umbra/meta"
)

func (*searchCmd) Help() string {
	return `For every query, find the K vectors of --data, of the store --store, or
of the cluster collection (--cluster, --collection), most similar to it.
The queries are the rows of --queries, the vector stored under a key
(--near KEY, with --store or --cluster), or vectors given inline
(--vector '0.1,-2,3e-4', repeated for more). The search is exact: every vector is scored.
IDs are row numbers of --data, counting from 0, or the store's IDs;
results are best first, equal scores by lower ID. A hit on a store's
vector that has a key shows the key too.

Files are .npy (2-D, float32 or float16, little-endian, C order) or .fvecs,
chosen by extension. Both must have the same dimension and at least one
row. A row with NaN or infinite values, or under cosine a zero row, is an
error that names it.

Searching a store opens it read-only, without its lock (STORE.lock): while
another process writes the store (umbra add or delete, or a program using
the engine), search sees every change that process had acknowledged when
search read the store, and none made later. Search never changes the
store.

--allow restricts the search to the vectors with the IDs in a file (IDs
not stored are ignored); --allow-keys, with --store or --cluster, to the
vectors with the keys in a file, one key per line (empty lines are
skipped; a key the store or collection does not hold is an error naming
it). Either way the answer is the
true top K of that subset, and a file naming nothing admits nothing.

--backend, --adapter and --power apply to --device auto and gpu.

Output: comment lines starting with '#' name the backend, adapter and
inputs; then a table with one line per hit: query, rank, id, score, and
key when a hit has one. A query with no hits (every vector filtered out,
or none within the threshold) has the line 'QUERY  (no hits)'.`
}

func (*searchCmd) Examples() []string {
	return []string{
		"umbra search --data docs.npy --queries questions.npy --k 5",
		"umbra search --data base.fvecs --queries query.fvecs --k 100 --metric l2 --device gpu --json",
		"umbra search --store docs.umbra --queries questions.npy --min-score 0.8 --k 20 --allow mine.txt",
		"umbra search --store notes.umbra --queries q.npy --k 10 --allow-keys alice-keys.txt --json",
		"umbra search --store notes.umbra --near alice/m1 --k 5",
		"umbra search --cluster nats://127.0.0.1:4222 --creds node1/creds/client.nk --collection docs --vector '0.1,0.5,-0.2' --k 3",
	}
}

type searchCmd struct {
	Data        string          `name:"data" placeholder:"FILE" help:"the vectors to search"`
	Store       string          `name:"store" placeholder:"STORE" help:"a store written by 'umbra build', instead of --data; its metric applies"`
	Queries     string          `name:"queries" placeholder:"FILE" help:"the query vectors (one of --queries, --near, --vector is required)"`
	Near        string          `name:"near" placeholder:"KEY" help:"(with --store or --cluster) one query: the vector stored under KEY (it finds itself first, at score 1 under cosine)"`
	Vector      []string        `name:"vector" sep:"none" placeholder:"V" help:"a query given inline, its components separated by commas: --vector '0.1,-2,3e-4' (--vector=-0.1,2 when the first is negative); repeat the flag for more queries"`
	K           int             `name:"k" placeholder:"K" help:"results per query, at least 1 (required without a threshold); K above the number of vectors returns all. With a threshold, K caps the hits per query"`
	Allow       string          `name:"allow" placeholder:"FILE" help:"search only the vectors with these IDs: an ID file (text, one decimal ID per line, or a 1-D int64/uint64 .npy); IDs that are not there are ignored"`
	AllowKeys   string          `name:"allow-keys" placeholder:"FILE" help:"(with --store or --cluster) search only the vectors with these keys: text, one key per line; a key not held is an error. Not with --allow"`
	Where       string          `name:"where" placeholder:"JSON" help:"(with --store or --cluster) search only the vectors whose metadata matches this filter: {\"user\": \"alice\"}, {\"ts\": {\"$gte\": 1700000000}}, {\"tags\": {\"$contains\": \"work\"}}, $eq $ne $gt $gte $lt $lte $in $nin, $and/$or over lists, $not. Combines with --allow and --allow-keys"`
	WithPayload bool            `name:"with-payload" help:"(with --store or --cluster) print each hit's payload"`
	MinScore    *limit          `name:"min-score" placeholder:"T" help:"(cosine, dot) every vector scoring at least T"`
	MaxDistance *limit          `name:"max-distance" placeholder:"T" help:"(l2) every vector within squared distance T"`
	Metric      choice          `name:"metric" choices:"cosine,dot,l2" default:"cosine" placeholder:"M" help:"cosine, dot (inner product) or l2 (squared Euclidean distance; lower is better, and it is the score). With --store, the store's metric; a different one is an error"`
	Device      choice          `name:"device" choices:"auto,gpu,cpu" default:"auto" placeholder:"D" help:"auto: a hardware GPU that passes the probe, else the CPU, without failing; gpu: any adapter that passes the probe, software ones included, or fail; cpu: the pure-Go path only"`
	Selection   cmdline.Adapter `embed:""`
	JSON        bool            `name:"json" help:"print JSON (schema: cmd/umbra/README.md)"`
	// Args catches positional arguments, to point at the flags.
	Args         []string `arg:"" optional:"" hidden:""`
	clusterFlags `embed:""`

	metricGiven bool         // --metric was on the command line
	filter      *meta.Filter // --where, parsed
}

func (s *searchCmd) Validate(kctx *kong.Context) error {
	if err := s.clusterOnly(); err != nil {
		return err
	}
	switch len(s.Args) {
	case 0:
	case 3:
		return usagef("unexpected arguments %s: search takes its inputs as flags: umbra search --data %s --queries %s --k %s",
			strings.Join(s.Args, " "), s.Args[0], s.Args[1], s.Args[2])
	default:
		return usagef("unexpected argument %q: search takes its inputs as flags: --data FILE --queries FILE --k K", s.Args[0])
	}
	switch dataGiven, storeGiven := cmdline.Given(kctx, "data"), cmdline.Given(kctx, "store"); {
	case s.Cluster != "" && (dataGiven || storeGiven):
		return usagef("--cluster excludes --data and --store")
	case s.Cluster != "" && cmdline.Given(kctx, "allow-keys") && cmdline.Given(kctx, "allow"):
		return usagef("--allow and --allow-keys exclude each other: give the subset by IDs or by keys")
	case s.Cluster != "":
		if err := s.validateCluster(""); err != nil {
			return err
		}
	case !dataGiven && !storeGiven:
		return usagef("missing required flag --data (or --store)")
	case dataGiven && storeGiven:
		return usagef("--data and --store exclude each other: search a vector file or a store")
	case cmdline.Given(kctx, "allow-keys") && !storeGiven:
		return usagef("--allow-keys needs --store: the rows of --data have no keys (use --allow with row numbers)")
	case (cmdline.Given(kctx, "where") || cmdline.Given(kctx, "with-payload")) && !storeGiven:
		return usagef("--where and --with-payload need --store: the rows of --data have no metadata or payloads")
	case cmdline.Given(kctx, "near") && !storeGiven:
		return usagef("--near needs --store or --cluster: the rows of --data have no keys (give the query with --vector)")
	case cmdline.Given(kctx, "allow-keys") && cmdline.Given(kctx, "allow"):
		return usagef("--allow and --allow-keys exclude each other: give the subset by IDs or by keys")
	}
	given := 0
	for _, f := range []string{"queries", "near", "vector"} {
		if cmdline.Given(kctx, f) {
			given++
		}
	}
	switch {
	case given == 0:
		return usagef("missing the queries: give --queries FILE, --near KEY or --vector V")
	case given > 1:
		return usagef("--queries, --near and --vector exclude each other: give the queries one way")
	}
	for i, v := range s.Vector {
		if _, err := parseVector(v); err != nil {
			return usagef("--vector %d: %s", i+1, err)
		}
	}
	if s.Where != "" {
		f, err := meta.ParseWhere([]byte(s.Where))
		if err != nil {
			return usagef("--where: %s", err)
		}
		s.filter = &f
	}
	_, ranged := s.threshold()
	if s.MinScore != nil && s.MaxDistance != nil {
		return usagef("--min-score and --max-distance exclude each other: --min-score is for cosine and dot, --max-distance for l2")
	}
	switch {
	case cmdline.Given(kctx, "k") && s.K < 1:
		return usagef("--k must be at least 1, got %d", s.K)
	case !cmdline.Given(kctx, "k") && !ranged:
		return usagef("missing required flag --k (or a threshold: --min-score, --max-distance)")
	}
	s.metricGiven = cmdline.Given(kctx, "metric")
	if s.Store == "" && s.Cluster == "" {
		metric, err := umbra.ParseMetric(string(s.Metric))
		if err != nil {
			return usagef("%s", cause(err))
		}
		return s.checkThreshold(metric, "--metric is")
	}
	return nil
}

// limit is a --min-score or --max-distance value: a finite number.
type limit float64

func (l *limit) Decode(ctx *kong.DecodeContext) error {
	s, err := cmdline.Value(ctx)
	if err != nil {
		return err
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(v, 0) || math.IsNaN(v) || math.Abs(v) > math.MaxFloat32 {
		return fmt.Errorf("invalid value %q: want a finite number", s)
	}
	*l = limit(v)
	return nil
}

// searchJSON is what search --json prints; README.md documents it.
type searchJSON struct {
	Backend     string       `json:"backend"` // "gpu" or "cpu": what served these searches
	Adapter     *adapterJSON `json:"adapter"` // the GPU the index holds, or null
	Route       string       `json:"route"`   // under --device auto with a GPU: how searches are routed
	CPUKernel   string       `json:"cpu_kernel"`
	Reason      string       `json:"reason"` // why --device auto fell back to the CPU
	Hint        string       `json:"hint"`
	Metric      string       `json:"metric"`
	K           int          `json:"k"`
	Dim         int          `json:"dim"`
	Rows        int          `json:"rows"`
	Data        string       `json:"data"`                 // --data as given, "" with --store
	Store       string       `json:"store"`                // --store as given, "" with --data
	Collection  string       `json:"collection,omitempty"` // with --cluster: the collection
	Cluster     string       `json:"cluster,omitempty"`    // with --cluster: the cluster and its shards, in words
	Queries     string       `json:"queries"`              // --queries as given, "" with --near or --vector
	Near        string       `json:"near,omitempty"`       // --near as given: the key whose vector is the query
	Allow       string       `json:"allow"`                // --allow as given, or ""
	AllowKeys   string       `json:"allow_keys"`           // --allow-keys as given, or ""
	Where       string       `json:"where,omitempty"`      // --where as given
	MinScore    *float64     `json:"min_score"`            // the threshold, or null
	MaxDistance *float64     `json:"max_distance"`
	Results     []resultJSON `json:"results"`
}

type resultJSON struct {
	Hits []hitJSON `json:"hits"`
}

type hitJSON struct {
	ID      uint64          `json:"id"`
	Key     string          `json:"key,omitempty"` // only where the row has one
	Score   score           `json:"score"`
	Payload json.RawMessage `json:"payload,omitempty"` // with --with-payload, where the row has one
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

func (o *searchCmd) Run(ctx context.Context, e *env) (err error) {
	// The choices the grammar allows are the engine's names: these cannot fail.
	metric, err := umbra.ParseMetric(string(o.Metric))
	if err != nil {
		return usagef("%s", cause(err))
	}
	device, err := engine.ParseDevice(string(o.Device))
	if err != nil {
		return usagef("%s", cause(err))
	}
	if err := o.Selection.CheckDevice(device); err != nil {
		return usagef("%s", err)
	}
	var t *target
	switch {
	case o.Cluster != "":
		if t, err = openTarget(ctx, e, "", &o.clusterFlags, true, engine.Config{}); err != nil {
			return err
		}
	case o.Store != "":
		ix, err := o.openStore(ctx, e, device)
		if err != nil {
			return err
		}
		t = &target{Collection: ix, label: o.Store, store: ix}
	}
	if t != nil {
		defer t.close(&err)
		s, err := t.Summary(ctx)
		if err != nil {
			return fmt.Errorf("%s: %s", t.what(), cause(err))
		}
		metric = s.Metric
		if o.Cluster != "" {
			if err := o.checkThreshold(metric, t.label+" ranks by"); err != nil {
				return err
			}
		}
	}
	var allow []uint64
	if o.Allow != "" {
		if allow, err = readIDs(ctx, e, "--allow", o.Allow); err != nil {
			return err
		}
	}
	if o.AllowKeys != "" {
		if allow, err = o.allowedKeys(ctx, e, t); err != nil {
			return err
		}
	}
	var data *host.Matrix
	if t == nil {
		data, err = loadMatrix(ctx, e, "--data", o.Data)
		if err != nil {
			return err
		}
		if data.Rows == 0 {
			return fmt.Errorf("--data %s holds no vectors (0 rows): nothing to search", o.Data)
		}
	}
	qs, queriesLabel, err := o.queries(ctx, e, t)
	if err != nil {
		return err
	}
	dim := 0
	if t != nil {
		s, err := t.Summary(ctx)
		if err != nil {
			return fmt.Errorf("%s: %s", t.what(), cause(err))
		}
		dim = s.Dim
		if len(qs[0]) != dim {
			return fmt.Errorf("dimension mismatch: %s has dimension %d, %s holds dimension %d",
				queriesLabel, len(qs[0]), t.what(), dim)
		}
	} else {
		if len(qs[0]) != data.Dim {
			return fmt.Errorf("dimension mismatch: %s has dimension %d, --data %s has dimension %d",
				queriesLabel, len(qs[0]), o.Data, data.Dim)
		}
		ix, err := o.indexData(ctx, e, data, metric, device)
		if err != nil {
			return err
		}
		t = indexTarget(ix, o.Data)
		defer t.close(&err)
		dim, data = data.Dim, nil // the index holds its own copy
	}
	rows, err := t.rows(ctx)
	if err != nil {
		return err
	}
	var opts []umbra.SearchOption
	if o.Allow != "" || o.AllowKeys != "" {
		// An allow file with no IDs (or keys) admits nothing: the filter
		// narrows to no hits, it never falls away.
		opts = append(opts, umbra.Allow(allow...))
	}
	if o.filter != nil {
		opts = append(opts, umbra.Where(*o.filter))
	}
	if o.WithPayload {
		opts = append(opts, umbra.WithPayload())
	}
	threshold, ranged := o.threshold()
	searchCtx, done := e.progress.engineStep(ctx, fmt.Sprintf("searching %d queries in %d rows", len(qs), rows))
	var tr diag.Trace
	var all [][]umbra.Hit
	if ranged {
		if o.K > 0 {
			opts = append(opts, umbra.MaxHits(int(o.K)))
		}
		all = make([][]umbra.Hit, len(qs))
		for i, q := range qs {
			if all[i], err = t.SearchRange(diag.WithTrace(searchCtx, &tr), q, float32(threshold), opts...); err != nil {
				err = fmt.Errorf("query %d: %w", i, err)
				break
			}
		}
	} else {
		all, err = t.SearchBatch(diag.WithTrace(searchCtx, &tr), qs, int(o.K), opts...)
	}
	done()
	if err != nil {
		if errors.Is(err, umbra.ErrNonFinite) || errors.Is(err, umbra.ErrZeroVector) || errors.Is(err, umbra.ErrDimMismatch) {
			return fmt.Errorf("%s: %s", queriesLabel, cause(err))
		}
		if errors.Is(err, umbra.ErrInvalidFilter) {
			return fmt.Errorf("--where: %s", cause(err))
		}
		return fmt.Errorf("search: %s", cause(err))
	}

	out := searchJSON{
		Metric:    metric.String(),
		K:         int(o.K),
		Dim:       dim,
		Rows:      rows,
		Data:      o.Data,
		Store:     o.Store,
		Queries:   o.Queries,
		Near:      o.Near,
		Allow:     o.Allow,
		AllowKeys: o.AllowKeys,
		Where:     o.Where,
		Results:   make([]resultJSON, len(all)),
	}
	if t.store != nil {
		info := t.store.Info()
		out.Backend, out.Route, out.CPUKernel = servedBy(info, tr), routeOf(info), info.CPUKernel
		out.Reason, out.Hint = oneLine(info.Reason), cliHint(info.Hint)
		if info.Device == engine.GPU {
			a := adapterOf(info.Adapter)
			out.Adapter = &a
		}
	} else {
		s, err := t.Summary(ctx)
		if err != nil {
			return fmt.Errorf("%s: %s", t.what(), cause(err))
		}
		out.Backend, out.Collection, out.Cluster = "cluster", o.Collection, s.Backend
	}
	if given := float64(threshold); ranged && metric.HigherIsBetter() {
		out.MinScore = &given
	} else if ranged {
		out.MaxDistance = &given
	}
	for i, hits := range all {
		r := resultJSON{Hits: make([]hitJSON, len(hits))}
		for j, h := range hits {
			r.Hits[j] = hitJSON{ID: h.ID, Key: h.Key, Score: score(h.Score), Payload: payloadJSON([]byte(h.Payload))}
		}
		out.Results[i] = r
	}
	if o.JSON {
		// One line: results can run to many thousands of hits.
		return json.NewEncoder(e.stdout).Encode(out)
	}
	return writeSearchText(e.stdout, out)
}

// queries returns the queries --queries, --near or --vector give, and how
// messages and the output name them: --queries' file; "near KEY" (the
// vector t stores under KEY); "vector" (the inline ones).
func (o *searchCmd) queries(ctx context.Context, e *env, t *target) ([][]float32, string, error) {
	switch {
	case o.Near != "":
		label := "--near " + strconv.Quote(o.Near)
		recs, err := t.Get(ctx, umbra.Selection{Keys: []string{o.Near}, Vectors: true})
		if err != nil {
			return nil, "", fmt.Errorf("%s: %s", label, cause(err))
		}
		if len(recs) == 0 {
			return nil, "", fmt.Errorf("%s: %s not stored in %s", label, someKeys([]string{o.Near}), t.label)
		}
		return [][]float32{recs[0].Vector}, label, nil
	case len(o.Vector) > 0:
		qs := make([][]float32, len(o.Vector))
		for i, v := range o.Vector {
			qs[i], _ = parseVector(v) // Validate parsed them
		}
		if len(qs) > 1 {
			for i, q := range qs[1:] {
				if len(q) != len(qs[0]) {
					return nil, "", usagef("--vector %d has %d components, the first %d", i+2, len(q), len(qs[0]))
				}
			}
		}
		return qs, "--vector", nil
	}
	queries, err := loadMatrix(ctx, e, "--queries", o.Queries)
	if err != nil {
		return nil, "", err
	}
	if queries.Rows == 0 {
		return nil, "", fmt.Errorf("--queries %s holds no vectors (0 rows): nothing to search for", o.Queries)
	}
	qs := make([][]float32, queries.Rows)
	for i := range qs {
		qs[i] = queries.Row(i)
	}
	return qs, "--queries " + o.Queries, nil
}

// parseVector reads an inline vector: finite numbers separated by commas.
func parseVector(s string) ([]float32, error) {
	parts := strings.Split(s, ",")
	v := make([]float32, len(parts))
	for i, p := range parts {
		f, err := strconv.ParseFloat(strings.TrimSpace(p), 32)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return nil, fmt.Errorf("component %d is %q: want finite numbers separated by commas, like --vector '0.1,-2,3e-4'", i+1, strings.TrimSpace(p))
		}
		v[i] = float32(f)
	}
	return v, nil
}

// allowedKeys reads --allow-keys and returns the IDs the store holds under
// its keys; a key it does not hold is an error naming it (a mistyped key
// would otherwise narrow the search silently).
func (o *searchCmd) allowedKeys(ctx context.Context, e *env, t *target) ([]uint64, error) {
	return o.allowKeyIDs(ctx, e, t.label, func(keys []string) (func(string) (uint64, bool), error) {
		held, err := storedKeys(ctx, t, keys)
		return func(k string) (uint64, bool) { id, ok := held[k]; return id, ok }, err
	})
}

// allowKeyIDs reads --allow-keys and maps each key to its ID through
// lookup; a key not held is an error naming it and where it was looked
// for.
func (o *searchCmd) allowKeyIDs(ctx context.Context, e *env, where string, lookup func([]string) (func(string) (uint64, bool), error)) ([]uint64, error) {
	done := e.progress.step("loading " + o.AllowKeys)
	defer done()
	keys, _, err := readKeys(ctx, "--allow-keys", o.AllowKeys, keySet)
	if err != nil {
		return nil, err
	}
	held, err := lookup(keys)
	if err != nil {
		return nil, fmt.Errorf("--allow-keys %s: %w", o.AllowKeys, err)
	}
	var missing []string
	ids := make([]uint64, 0, len(keys))
	for _, k := range keys {
		id, ok := held(k)
		if !ok {
			missing = append(missing, k)
		}
		ids = append(ids, id)
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("--allow-keys %s: %s not stored in %s", o.AllowKeys, someKeys(missing), where)
	}
	return ids, nil
}

// threshold returns --min-score or --max-distance, and whether one was given.
func (o *searchCmd) threshold() (float64, bool) {
	switch {
	case o.MinScore != nil:
		return float64(*o.MinScore), true
	case o.MaxDistance != nil:
		return float64(*o.MaxDistance), true
	}
	return 0, false
}

// checkThreshold refuses the threshold flag that does not fit metric: a
// similarity has a floor, a distance a ceiling.
func (o *searchCmd) checkThreshold(metric umbra.Metric, from string) error {
	switch {
	case o.MinScore != nil && !metric.HigherIsBetter():
		return usagef("--min-score is for cosine and dot, and %s %s (a distance, lower is better): use --max-distance", from, metric)
	case o.MaxDistance != nil && metric.HigherIsBetter():
		return usagef("--max-distance is for l2, and %s %s (a similarity, higher is better): use --min-score", from, metric)
	}
	return nil
}

// openStore opens --store on device and checks the flags that depend on
// its metric.
func (o *searchCmd) openStore(ctx context.Context, e *env, device engine.Device) (*engine.Index, error) {
	ix, err := openStoreReadOnly(ctx, e, o.Store, engine.Config{Device: device, Adapters: []engine.AdapterSelect{o.Selection.Select()}})
	if err != nil {
		if isDeviceError(err) {
			return nil, deviceError(device, err)
		}
		return nil, err
	}
	metric := ix.Metric()
	if o.metricGiven && string(o.Metric) != metric.String() {
		ix.Close()
		return nil, usagef("--metric %s: store %s ranks by %s, which it was built with (leave --metric out)", o.Metric, o.Store, metric)
	}
	if err := o.checkThreshold(metric, "store "+o.Store+" ranks by"); err != nil {
		ix.Close()
		return nil, err
	}
	return ix, nil
}

// indexData builds an index of --data's rows, IDs their row numbers.
func (o *searchCmd) indexData(ctx context.Context, e *env, data *host.Matrix, metric umbra.Metric, device engine.Device) (*engine.Index, error) {
	cfg := engine.Config{Dim: data.Dim, Metric: metric, Device: device, Adapters: []engine.AdapterSelect{o.Selection.Select()}}
	addCtx, done := e.progress.engineStep(ctx, fmt.Sprintf("indexing %d rows", data.Rows))
	defer done()
	ix, err := engine.New(ctx, cfg)
	if err != nil {
		return nil, deviceError(device, err)
	}
	if _, err = ix.Add(addCtx, umbra.Flat(data.Data, ix.Dim())); err != nil {
		ix.Close()
		return nil, fmt.Errorf("--data %s: %s", o.Data, cause(err))
	}
	return ix, nil
}

// deviceError words a failure to get the device --device asked for.
func deviceError(device engine.Device, err error) error {
	var ae *engine.AdapterError
	if errors.As(err, &ae) && ae.Hint.Code != "" {
		return fmt.Errorf("--device %s: %s; %s", device, cause(err), cliHint(ae.Hint))
	}
	return fmt.Errorf("--device %s: %s (run 'umbra probe' to see every adapter)", device, cause(err))
}

// servedBy says which path served the search: under Device Auto an index
// holding a GPU routes each call to the path expected to finish first, so
// Info.Device alone does not say; the trace records it.
func servedBy(info engine.Info, tr diag.Trace) string {
	if tr.Device != "" {
		return tr.Device
	}
	return info.Device.String()
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
	case r.Backend == "cluster":
		fmt.Fprintf(w, "# backend %s\n", r.Cluster)
	case r.Adapter != nil && r.Backend == engine.GPU.String():
		fmt.Fprintf(w, "# backend gpu: %s (%s, %s), driver %s\n", r.Adapter.Name, r.Adapter.Backend, r.Adapter.Type, r.Adapter.Driver)
	case r.Adapter != nil:
		fmt.Fprintf(w, "# backend cpu (%s), faster than %s (%s) for this size: %s\n", r.CPUKernel, r.Adapter.Name, r.Adapter.Backend, r.Route)
	case r.Reason != "":
		fmt.Fprintf(w, "# backend cpu (%s); GPU not used: %s (see 'umbra probe')\n", r.CPUKernel, r.Reason)
	default:
		fmt.Fprintf(w, "# backend cpu (%s)\n", r.CPUKernel)
	}
	bound := fmt.Sprintf("k %d", r.K)
	switch {
	case r.MinScore != nil:
		bound = "min score " + strconv.FormatFloat(*r.MinScore, 'g', -1, 64)
	case r.MaxDistance != nil:
		bound = "max distance " + strconv.FormatFloat(*r.MaxDistance, 'g', -1, 64)
	}
	if (r.MinScore != nil || r.MaxDistance != nil) && r.K > 0 {
		bound += fmt.Sprintf(", at most %d hits", r.K)
	}
	source := fmt.Sprintf("data %s: %d rows", r.Data, r.Rows)
	switch {
	case r.Store != "":
		source = fmt.Sprintf("store %s: %d vectors", r.Store, r.Rows)
	case r.Collection != "":
		source = fmt.Sprintf("collection %s: %d vectors", r.Collection, r.Rows)
	}
	if r.Allow != "" {
		source += ", only IDs in " + r.Allow
	}
	if r.AllowKeys != "" {
		source += ", only keys in " + r.AllowKeys
	}
	if r.Where != "" {
		source += ", only where " + r.Where
	}
	queries := r.Queries
	switch {
	case r.Near != "":
		queries = "near key " + textKey(r.Near)
	case queries == "":
		queries = "--vector"
	}
	fmt.Fprintf(w, "# metric %s, %s; %s of dimension %d; queries %s: %d rows\n",
		r.Metric, bound, source, r.Dim, queries, len(r.Results))
	// The key column is there when a hit has a key, last, where a key
	// with spaces cannot shift the columns before it.
	// The payload column, when a hit has a payload, comes last of all.
	keyed, paid := false, false
	for _, res := range r.Results {
		for _, h := range res.Hits {
			keyed = keyed || h.Key != ""
			paid = paid || h.Payload != nil
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := "query\trank\tid\tscore"
	if keyed {
		head += "\tkey"
	}
	if paid {
		head += "\tpayload"
	}
	fmt.Fprintln(tw, head)
	for q, res := range r.Results {
		if len(res.Hits) == 0 {
			fmt.Fprintf(tw, "%d\t(no hits)\n", q)
		}
		for rank, h := range res.Hits {
			line := fmt.Sprintf("%d\t%d\t%d\t%s", q, rank+1, h.ID, h.Score.text())
			if keyed {
				line += "\t" + textKey(h.Key)
			}
			if paid {
				line += "\t" + string(h.Payload)
			}
			fmt.Fprintln(tw, line)
		}
	}
	return tw.Flush()
}

// routeOf says in words how Auto routes searches, or nothing when it does
// not route (CPU, or Device GPU).
func routeOf(info engine.Info) string { return info.Routing }
