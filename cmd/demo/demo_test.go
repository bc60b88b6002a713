package main

import (
	"bytes"
	"image"
	"image/color"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/host"
	"github.com/umbravec/umbra/internal/testkit"
)

// TestMain lets a test run the demo's main in a child process (on the main
// thread, as glfw needs): the child role "demo", with the arguments one per
// line in UMBRA_DEMO_ARGS.
func TestMain(m *testing.M) {
	testkit.Main(m, map[string]func() int{"demo": func() int {
		var args []string
		if a := os.Getenv("UMBRA_DEMO_ARGS"); a != "" {
			args = strings.Split(a, "\n")
		}
		return run(args, os.Stdout, os.Stderr)
	}})
}

// runDemo runs the demo in a child process. env overrides the
// environment; an empty value removes the variable.
func runDemo(t *testing.T, env map[string]string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var kv []string
	for k, v := range env {
		kv = append(kv, k+"="+v)
	}
	out := testkit.Run(t, testkit.Child("demo", append(kv, "UMBRA_DEMO_ARGS="+strings.Join(args, "\n"))...))
	return out.Stdout, out.Stderr, out.Code
}

// testSeed is the demo's --seed for a test: testkit's, kept short.
func testSeed(t *testing.T) int64 {
	t.Helper()
	return int64(testkit.Seed(t) % 1_000_000)
}

func TestCheckDisplay(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	cases := []struct {
		name   string
		goos   string
		getenv func(string) string
		ok     bool
	}{
		{"linux without a display", "linux", env(), false},
		{"linux with X11", "linux", env("DISPLAY", ":0"), true},
		{"linux with Wayland", "linux", env("WAYLAND_DISPLAY", "wayland-0"), true},
		{"freebsd without a display", "freebsd", env(), false},
		{"macOS", "darwin", env(), true},
		{"Windows", "windows", env(), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := checkDisplay(c.goos, c.getenv)
			if c.ok {
				assert.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, errNoDisplay)
			assert.Contains(t, err.Error(), "DISPLAY and WAYLAND_DISPLAY are both unset")
			assert.Contains(t, err.Error(), "xvfb-run")
			assert.Contains(t, err.Error(), "--png")
		})
	}
}

func TestFlags(t *testing.T) {
	cases := []struct {
		args []string
		code int
		want string // in stderr (or stdout for --help)
	}{
		{[]string{"--k", "0"}, 2, "--k must be at least 1"},
		{[]string{"--n", "-1"}, 2, "--n must be positive"},
		{[]string{"--dim", "1"}, 2, "--dim must be at least 2"},
		{[]string{"--backend", "opengl"}, 2, `--backend: unknown backend "opengl": want vulkan, metal, dx12 or gl`},
		{[]string{"--power", "max"}, 2, `--power: unknown power "max": want high or low`},
		{[]string{"stray"}, 2, `unexpected argument "stray"`},
		{[]string{"--png", "x.png", "--frames", "0"}, 2, "--png needs --frames"},
		{[]string{"--png", "x.png", "--screenshot", "y.png"}, 2, "--screenshot is for the window"},
		{[]string{"--width", "8"}, 2, "--width and --height"},
		{[]string{"--resize-to", "wide"}, 2, "--resize-to wants WxH"},
		{[]string{"--check"}, 2, "--check needs one or more PNG files"},
		{[]string{"--no-such-flag"}, 2, "unknown flag --no-such-flag"},
		{[]string{"--k"}, 2, "--k: needs a value"},
		{[]string{"--help"}, 0, "go run ./cmd/demo --png demo.png"},
		{[]string{"-h"}, 0, "--backend=B"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(c.args, &out, &errb)
			assert.Equal(t, c.code, code)
			assert.Contains(t, out.String()+errb.String(), c.want)
		})
	}
	o, err := parseFlags([]string{"--png", "a.png"}, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, 30, o.frames, "--png defaults to 30 frames")
	o, err = parseFlags(nil, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, options{n: 20000, dim: 384, k: 10, seed: 1, width: 1280, height: 800, iters: 24, listen: "127.0.0.1:8025"}, o)

	// The shared adapter flags, and the flags' one-dash spelling.
	o, err = parseFlags([]string{"--png", "a.png", "-backend", "GL", "--adapter=llvmpipe", "-power", "low", "-v", "-frames=3"}, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, "gl", o.backend)
	assert.Equal(t, "llvmpipe", o.adapter)
	assert.True(t, o.lowPower)
	assert.True(t, o.verbose)
	assert.Equal(t, 3, o.frames)
	o, err = parseFlags([]string{"--check", "a.png", "b.png"}, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, []string{"a.png", "b.png"}, o.check)
}

