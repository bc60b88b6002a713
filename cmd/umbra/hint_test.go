package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// libraryWording matches the ways the engine names its Go API in advice.
var libraryWording = regexp.MustCompile(`Config\.|AdapterSelect|\bDevice:|\bDevice (GPU|CPU|Auto)\b|\bPower:`)

func TestCLIWordingSaysFlags(t *testing.T) {
	tests := []struct{ engine, cli string }{
		{"install your GPU's driver so a hardware adapter appears, or set Device: GPU to use the software adapter anyway.",
			"install your GPU's driver so a hardware adapter appears, or use --device gpu to use the software adapter anyway."},
		{"update the GPU driver, or pick another adapter with Config.Adapter (Name or Backend). Run `umbra probe`.",
			"update the GPU driver, or pick another adapter with --adapter NAME or --backend B. Run `umbra probe`."},
		{"no adapter matches the selection: loosen Config.Adapter (Name, Backend) or run `umbra probe` to list adapters.",
			"no adapter matches the selection: loosen --adapter or --backend or run `umbra probe` to list adapters."},
		{"narrow Config.Adapter", "narrow --adapter / --backend"},
		{"with Device: Auto an index", "with --device auto an index"},
		{"already in flags: --device gpu", "already in flags: --device gpu"},
		{"", ""},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.cli, cliWording(tc.engine))
	}
}

// TestEveryEngineHintSaysFlags reads the engine's hint constants from its
// source, so that a hint added or reworded there cannot reach a user of
// this command in Go API terms unnoticed.
func TestEveryEngineHintSaysFlags(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "engine", "*.go"))
	require.NoError(t, err)
	hints := map[string]string{}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		ast.Inspect(file, func(n ast.Node) bool {
			spec, ok := n.(*ast.ValueSpec)
			if !ok {
				return true
			}
			for i, name := range spec.Names {
				if strings.HasPrefix(name.Name, "hint") && i < len(spec.Values) {
					if s, ok := stringConstant(spec.Values[i]); ok {
						hints[name.Name] = s
					}
				}
			}
			return true
		})
	}
	require.NotEmpty(t, hints, "no hint constants found in the engine's source")
	for name, h := range hints {
		assert.NotRegexp(t, libraryWording, cliWording(h), "engine.%s as the CLI says it", name)
	}
}

// stringConstant evaluates a string literal or a sum of them.
func stringConstant(e ast.Expr) (string, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(e.Value)
		return s, err == nil
	case *ast.BinaryExpr:
		if e.Op != token.ADD {
			return "", false
		}
		x, ok := stringConstant(e.X)
		if !ok {
			return "", false
		}
		y, ok := stringConstant(e.Y)
		return x + y, ok
	case *ast.ParenExpr:
		return stringConstant(e.X)
	}
	return "", false
}
