//go:build cgo && !nogpu

package main

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/oliverbestmann/webgpu/wgpu"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/engine/ondevice"
	"github.com/umbravec/umbra/host"
	"github.com/umbravec/umbra/internal/testkit"
)

// The GPU tests run on each backend with an adapter here: lavapipe
// (Vulkan) and llvmpipe (GL) in CI. A missing adapter skips the backend,
// or fails it under UMBRA_REQUIRE_GPU=1.
var testBackends = []string{"vulkan", "gl"}

// openTestSession opens a device on backend, or skips.
func openTestSession(t *testing.T, backend string) *session {
	t.Helper()
	inst, err := newInstance(backend)
	require.NoError(t, err)
	s, err := openSession(inst, options{backend: backend}, nil)
	if err != nil {
		testkit.NoGPU(t, "no %s adapter works: %v", backend, err)
	}
	t.Cleanup(s.release)
	t.Logf("adapter %s", s.info.String())
	return s
}

// TestOffscreenPNG renders through the whole offscreen path and checks the
// picture: not blank, and the top-k rings are in it.
func TestOffscreenPNG(t *testing.T) {
	seed := testSeed(t)
	for _, b := range testBackends {
		t.Run(b, func(t *testing.T) {
			openTestSession(t, b).release() // skip early without an adapter
			path := filepath.Join(t.TempDir(), "demo.png")
			var out, errb bytes.Buffer
			code := run([]string{"--png", path, "--frames", "3", "--n", "3000", "--dim", "64", "--k", "8",
				"--width", "400", "--height", "260", "--backend", b, "--seed", fmt.Sprint(seed)}, &out, &errb)
			require.Equal(t, 0, code, "stderr: %s", errb.String())
			assert.Contains(t, out.String(), "wrote "+path)
			assert.Contains(t, out.String(), "3000 × 64")

			f, err := os.Open(path)
			require.NoError(t, err)
			defer f.Close()
			img, err := png.Decode(f)
			require.NoError(t, err)
			assert.Equal(t, 400, img.Bounds().Dx())
			assert.Equal(t, 260, img.Bounds().Dy())
			s := measure(img)
			t.Logf("picture: %s", s)
			assert.NoError(t, checkPicture(s))
		})
	}
}

// TestOffscreenDataFile draws a user's file: rows read with
// host.ReadMatrixFile, the first --n of them.
func TestOffscreenDataFile(t *testing.T) {
	seed := testSeed(t)
	openTestSession(t, "vulkan").release()
	m := syntheticSet(2500, 32, seed)
	dir := t.TempDir()
	data := filepath.Join(dir, "vectors.npy")
	require.NoError(t, host.WriteMatrixFile(data, &host.Matrix{Rows: m.rows, Dim: m.dim, Data: m.data}, "<f2"))
	path := filepath.Join(dir, "data.png")
	var out, errb bytes.Buffer
	code := run([]string{"--png", path, "--frames", "2", "--data", data, "--n", "2000", "--k", "5",
		"--width", "300", "--height", "200", "--backend", "vulkan"}, &out, &errb)
	require.Equal(t, 0, code, "stderr: %s", errb.String())
	assert.Contains(t, out.String(), "2000 × 32")
	s, err := checkFile(path)
	t.Logf("picture: %s", s)
	assert.NoError(t, err)
}

// smallScene builds an umbra index on a device of backend and a scene
// over its rows, for a synthetic set. binding, when not 0, is the storage
// binding size the index is told to plan with, so that small sets span
// several chunks.
func smallScene(t *testing.T, backend string, n, dim int, seed int64, binding uint64) (*session, *scene, *memorySet, *ondevice.Index) {
	t.Helper()
	s := openTestSession(t, backend)
	set := syntheticSet(n, dim, seed)
	limits := s.limits
	if binding > 0 {
		limits.MaxStorageBufferBindingSize = binding
	}
	ix, err := ondevice.New(context.Background(), engine.Config{Dim: dim, Metric: umbra.Cosine}, s.adapter, s.device, &limits)
	require.NoError(t, err)
	t.Cleanup(func() { ix.Close() })
	_, err = ix.Add(context.Background(), umbra.Flat(set.data, ix.Dim()))
	require.NoError(t, err)
	sc, err := newScene(s, set, ix, 64, 64, 16)
	require.NoError(t, err)
	t.Cleanup(sc.release) // runs before the index closes
	if binding > 0 {
		require.Greater(t, len(sc.chunks), 1, "a %d-byte binding splits %d rows of dimension %d", binding, n, dim)
	}
	t.Logf("%d rows in %d chunks of the index", n, len(sc.chunks))
	return s, sc, set, ix
}