func TestSyntheticSet(t *testing.T) {
	seed := testSeed(t)
	const n, dim = 3000, 64
	m := syntheticSet(n, dim, seed)
	require.Equal(t, n, m.rows)
	require.Len(t, m.data, n*dim)
	for i := 0; i < n; i++ {
		var ss float64
		for _, x := range m.row(i) {
			ss += float64(x) * float64(x)
		}
		require.InDelta(t, 1, ss, 1e-5, "row %d is not unit length", i)
	}
	assert.Equal(t, m.data, syntheticSet(n, dim, seed).data, "same seed, same set")
	assert.NotEqual(t, m.data, syntheticSet(n, dim, seed+1).data, "another seed, another set")

	// Rows of one cluster are more alike than rows of different clusters.
	rng := rand.New(rand.NewPCG(uint64(seed), 1))
	var same, other []float64
	for len(same) < 500 || len(other) < 500 {
		i, j := rng.IntN(n), rng.IntN(n)
		if i == j {
			continue
		}
		c := float64(dot32(m.row(i), m.row(j)))
		if m.cluster[i] == m.cluster[j] {
			same = append(same, c)
		} else {
			other = append(other, c)
		}
	}
	assert.Greater(t, mean(same), mean(other)+0.1, "cosine within clusters %.3f, across %.3f", mean(same), mean(other))
	sizes := map[int]int{}
	for _, c := range m.cluster {
		sizes[c]++
	}
	assert.Len(t, sizes, synthClusters, "every cluster has rows")
}

func TestLoadSet(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(uint64(seed), 2))
	dir := t.TempDir()
	const rows, dim = 50, 12
	data := make([]float32, rows*dim)
	for i := range data {
		data[i] = float32(rng.NormFloat64() * 3)
	}
	for _, name := range []string{"v.npy", "v.fvecs"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name)
			require.NoError(t, host.WriteMatrixFile(path, &host.Matrix{Rows: rows, Dim: dim, Data: append([]float32(nil), data...)}, ""))
			m, err := loadSet(path, 20)
			require.NoError(t, err)
			assert.Equal(t, 20, m.rows)
			assert.Equal(t, dim, m.dim)
			for i := 0; i < m.rows; i++ {
				assert.InDelta(t, 1, math.Sqrt(float64(dot32(m.row(i), m.row(i)))), 1e-5)
				// Same direction as the file's row.
				want := data[i*dim : (i+1)*dim]
				cos := float64(dot32(m.row(i), want)) / math.Sqrt(float64(dot32(want, want)))
				assert.InDelta(t, 1, cos, 1e-5)
			}
			all, err := loadSet(path, 0)
			require.NoError(t, err)
			assert.Equal(t, rows, all.rows)
		})
	}
	t.Run("zero row", func(t *testing.T) {
		bad := append([]float32(nil), data...)
		clear(bad[3*dim : 4*dim])
		path := filepath.Join(dir, "zero.npy")
		require.NoError(t, host.WriteMatrixFile(path, &host.Matrix{Rows: rows, Dim: dim, Data: bad}, ""))
		_, err := loadSet(path, 0)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "row 3 has norm 0")
	})
	t.Run("missing file", func(t *testing.T) {
		_, err := loadSet(filepath.Join(dir, "nope.npy"), 0)
		assert.Error(t, err)
	})
}

// TestProjectionFindsPrincipalAxes checks the subspace iteration itself,
// on the float64 reference passes, against the top two eigenvectors of the
// covariance found by Jacobi rotations.
func TestProjectionFindsPrincipalAxes(t *testing.T) {
	seed := testSeed(t)
	const n, dim = 2000, 24
	m := syntheticSet(n, dim, seed)
	p := newCPUProjector(m)
	pr, err := fitProjection(p, n, dim, 300, seed)
	require.NoError(t, err)

	mu := make([]float64, dim)
	for i := 0; i < n; i++ {
		for j, x := range m.row(i) {
			mu[j] += float64(x) / n
		}
	}
	cov := make([][]float64, dim)
	for a := range cov {
		cov[a] = make([]float64, dim)
	}
	for i := 0; i < n; i++ {
		r := m.row(i)
		for a := 0; a < dim; a++ {
			for b := 0; b < dim; b++ {
				cov[a][b] += (float64(r[a]) - mu[a]) * (float64(r[b]) - mu[b])
			}
		}
	}
	vals, vecs := jacobiEigen(cov)
	t.Logf("top eigenvalues %.4g %.4g %.4g", vals[0], vals[1], vals[2])
	require.Greater(t, vals[1], 1.5*vals[2], "the test set should have a clear 2-D principal subspace")
	for b := 0; b < 2; b++ {
		// The axis lies in the span of the top two eigenvectors.
		var in float64
		for e := 0; e < 2; e++ {
			d := dot64(pr.basis[b], vecs[e])
			in += d * d
		}
		assert.InDelta(t, 1, in, 1e-6, "axis %d leaves the principal plane", b)
		assert.InDelta(t, 1, dot64(pr.basis[b], pr.basis[b]), 1e-9)
	}
	assert.InDelta(t, 0, dot64(pr.basis[0], pr.basis[1]), 1e-9)
	// The positions are the centred rows on the axes.
	for i := 0; i < n; i += 97 {
		var x, y float64
		for j, v := range m.row(i) {
			x += (float64(v) - mu[j]) * pr.basis[0][j]
			y += (float64(v) - mu[j]) * pr.basis[1][j]
		}
		assert.InDelta(t, x, p.pos[2*i], 1e-9)
		assert.InDelta(t, y, p.pos[2*i+1], 1e-9)
	}
}

