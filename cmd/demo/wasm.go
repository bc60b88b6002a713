package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"
)

// The page's program (./webapp, GOOS=js GOARCH=wasm) is built once for
// each state of its source and kept in the user's cache directory
// (os.UserCacheDir()/umbra/demo-wasm/KEY/: main.wasm and the wasm_exec.js
// of the Go that built it), KEY a hash of every file the build reads
// from umbra's source, the versions of the modules it uses and the Go
// toolchain. A start whose source has not changed reuses it. A build
// goes to a temporary directory beside the entries (go's own work
// files included, through GOTMPDIR), which becomes the entry by one
// rename, or is removed whatever happens.
//
// The source is the tree this demo was built from (its path recorded in
// the binary), else the module cache's copy of a released umbra this
// demo is, else the umbra checkout the current directory is in. Without
// one of them, or without a Go toolchain, the demo says what to run
// instead (errNoWasm).

// modulePath is umbra's module; wasmRel the page's program in it.
const (
	modulePath = "github.com/umbravec/umbra"
	wasmRel    = "./cmd/demo/webapp"
)

// keepWasm is how many built programs the cache keeps (the most recently
// used); buildLeftover is the age after which a temporary build
// directory counts as left by a killed demo and is removed.
const (
	keepWasm      = 3
	buildLeftover = time.Hour
)

// wasmEnv is the environment of every go command the demo runs for the
// page's program.
var wasmEnv = []string{"GOOS=js", "GOARCH=wasm", "CGO_ENABLED=0"}

// wasmBuilder finds or builds the page's program. Its zero value uses
// the user's cache directory and the go on PATH.
type wasmBuilder struct {
	cacheDir string // "" : os.UserCacheDir()/umbra/demo-wasm
	goBin    string // "" : "go" on PATH
	source   string // "" : located (sourceDir)
	builds   int    // builds run (tests)
}

// pageWasm is a directory holding main.wasm and its wasm_exec.js.
type pageWasm struct {
	dir   string
	built bool // built by this call, not reused
}

// errNoWasm is a demo that can neither find nor build its page's program.
var errNoWasm = errors.New("cannot build the page's program")

// howToBuild is what errNoWasm tells a user to run.
var howToBuild = `In a checkout of umbra's source (` + demoVersion() + `), with Go 1.26 or later, build it and pass the directory:

    mkdir umbra-web
    GOOS=js GOARCH=wasm go build -o umbra-web/main.wasm ./cmd/demo/webapp
    cp "$(go env GOROOT)/lib/wasm/wasm_exec.js" umbra-web/
    demo --web --wasm umbra-web

or run the demo from the checkout: go run ./cmd/demo --web`

// demoVersion names the umbra this demo was built from.
func demoVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Path == modulePath && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return "this demo is " + modulePath + " " + bi.Main.Version
	}
	return "the version this demo was built from"
}

// fromDir checks a directory given with --wasm.
func fromDir(dir string) (pageWasm, error) {
	b, err := os.ReadFile(filepath.Join(dir, "main.wasm"))
	if err != nil {
		return pageWasm{}, fmt.Errorf("--wasm %s: %w (the directory must hold main.wasm and wasm_exec.js)", dir, err)
	}
	if !bytes.HasPrefix(b, []byte("\x00asm")) {
		return pageWasm{}, fmt.Errorf("--wasm %s: main.wasm is not WebAssembly (no \\0asm header)", dir)
	}
	if _, err := os.Stat(filepath.Join(dir, "wasm_exec.js")); err != nil {
		return pageWasm{}, fmt.Errorf("--wasm %s: %w (copy it from $(go env GOROOT)/lib/wasm/ of the Go that built main.wasm)", dir, err)
	}
	return pageWasm{dir: dir}, nil
}

// get returns the page's program: the cached one for the source's
// current state, or one built now. It tells out what it does.
func (b *wasmBuilder) get(ctx context.Context, out io.Writer) (pageWasm, error) {
	goBin := b.goBin
	if goBin == "" {
		p, err := exec.LookPath("go")
		if err != nil {
			return pageWasm{}, fmt.Errorf("%w: no Go toolchain (\"go\" is not on PATH).\n%s", errNoWasm, howToBuild)
		}
		goBin = p
	}
	src, how, err := b.sourceDir(ctx, goBin)
	if err != nil {
		return pageWasm{}, err
	}
	root, err := b.cacheRoot()
	if err != nil {
		return pageWasm{}, err
	}
	fmt.Fprintf(out, "umbra demo: the page's program (%s, js/wasm), from %s (%s)\n", wasmRel, src, how)
	key, goroot, err := sourceKey(ctx, goBin, src)
	if err != nil {
		return pageWasm{}, err
	}
	entry := filepath.Join(root, key)
	if fi, err := os.Stat(filepath.Join(entry, "main.wasm")); err == nil {
		now := time.Now()
		_ = os.Chtimes(entry, now, now) // most recently used
		fmt.Fprintf(out, "  reusing %s (%.1f MB, built %s)\n", filepath.Join(entry, "main.wasm"), float64(fi.Size())/1e6, fi.ModTime().Format("2006-01-02 15:04"))
		return pageWasm{dir: entry}, nil
	}
	fmt.Fprintf(out, "  building it into %s (once for each change of its source: up to a minute with Go's build cache cold, seconds with it warm) …\n", entry)
	start := time.Now()
	if err := b.build(ctx, goBin, goroot, src, root, entry); err != nil {
		return pageWasm{}, err
	}
	fi, err := os.Stat(filepath.Join(entry, "main.wasm"))
	if err != nil {
		return pageWasm{}, err
	}
	fmt.Fprintf(out, "  built in %.1f s (%.1f MB)\n", time.Since(start).Seconds(), float64(fi.Size())/1e6)
	prune(root, entry)
	return pageWasm{dir: entry, built: true}, nil
}