// chunkings are the index layouts the scene tests draw from: the rows in
// one chunk, and in several.
var chunkings = []struct {
	name    string
	binding uint64
}{{"one chunk", 0}, {"chunks", 64 << 10}}

// TestProjectionOnGPUMatchesCPU runs the projection's passes on the GPU,
// over the index's resident chunks, and in float64 on the CPU from the
// same start and compares the layouts.
func TestProjectionOnGPUMatchesCPU(t *testing.T) {
	seed := testSeed(t)
	for _, b := range testBackends {
		for _, ch := range chunkings {
			t.Run(b+"/"+ch.name, func(t *testing.T) {
				// 2,500 rows of dimension 50: partial blocks, a padded last
				// word, and more rows than one weighted-sum block.
				const n, dim, iters = 2500, 50, 12
				_, sc, set, _ := smallScene(t, b, n, dim, seed, ch.binding)
				gpu, err := fitProjection(sc, n, dim, iters, seed)
				require.NoError(t, err)
				require.NoError(t, sc.readPositions())

				ref := newCPUProjector(set)
				cpu, err := fitProjection(ref, n, dim, iters, seed)
				require.NoError(t, err)

				for a := 0; a < 2; a++ {
					assert.InDelta(t, 1, math.Abs(dot64(gpu.basis[a], cpu.basis[a])), 1e-4, "axis %d", a)
				}
				var spread, worst float64
				for i, want := range ref.pos {
					spread = max(spread, math.Abs(want))
					worst = max(worst, math.Abs(float64(sc.pos[i])-want))
				}
				t.Logf("largest |position| %.4g, largest GPU−CPU difference %.3g", spread, worst)
				assert.Less(t, worst, 1e-3*spread, "GPU layout departs from the float64 reference")
			})
		}
	}
}

// TestColouringUsesIndexScores checks what a frame is coloured by: the
// index's ScoreInto buffer holds every row's cosine (against float64) and
// exactly the scores the index's hits report, its best rows are the
// index's top k, and the bounds pass finds its range.
func TestColouringUsesIndexScores(t *testing.T) {
	seed := testSeed(t)
	for _, b := range testBackends {
		for _, ch := range chunkings {
			t.Run(b+"/"+ch.name, func(t *testing.T) {
				const n, dim, k = 3000, 40, 12
				s, sc, set, ix := smallScene(t, b, n, dim, seed, ch.binding)
				_, err := fitProjection(sc, n, dim, 4, seed)
				require.NoError(t, err)
				require.NoError(t, sc.readPositions())

				q := set.row(int(seed % n))
				hits, err := ix.Search(context.Background(), q, k)
				require.NoError(t, err)
				rings := make([]int, len(hits))
				for i, h := range hits {
					rings[i] = int(h.ID)
				}
				drawn, err := ix.ScoreInto(context.Background(), q)
				require.NoError(t, err)
				err = guard("frame", func() error {
					enc, err := s.device.TryCreateCommandEncoder(nil)
					if err != nil {
						return err
					}
					defer enc.Release()
					v := fitView(sc.pos, sc.width, sc.height)
					if err := sc.encode(enc, frameInput{scores: drawn, rings: rings, view: v}); err != nil {
						return err
					}
					return s.submit(enc)
				})
				require.NoError(t, err)
				raw, err := s.readBuffer(drawn.Buffer, n*4)
				require.NoError(t, err)
				scores := wgpu.FromBytes[float32](raw)
				for i := 0; i < n; i++ {
					want := dot64f(set.row(i), q)
					require.InDelta(t, want, scores[i], 1e-5, "row %d against float64", i)
				}
				for _, h := range hits {
					assert.Equal(t, h.Score, scores[h.ID], "row %d: drawn score vs the index's hit", h.ID)
				}
				order := make([]int, n)
				for i := range order {
					order[i] = i
				}
				slices.SortStableFunc(order, func(a, b int) int {
					switch {
					case scores[a] > scores[b]:
						return -1
					case scores[a] < scores[b]:
						return 1
					}
					return a - b
				})
				// The k-th score separates the top k unless a tie straddles it.
				if scores[order[k-1]]-scores[order[k]] > 1e-5 {
					assert.ElementsMatch(t, rings, order[:k], "top k of the drawn scores vs the index")
				}
				// The range the bounds pass found, decoded as draw.wgsl does.
				raw, err = s.readBuffer(sc.frame, frameBytes)
				require.NoError(t, err)
				lo := fromOrderKey(int32(leU32(raw[boundsAt:])))
				hi := fromOrderKey(int32(leU32(raw[boundsAt+4:])))
				assert.Equal(t, slices.Min(scores), lo)
				assert.Equal(t, slices.Max(scores), hi)
			})
		}
	}
}

