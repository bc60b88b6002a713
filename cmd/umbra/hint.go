package main

import (
	"fmt"
	"strings"

	"github.com/umbravec/umbra"
)

// hintWords says each of the engine's hints (engine.Hint's codes) in this
// command line's terms: its flags where the engine names Config's fields.
// A code whose engine wording names no Go API keeps it.
var hintWords = map[string]func(umbra.Hint) string{
	umbra.HintNoGPUSupport: umbra.Hint.String,
	umbra.HintNoAdapter:    umbra.Hint.String,
	umbra.HintTooLarge:     umbra.Hint.String,
	umbra.HintNoMatch: func(h umbra.Hint) string {
		return "no adapter matches the selection: loosen " + selectionWords(h) + " or run `umbra probe` to list adapters."
	},
	umbra.HintSoftwareOnly: func(umbra.Hint) string {
		return "only software adapters (which run on the CPU) were found, and the pure-Go path is faster on them: " +
			"install your GPU's driver so a hardware adapter appears, or use --device gpu to use the software adapter anyway."
	},
	umbra.HintProbeFailed: func(umbra.Hint) string {
		return "the adapter was found but failed its test dispatch: update the GPU driver, or pick another adapter " +
			"with --adapter NAME or --backend B. Run `umbra probe` to see every adapter's result."
	},
}

// cliHint is h in this command line's terms ("" for no hint).
func cliHint(h umbra.Hint) string {
	if h.Code == "" {
		return ""
	}
	if words, ok := hintWords[h.Code]; ok {
		return words(h)
	}
	return h.String()
}

// selectionWords names the adapter flags a hint was found under, with
// their values, or both flags when it has none.
func selectionWords(h umbra.Hint) string {
	var given []string
	if b := h.Args["backend"]; b != "" {
		given = append(given, "--backend "+b)
	}
	if n := h.Args["name"]; n != "" {
		given = append(given, fmt.Sprintf("--adapter %q", n))
	}
	if len(given) == 0 {
		return "--adapter or --backend"
	}
	return strings.Join(given, " or ")
}