func (b *wasmBuilder) cacheRoot() (string, error) {
	root := b.cacheDir
	if root == "" {
		c, err := os.UserCacheDir()
		if err != nil {
			return "", fmt.Errorf("%w: no cache directory to keep it in (%v); set XDG_CACHE_HOME or HOME, or pass --wasm DIR.\n%s", errNoWasm, err, howToBuild)
		}
		root = filepath.Join(c, "umbra", "demo-wasm")
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", fmt.Errorf("the page's program cache: %w", err)
	}
	return root, nil
}

// sourceDir finds umbra's source to build the page's program from (see
// the comment at the top) and says which it found.
func (b *wasmBuilder) sourceDir(ctx context.Context, goBin string) (dir, how string, err error) {
	if b.source != "" {
		return b.source, "given", nil
	}
	var tried []string
	// The tree this binary was compiled from: its own file's path (absent
	// under -trimpath).
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		root := filepath.Dir(filepath.Dir(filepath.Dir(file)))
		if isUmbra(root) {
			return root, "the tree this demo was built from", nil
		}
		tried = append(tried, root+" (this demo's source tree: gone)")
	} else {
		tried = append(tried, "this demo's source tree (not recorded: built with -trimpath)")
	}
	// A released umbra (go install …/cmd/demo@v1.2.3): the module cache's
	// copy of that version, downloaded if it was cleaned.
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Path == modulePath && released(bi.Main.Version) {
		v := modulePath + "@" + bi.Main.Version
		out, err := goCmd(ctx, goBin, "", nil, "mod", "download", "-json", v)
		if d := downloadedDir(out); err == nil && d != "" && isUmbra(d) {
			return d, v + " in the module cache", nil
		}
		tried = append(tried, fmt.Sprintf("%s in the module cache (go mod download: %v)", v, firstLine(out, err)))
	}
	// The checkout the current directory is in.
	if out, err := goCmd(ctx, goBin, "", nil, "env", "GOMOD"); err == nil {
		if gomod := strings.TrimSpace(out); gomod != "" && gomod != os.DevNull {
			root := filepath.Dir(gomod)
			if isUmbra(root) {
				return root, "the umbra checkout of the current directory", nil
			}
		}
	}
	cwd, _ := os.Getwd()
	tried = append(tried, cwd+" (the current directory: not in an umbra checkout)")
	return "", "", fmt.Errorf("%w: umbra's source is not here; looked in:\n  %s\n%s", errNoWasm, strings.Join(tried, "\n  "), howToBuild)
}

// released reports whether v is a module version the module cache can
// hold: not "(devel)" nor a build of a modified checkout.
func released(v string) bool {
	return v != "" && v != "(devel)" && !strings.HasSuffix(v, "+dirty")
}

// isUmbra reports whether dir is the root of umbra's module with the page's
// program in it.
func isUmbra(dir string) bool {
	f, err := os.Open(filepath.Join(dir, "go.mod"))
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) == 2 && fields[0] == "module" {
			if strings.Trim(fields[1], `"`) != modulePath {
				return false
			}
			_, err := os.Stat(filepath.Join(dir, "cmd", "demo", "webapp", "main.go"))
			return err == nil
		}
	}
	return false
}

