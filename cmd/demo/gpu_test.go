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

	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/engine/ondevice"
	"github.com/umbravec/umbra/host"
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
		if os.Getenv("UMBRA_REQUIRE_GPU") == "1" {
			t.Fatalf("no %s adapter (UMBRA_REQUIRE_GPU=1): %v", backend, err)
		}
		t.Skipf("no %s adapter: %v", backend, err)
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

// smallScene builds a scene for a synthetic set on backend.
func smallScene(t *testing.T, backend string, n, dim int, seed int64) (*session, *scene, *memorySet) {
	t.Helper()
	s := openTestSession(t, backend)
	set := syntheticSet(n, dim, seed)
	sc, err := newScene(s, set, 64, 64, 16)
	require.NoError(t, err)
	t.Cleanup(sc.release)
	return s, sc, set
}

// TestProjectionOnGPUMatchesCPU runs the projection's passes on the GPU and
// in float64 on the CPU from the same start and compares the layouts.
func TestProjectionOnGPUMatchesCPU(t *testing.T) {
	seed := testSeed(t)
	for _, b := range testBackends {
		t.Run(b, func(t *testing.T) {
			// 2,500 rows of dimension 50: partial blocks, a padded last
			// word, and more rows than one weighted-sum block.
			const n, dim, iters = 2500, 50, 12
			_, sc, set := smallScene(t, b, n, dim, seed)
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

// TestSimilarityMatchesIndex checks the colouring pass against the umbra
// index on the same device: the scores it draws agree with the index's, its
// best rows are the index's top k, and its range is the scores' range.
func TestSimilarityMatchesIndex(t *testing.T) {
	seed := testSeed(t)
	for _, b := range testBackends {
		t.Run(b, func(t *testing.T) {
			const n, dim, k = 3000, 40, 12
			s, sc, set := smallScene(t, b, n, dim, seed)
			limits := s.limits
			ix, err := ondevice.New(context.Background(), engine.Config{Dim: dim}, s.adapter, s.device, &limits)
			require.NoError(t, err)
			defer ix.Close()
			_, err = ix.AddFlat(context.Background(), set.data)
			require.NoError(t, err)
			_, err = fitProjection(sc, n, dim, 4, seed)
			require.NoError(t, err)
			require.NoError(t, sc.readPositions())

			q := set.row(int(seed % n))
			hits, err := ix.Search(context.Background(), q, k)
			require.NoError(t, err)
			rings := make([]int, len(hits))
			for i, h := range hits {
				rings[i] = int(h.ID)
			}
			err = guard("frame", func() error {
				enc, err := s.device.TryCreateCommandEncoder(nil)
				if err != nil {
					return err
				}
				defer enc.Release()
				v := fitView(sc.pos, sc.width, sc.height)
				if err := sc.encode(enc, frameInput{query: q, rings: rings, view: v}); err != nil {
					return err
				}
				return s.submit(enc)
			})
			require.NoError(t, err)
			raw, err := s.readBuffer(sc.scores, n*4)
			require.NoError(t, err)
			scores := wgpu.FromBytes[float32](raw)
			for _, h := range hits {
				assert.InDelta(t, h.Score, scores[h.ID], 1e-5, "row %d", h.ID)
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
			// The range the shader found, decoded as draw.wgsl does.
			raw, err = s.readBuffer(sc.frame, frameBytes)
			require.NoError(t, err)
			lo := fromOrderKey(int32(leU32(raw[boundsAt:])))
			hi := fromOrderKey(int32(leU32(raw[boundsAt+4:])))
			assert.Equal(t, slices.Min(scores), lo)
			assert.Equal(t, slices.Max(scores), hi)
		})
	}
}

func leU32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

// fromOrderKey inverts order_key of similarity.wgsl.
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
