//go:build demo && cgo && !nogpu

package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"time"

	"github.com/go-gl/glfw/v3.4/glfw"
	"github.com/oliverbestmann/webgpu/wgpu"
	"github.com/oliverbestmann/webgpu/wgpuglfw"
)

// glfw must run on the main thread, and the demo makes every wgpu call
// from it as well.
func init() { runtime.LockOSThread() }

// keepSurface keeps every surface reachable until the process exits.
// Binding v1.33.4 releases a surface's device along with it, unconditionally:
// releasing (or garbage-collecting) a surface that was never configured
// calls wgpuDeviceRelease(NULL), which aborts the process. So a surface is
// released only after Configure, and otherwise never collected.
var keepSurface []*wgpu.Surface

// window is the glfw window, its wgpu surface and what draws the scene's
// frame onto it.
type window struct {
	win        *glfw.Window
	surface    *wgpu.Surface
	config     wgpu.SurfaceConfiguration
	blit       *wgpu.RenderPipeline
	blitBind   *wgpu.BindGroup
	blitBGL    *wgpu.BindGroupLayout
	resized    bool
	configured bool // Configure was called: only then may the surface be released
	hovering   bool
	moved      bool // the cursor has moved over the window since it opened
}

// runWindow opens the window and draws until it closes, or for o.frames
// frames (then o.hold longer) when o.frames is set.
func runWindow(o options, stdout, stderr io.Writer) error {
	if err := checkDisplay(runtime.GOOS, os.Getenv); err != nil {
		return err
	}
	if err := glfw.Init(); err != nil {
		return fmt.Errorf("glfw: %w", err)
	}
	defer glfw.Terminate()
	glfw.WindowHint(glfw.ClientAPI, glfw.NoAPI)
	glfw.WindowHint(glfw.ScaleToMonitor, glfw.True)
	win, err := glfw.CreateWindow(o.width, o.height, "umbra demo — starting", nil, nil)
	if err != nil {
		return fmt.Errorf("glfw: creating the window: %w", err)
	}
	defer win.Destroy()
	w := &window{win: win}

	inst, err := newInstance(o.backend)
	if err != nil {
		return err
	}
	err = guard("create the window surface", func() error {
		w.surface = inst.CreateSurface(wgpuglfw.GetSurfaceDescriptor(win))
		if w.surface == nil {
			return errors.New("no surface")
		}
		return nil
	})
	if err != nil {
		return err
	}
	keepSurface = append(keepSurface, w.surface)
	defer func() {
		if w.configured {
			w.surface.Release()
		}
	}()

	fbw, fbh := win.GetFramebufferSize()
	d, err := newDemo(o, inst, w.surface, max(fbw, 16), max(fbh, 16), stderr)
	if err != nil {
		return err
	}
	defer d.close()
	if err := w.configure(d, fbw, fbh); err != nil {
		return err
	}
	defer w.release()

	win.SetFramebufferSizeCallback(func(_ *glfw.Window, width, height int) { w.resized = true })
	win.SetCursorEnterCallback(func(_ *glfw.Window, entered bool) { w.hovering = entered })
	// The query follows the cursor once it has moved over the window: a
	// pointer that merely rests where the window opened (as under Xvfb)
	// leaves the scripted tour running.
	var first [2]float64
	seen := false
	win.SetCursorPosCallback(func(_ *glfw.Window, x, y float64) {
		w.hovering = true
		if !seen {
			first, seen = [2]float64{x, y}, true
		} else if math.Abs(x-first[0])+math.Abs(y-first[1]) > 2 {
			w.moved = true
		}
	})
	win.SetKeyCallback(func(win *glfw.Window, key glfw.Key, _ int, action glfw.Action, _ glfw.ModifierKey) {
		if key == glfw.KeyEscape && action == glfw.Press {
			win.SetShouldClose(true)
		}
	})

	start := time.Now()
	var frames, titleFrames int
	var lastTitle time.Time
	var doneAt time.Time     // when the counted frames finished (for --hold)
	var firstFrame time.Time // when the first frame was presented (for the frame rate)
	for !win.ShouldClose() {
		glfw.PollEvents()
		if w.resized {
			w.resized = false
			fbw, fbh = win.GetFramebufferSize()
			if fbw == 0 || fbh == 0 { // minimised
				glfw.WaitEventsTimeout(0.1)
				w.resized = true
				continue
			}
			if err := w.configure(d, fbw, fbh); err != nil {
				return err
			}
		}
		presented, err := w.frame(d, time.Since(start))
		if err != nil {
			return err
		}
		if !presented {
			continue
		}
		frames++
		titleFrames++
		if frames == 1 {
			firstFrame = time.Now()
		}
		if o.resizeTo[0] > 0 && frames == max(o.frames/2, 1) {
			win.SetSize(o.resizeTo[0], o.resizeTo[1])
		}
		if since := time.Since(lastTitle); since > 500*time.Millisecond {
			med, _ := d.searchStats(titleFrames)
			win.SetTitle(fmt.Sprintf("umbra demo · %s · N=%d dim=%d k=%d · search %.2f ms · %.0f fps",
				d.s.info.String(), d.set.rows, d.set.dim, o.k, ms(med), float64(titleFrames)/since.Seconds()))
			lastTitle, titleFrames = time.Now(), 0
		}
		if o.frames > 0 && frames == o.frames {
			if o.screenshot != "" {
				img, err := d.sc.readTarget()
				if err != nil {
					return err
				}
				if err := writePNG(o.screenshot, img); err != nil {
					return err
				}
			}
			fmt.Fprintf(stdout, "window %d×%d · %s · %.1f fps\n", fbw, fbh, d.summary(), float64(frames-1)/time.Since(firstFrame).Seconds())
			doneAt = time.Now()
		}
		if o.frames > 0 && frames >= o.frames && time.Since(doneAt) >= o.hold {
			break
		}
	}
	if o.frames > 0 && frames < o.frames {
		fmt.Fprintf(stdout, "window closed after %d of %d frames · %s\n", frames, o.frames, d.summary())
	}
	return nil
}