// TestSceneRefusesAnotherIndex: a scene drawn from an index must find the
// set's rows there, all of them, live, row r under ID r.
func TestSceneRefusesAnotherIndex(t *testing.T) {
	seed := testSeed(t)
	s := openTestSession(t, "vulkan")
	set := syntheticSet(500, 16, seed)
	limits := s.limits
	ix, err := ondevice.New(context.Background(), engine.Config{Dim: 16}, s.adapter, s.device, &limits)
	require.NoError(t, err)
	defer ix.Close()
	_, err = ix.Add(context.Background(), umbra.Flat(set.data[:400*16], ix.Dim()))
	require.NoError(t, err)
	_, err = newScene(s, set, ix, 64, 64, 4)
	assert.ErrorContains(t, err, "the index holds 400 rows on the device, the demo draws 500")
	_, err = ix.Add(context.Background(), umbra.Flat(set.data[400*16:], ix.Dim()))
	require.NoError(t, err)
	require.NoError(t, ix.Delete(context.Background(), umbra.WithIDs(7)))
	_, err = newScene(s, set, ix, 64, 64, 4)
	assert.ErrorContains(t, err, "row 7 holds ID 7 (live: false)")
	require.NoError(t, ix.Close())
	_, err = newScene(s, set, ix, 64, 64, 4)
	assert.ErrorIs(t, err, umbra.ErrClosed)
}

// dot64f is the dot product of two float32 vectors in float64.
func dot64f(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

func leU32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

// fromOrderKey inverts order_key of bounds.wgsl.
func fromOrderKey(k int32) float32 {
	if k < 0 {
		k ^= 0x7fffffff
	}
	return math.Float32frombits(uint32(k))
}

// TestRequiredLimitsBreakRendering keeps the binding pitfall the demo works
// around in openSession: v1.33.4 passes RequiredLimits on without
// maxColorAttachmentBytesPerSample, so a device asked for any limits cannot
// create a render pipeline. When this test fails, the binding is fixed and
// openSession can request the adapter's limits (bigger data sets).
func TestRequiredLimitsBreakRendering(t *testing.T) {
	s := openTestSession(t, "vulkan")
	var pipeErr error
	err := guard("device with required limits", func() error {
		lim := s.adapter.GetLimits()
		dev, err := s.adapter.RequestDevice(&wgpu.DeviceDescriptor{Label: "limits test", RequiredLimits: &lim})
		if err != nil {
			return err
		}
		defer dev.Release()
		mod, err := dev.TryCreateShaderModule(&wgpu.ShaderModuleDescriptor{Label: "blit.wgsl", WGSLSource: &wgpu.ShaderSourceWGSL{Code: blitWGSL}})
		if err != nil {
			return err
		}
		defer mod.Release()
		p, err := dev.TryCreateRenderPipeline(&wgpu.RenderPipelineDescriptor{
			Vertex:      wgpu.VertexState{Module: mod, EntryPoint: "vs_blit"},
			Primitive:   wgpu.PrimitiveState{Topology: wgpu.PrimitiveTopologyTriangleList, FrontFace: wgpu.FrontFaceCCW},
			Multisample: wgpu.MultisampleState{Count: 1, Mask: 0xFFFFFFFF},
			Fragment: &wgpu.FragmentState{Module: mod, EntryPoint: "fs_blit",
				Targets: []wgpu.ColorTargetState{{Format: targetFormat, WriteMask: wgpu.ColorWriteMaskAll}}},
		})
		if p != nil {
			p.Release()
		}
		pipeErr = err
		return nil
	})
	require.NoError(t, err)
	require.Error(t, pipeErr, "the binding now passes every limit on: request the adapter's limits in openSession")
	assert.True(t, strings.Contains(pipeErr.Error(), "bytes per sample"), "unexpected error: %v", pipeErr)
}
