package main

import "strings"

// flagWording holds the engine's advice as it is written for Go callers
// (engine.Info's Reason and Hint, *engine.AdapterError's, a ProbeReport's),
// each phrase with the flags that do the same on this command line. The
// longer phrases come first: at one position the replacer takes the first
// match in this order.
var flagWording = strings.NewReplacer(
	"set Device: GPU", "use --device gpu",
	"with Config.Adapter (Name or Backend)", "with --adapter NAME or --backend B",
	"loosen Config.Adapter (Name, Backend)", "loosen --adapter or --backend",
	"Config.Adapter", "--adapter / --backend",
	"Device: GPU", "--device gpu",
	"Device: Auto", "--device auto",
	"Device: CPU", "--device cpu",
)

// cliWording says the engine's reason or hint text in flags.
func cliWording(s string) string { return flagWording.Replace(s) }