// sourceKey hashes what the page's program is built from: the Go
// toolchain and its wasm settings, and for every package the program
// imports its module's version or, for umbra's own packages (and any
// replaced by a directory), the contents of its files. It returns the
// key and the toolchain's GOROOT.
func sourceKey(ctx context.Context, goBin, src string) (key, goroot string, err error) {
	env, err := goCmd(ctx, goBin, src, wasmEnv, "env", "GOVERSION", "GOROOT", "GOFLAGS", "GOEXPERIMENT", "GOWASM")
	if err != nil {
		return "", "", fmt.Errorf("%w: go env in %s: %v\n%s", errNoWasm, src, err, env)
	}
	goroot = strings.Split(env, "\n")[1]
	const sep = "\x1f"
	list, err := goCmd(ctx, goBin, src, wasmEnv, "list", "-deps", "-f",
		`{{if not .Standard}}{{.ImportPath}}`+sep+`{{with .Module}}{{.Path}}@{{.Version}}{{with .Replace}}=>{{.Path}}@{{.Version}}{{end}}{{end}}`+sep+
			`{{if or (not .Module) (not .Module.Version) (and .Module.Replace (not .Module.Replace.Version))}}{{.Dir}}`+sep+
			`{{join .GoFiles "|"}}|{{join .SFiles "|"}}|{{join .EmbedFiles "|"}}{{end}}{{end}}`, wasmRel)
	if err != nil {
		return "", "", fmt.Errorf("%w: go list in %s: %v\n%s", errNoWasm, src, err, list)
	}
	h := sha256.New()
	fmt.Fprintf(h, "umbra demo wasm 1\n%s\n", env)
	for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
		fmt.Fprintf(h, "%s\n", line)
		parts := strings.Split(line, sep)
		if len(parts) < 4 {
			continue // a versioned module's package: its version is in the line
		}
		dir := parts[2]
		for _, name := range strings.Split(parts[3], "|") {
			if name == "" {
				continue
			}
			b, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				return "", "", fmt.Errorf("%w: reading the source: %v", errNoWasm, err)
			}
			fmt.Fprintf(h, "%s %d\n", name, len(b))
			h.Write(b)
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:20], goroot, nil
}

// build builds the page's program from src into a new directory under
// root and renames it to entry; nothing of it is left on failure.
func (b *wasmBuilder) build(ctx context.Context, goBin, goroot, src, root, entry string) (err error) {
	b.builds++
	tmp, err := os.MkdirTemp(root, ".build-")
	if err != nil {
		return fmt.Errorf("the page's program cache: %w", err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(tmp)
		}
	}()
	// go's work directory goes inside tmp, so that even a build killed
	// half-way leaves nothing in the system's temporary directory.
	work := filepath.Join(tmp, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		return err
	}
	out, err := goCmd(ctx, goBin, src, append(slices.Clone(wasmEnv), "GOTMPDIR="+work),
		"build", "-o", filepath.Join(tmp, "main.wasm"), wasmRel)
	if err != nil {
		return fmt.Errorf("building the page's program (%s, js/wasm) in %s: %v\n%s", wasmRel, src, err, out)
	}
	var js []byte
	for _, p := range []string{"lib/wasm/wasm_exec.js", "misc/wasm/wasm_exec.js"} {
		if js, err = os.ReadFile(filepath.Join(goroot, p)); err == nil {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("the Go distribution's wasm_exec.js (in %s): %w", goroot, err)
	}
	if err := os.WriteFile(filepath.Join(tmp, "wasm_exec.js"), js, 0o644); err != nil {
		return err
	}
	if err := os.RemoveAll(work); err != nil {
		return err
	}
	if err := os.Rename(tmp, entry); err != nil {
		if _, serr := os.Stat(filepath.Join(entry, "main.wasm")); serr == nil {
			os.RemoveAll(tmp) // another demo built the same source meanwhile
			return nil
		}
		return fmt.Errorf("the page's program cache: %w", err)
	}
	return nil
}

// prune removes all but the keepWasm most recently used programs under
// root (keep among them), and build directories left by killed demos.
func prune(root, keep string) {
	ents, err := os.ReadDir(root)
	if err != nil {
		return
	}
	type used struct {
		path string
		at   time.Time
	}
	var entries []used
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil || !e.IsDir() {
			continue
		}
		p := filepath.Join(root, e.Name())
		switch {
		case strings.HasPrefix(e.Name(), ".build-"):
			if time.Since(fi.ModTime()) > buildLeftover {
				os.RemoveAll(p)
			}
		case p != keep:
			entries = append(entries, used{p, fi.ModTime()})
		}
	}
	slices.SortFunc(entries, func(a, b used) int { return b.at.Compare(a.at) })
	for i, e := range entries {
		if i >= keepWasm-1 {
			os.RemoveAll(e.path)
		}
	}
}

// goCmd runs goBin with args in dir (the current directory when ""),
// with extra added to the environment, and returns its output. On ctx's
// end it interrupts go (which then removes its own work files) before
// killing it.
func goCmd(ctx context.Context, goBin, dir string, extra []string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, goBin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), extra...)
	cmd.Cancel = func() error {
		if runtime.GOOS == "windows" {
			return cmd.Process.Kill()
		}
		return cmd.Process.Signal(os.Interrupt)
	}
	cmd.WaitDelay = 10 * time.Second
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err := cmd.Run()
	return strings.TrimRight(buf.String(), "\n"), err
}

// downloadedDir is the module's directory in go mod download -json's
// output, "" when absent.
func downloadedDir(out string) string {
	var m struct{ Dir string }
	if json.Unmarshal([]byte(out), &m) != nil {
		return ""
	}
	return m.Dir
}

func firstLine(out string, err error) string {
	if err == nil {
		return "no directory"
	}
	if l, _, _ := strings.Cut(strings.TrimSpace(out), "\n"); l != "" {
		return l
	}
	return err.Error()
}