// configure (re)configures the surface and the scene for a framebuffer of
// width×height pixels.
func (w *window) configure(d *demo, width, height int) error {
	if err := d.relayout(width, height); err != nil {
		return err
	}
	return guard("configure the surface", func() error {
		if w.blit == nil {
			caps := w.surface.GetCapabilities(d.s.adapter)
			if len(caps.Formats) == 0 || len(caps.AlphaModes) == 0 {
				return fmt.Errorf("%s cannot present to this window", d.s.info.String())
			}
			// Prefer a plain 8-bit format: the frame's bytes then go to the
			// screen unchanged. An sRGB surface gets a decoding blit.
			format := caps.Formats[0]
			for _, f := range caps.Formats {
				if f == wgpu.TextureFormatBGRA8Unorm || f == wgpu.TextureFormatRGBA8Unorm {
					format = f
					break
				}
			}
			w.config = wgpu.SurfaceConfiguration{
				Usage:       wgpu.TextureUsageRenderAttachment,
				Format:      format,
				PresentMode: wgpu.PresentModeFifo, // always supported; paces the loop to the display
				AlphaMode:   caps.AlphaModes[0],
			}
			if err := w.buildBlit(d, format); err != nil {
				return err
			}
			d.logf("surface: %v, %v", format, w.config.AlphaMode)
		}
		w.config.Width, w.config.Height = uint32(width), uint32(height)
		w.surface.Configure(d.s.device, &w.config)
		w.configured = true
		return w.bindFrame(d)
	})
}

func (w *window) buildBlit(d *demo, format wgpu.TextureFormat) error {
	dev := d.s.device
	mod, err := d.s.module("blit.wgsl", blitWGSL)
	if err != nil {
		return err
	}
	defer mod.Release()
	w.blitBGL, err = dev.TryCreateBindGroupLayout(&wgpu.BindGroupLayoutDescriptor{Label: "blit", Entries: []wgpu.BindGroupLayoutEntry{{
		Binding: 0, Visibility: wgpu.ShaderStageFragment,
		Texture: wgpu.TextureBindingLayout{SampleType: wgpu.TextureSampleTypeUnfilterableFloat, ViewDimension: wgpu.TextureViewDimension2D}}}})
	if err != nil {
		return err
	}
	layout, err := dev.TryCreatePipelineLayout(&wgpu.PipelineLayoutDescriptor{Label: "blit", BindGroupLayouts: []*wgpu.BindGroupLayout{w.blitBGL}})
	if err != nil {
		return err
	}
	defer layout.Release()
	fs := "fs_blit"
	if isSRGB(format) {
		fs = "fs_blit_srgb"
	}
	w.blit, err = dev.TryCreateRenderPipeline(&wgpu.RenderPipelineDescriptor{
		Label:       "blit",
		Layout:      layout,
		Vertex:      wgpu.VertexState{Module: mod, EntryPoint: "vs_blit"},
		Primitive:   wgpu.PrimitiveState{Topology: wgpu.PrimitiveTopologyTriangleList, FrontFace: wgpu.FrontFaceCCW, CullMode: wgpu.CullModeNone},
		Multisample: wgpu.MultisampleState{Count: 1, Mask: 0xFFFFFFFF},
		Fragment: &wgpu.FragmentState{Module: mod, EntryPoint: fs,
			Targets: []wgpu.ColorTargetState{{Format: format, Blend: &wgpu.BlendStateReplace, WriteMask: wgpu.ColorWriteMaskAll}}},
	})
	return err
}