// jacobiEigen returns the eigenvalues of the symmetric matrix a, largest
// first, and the eigenvectors as rows. a is overwritten.
func jacobiEigen(a [][]float64) ([]float64, [][]float64) {
	n := len(a)
	v := make([][]float64, n)
	for i := range v {
		v[i] = make([]float64, n)
		v[i][i] = 1
	}
	for sweep := 0; sweep < 100; sweep++ {
		var off float64
		for p := 0; p < n; p++ {
			for q := p + 1; q < n; q++ {
				off += a[p][q] * a[p][q]
			}
		}
		if off < 1e-30 {
			break
		}
		for p := 0; p < n; p++ {
			for q := p + 1; q < n; q++ {
				if math.Abs(a[p][q]) < 1e-300 {
					continue
				}
				theta := (a[q][q] - a[p][p]) / (2 * a[p][q])
				tn := math.Copysign(1, theta) / (math.Abs(theta) + math.Sqrt(theta*theta+1))
				c := 1 / math.Sqrt(tn*tn+1)
				s := tn * c
				for k := 0; k < n; k++ {
					akp, akq := a[k][p], a[k][q]
					a[k][p], a[k][q] = c*akp-s*akq, s*akp+c*akq
				}
				for k := 0; k < n; k++ {
					apk, aqk := a[p][k], a[q][k]
					a[p][k], a[q][k] = c*apk-s*aqk, s*apk+c*aqk
				}
				for k := 0; k < n; k++ {
					vkp, vkq := v[k][p], v[k][q]
					v[k][p], v[k][q] = c*vkp-s*vkq, s*vkp+c*vkq
				}
			}
		}
	}
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	for i := 0; i < n; i++ { // selection sort, largest first
		for j := i + 1; j < n; j++ {
			if a[idx[j]][idx[j]] > a[idx[i]][idx[i]] {
				idx[i], idx[j] = idx[j], idx[i]
			}
		}
	}
	vals := make([]float64, n)
	vecs := make([][]float64, n)
	for r, i := range idx {
		vals[r] = a[i][i]
		vecs[r] = make([]float64, n)
		for k := 0; k < n; k++ {
			vecs[r][k] = v[k][i]
		}
	}
	return vals, vecs
}

func TestViewAndPath(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(uint64(seed), 3))
	pos := make([]float32, 2*5000)
	for i := range pos {
		pos[i] = float32(rng.NormFloat64()*3 + 10)
	}
	v := fitView(pos, 640, 400)
	inside := 0
	for i := 0; i < len(pos)/2; i++ {
		px, py := v.toPixel(pos[2*i], pos[2*i+1])
		if px >= 0 && px < 640 && py >= 0 && py < 400 {
			inside++
		}
		x, y := v.toLayout(px, py)
		require.InDelta(t, pos[2*i], x, 1e-3)
		require.InDelta(t, pos[2*i+1], y, 1e-3)
	}
	assert.Greater(t, inside, 98*len(pos)/2/100, "the view frames at least 98%% of the points")

	p := newQueryPath(pos, v, 6, seed)
	require.Len(t, p.stops, 6)
	for _, s := range p.stops {
		px, py := v.toPixel(s[0], s[1])
		assert.True(t, px > 0 && px < 640 && py > 0 && py < 400, "stop %v is off the picture", s)
	}
	const frames = 30
	x, y := p.at(p.frameStop(frames-1, frames))
	assert.Equal(t, p.stops[5], [2]float32{x, y}, "the last frame rests on the last stop")
	x, y = p.at(p.frameStop(0, frames))
	assert.Equal(t, p.stops[0], [2]float32{x, y})
	x, y = p.at(6) // wraps around
	assert.Equal(t, p.stops[0], [2]float32{x, y})

	// The query row is the row drawn nearest the point.
	i := rng.IntN(len(pos) / 2)
	assert.Equal(t, i, nearestRow(pos, pos[2*i], pos[2*i+1]))
}

func TestCheckPicture(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(uint64(seed), 4))
	img := image.NewNRGBA(image.Rect(0, 0, 200, 120))
	bg := color.NRGBA{9, 10, 15, 255}
	for i := 0; i < len(img.Pix); i += 4 {
		copy(img.Pix[i:], []byte{bg.R, bg.G, bg.B, 255})
	}
	err := checkPicture(measure(img))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "blank")

	for i := 0; i < 4000; i++ { // points of many colours
		img.SetNRGBA(rng.IntN(200), rng.IntN(120), color.NRGBA{uint8(rng.IntN(200)), uint8(rng.IntN(256)), uint8(rng.IntN(256)), 255})
	}
	err = checkPicture(measure(img))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "ring colour")

	for a := 0.0; a < 2*math.Pi; a += 0.01 { // one ring
		for r := 7.0; r <= 9; r += 0.5 {
			img.SetNRGBA(100+int(r*math.Cos(a)), 60+int(r*math.Sin(a)), ringColor)
		}
	}
	s := measure(img)
	assert.NoError(t, checkPicture(s), "%s", s)
}

func dot32(a, b []float32) float32 {
	var s float32
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

func mean(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}
