package version

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestFromBuild(t *testing.T) {
	stamped := []debug.BuildSetting{{Key: "vcs.revision", Value: "4888fe9c"}, {Key: "vcs.modified", Value: "true"}}
	tests := []struct {
		name string
		bi   *debug.BuildInfo
		ok   bool
		want Info
	}{
		{"no build info", nil, false, Info{Version: Fallback}},
		{"built in the checkout", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, true, Info{Version: Fallback}},
		{"no main version", &debug.BuildInfo{}, true, Info{Version: Fallback}},
		{"installed at a tag", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.0"}}, true, Info{Version: "v1.2.0"}},
		{"stamped from the VCS", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20260102030405-4888fe9c+dirty"}, Settings: stamped}, true,
			Info{Version: "v0.0.0-20260102030405-4888fe9c+dirty", Revision: "4888fe9c", Modified: true}},
		{"devel with a revision", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: stamped[:1]}, true,
			Info{Version: Fallback, Revision: "4888fe9c"}},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, fromBuild(tc.bi, tc.ok), tc.name)
	}
}

func TestStringIsNeverEmpty(t *testing.T) {
	assert.NotEmpty(t, String())
	assert.NotEqual(t, "(devel)", String())
}