// bindFrame points the blit at the scene's current render target.
func (w *window) bindFrame(d *demo) error {
	if w.blitBind != nil {
		w.blitBind.Release()
		w.blitBind = nil
	}
	var err error
	w.blitBind, err = d.s.device.TryCreateBindGroup(&wgpu.BindGroupDescriptor{Label: "blit", Layout: w.blitBGL,
		Entries: []wgpu.BindGroupEntry{{Binding: 0, TextureView: d.sc.targetView}}})
	return err
}

func isSRGB(f wgpu.TextureFormat) bool {
	switch f {
	case wgpu.TextureFormatBGRA8UnormSrgb, wgpu.TextureFormatRGBA8UnormSrgb:
		return true
	}
	return false
}

// frame draws one frame and presents it. It returns false, with no error,
// when the surface had no texture to give (outdated, lost, timed out,
// occluded): the surface is reconfigured where that helps and the next
// frame tries again.
func (w *window) frame(d *demo, elapsed time.Duration) (presented bool, err error) {
	err = guard("frame", func() error {
		st, err := w.surface.TryGetCurrentTexture()
		if err != nil {
			return err
		}
		switch st.Status {
		case wgpu.SurfaceGetCurrentTextureStatusSuccessOptimal:
		case wgpu.SurfaceGetCurrentTextureStatusSuccessSuboptimal:
			w.resized = true // reconfigure after presenting this one
		case wgpu.SurfaceGetCurrentTextureStatusOutdated, wgpu.SurfaceGetCurrentTextureStatusLost:
			d.logf("surface %v: reconfiguring", st.Status)
			w.resized = true
			return nil
		case wgpu.SurfaceGetCurrentTextureStatusTimeout, wgpu.SurfaceGetCurrentTextureStatusOccluded:
			time.Sleep(16 * time.Millisecond)
			return nil
		default:
			return fmt.Errorf("the surface gave no texture: %v", st.Status)
		}
		view, err := st.Texture.TryCreateView(nil)
		if err != nil {
			return err
		}
		defer view.Release()

		// The query follows the cursor while it is over the window, and
		// the scripted path otherwise.
		x, y := d.path.at(elapsed.Seconds() / 2.5)
		if w.hovering && w.moved {
			cx, cy := w.win.GetCursorPos()
			ww, _ := w.win.GetSize()
			s := float32(1)
			if ww > 0 {
				s = float32(d.sc.width) / float32(ww) // window to framebuffer pixels (HiDPI)
			}
			x, y = d.view.toLayout(float32(cx)*s, float32(cy)*s)
		}
		enc, err := d.s.device.TryCreateCommandEncoder(nil)
		if err != nil {
			return err
		}
		defer enc.Release()
		if err := d.step(enc, x, y); err != nil {
			return err
		}
		pass := enc.BeginRenderPass(&wgpu.RenderPassDescriptor{Label: "blit",
			ColorAttachments: []wgpu.RenderPassColorAttachment{{View: view, LoadOp: wgpu.LoadOpClear, StoreOp: wgpu.StoreOpStore}}})
		pass.SetPipeline(w.blit)
		pass.SetBindGroup(0, w.blitBind, nil)
		pass.Draw(3, 1, 0, 0)
		err = pass.TryEnd()
		pass.Release()
		if err != nil {
			return err
		}
		if err := d.s.submit(enc); err != nil {
			return err
		}
		w.surface.Present()
		presented = true
		return nil
	})
	return presented, err
}

func (w *window) release() {
	_ = guard("release window resources", func() error {
		if w.blitBind != nil {
			w.blitBind.Release()
		}
		if w.blit != nil {
			w.blit.Release()
		}
		if w.blitBGL != nil {
			w.blitBGL.Release()
		}
		return nil
	})
}
