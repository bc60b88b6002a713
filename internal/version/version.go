// Package version says which umbra a binary is: umbra version and the
// reports of cmd/bench read it here, so that they cannot disagree.
package version

import "runtime/debug"

// Fallback is the version of a build that carries no module version: one
// built inside the checkout ("(devel)", as go build and go test report it
// without VCS stamping). A module version (go install
// github.com/umbravec/umbra/cmd/umbra@v1.2.0, or the pseudo-version Go
// stamps from the VCS) wins over it.
const Fallback = "v0.1.0-dev"

// Info is what the build recorded about umbra itself.
type Info struct {
	Version  string // a module version, else Fallback
	Revision string // VCS commit, when the build recorded one
	Modified bool   // the work tree had uncommitted changes
}

// Get reads the running binary's build information.
func Get() Info { return fromBuild(debug.ReadBuildInfo()) }

// String is Get().Version.
func String() string { return Get().Version }

func fromBuild(bi *debug.BuildInfo, ok bool) Info {
	v := Info{Version: Fallback}
	if !ok || bi == nil {
		return v
	}
	if bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}
