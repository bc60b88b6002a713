package probe

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/umbravec/umbra/diag"
)

func TestRankAdapters(t *testing.T) {
	infos := []diag.AdapterInfo{
		{Name: "llvmpipe", API: "vulkan", Type: "cpu"},
		{Name: "Intel(R) UHD Graphics", API: "gl", Type: "integrated"},
		{Name: "NVIDIA GeForce RTX 3050 Laptop GPU", API: "vulkan", Type: "discrete"},
		{Name: "Intel(R) UHD Graphics", API: "vulkan", Type: "integrated"},
	}
	assert.Equal(t, []int{2, 3, 1, 0}, Rank(infos, Select{}), "high performance: discrete first, native APIs before GL")
	assert.Equal(t, []int{3, 1, 2, 0}, Rank(infos, Select{LowPower: true}))
	assert.Equal(t, []int{3, 1}, Rank(infos, Select{Name: "intel"}))
	assert.Equal(t, []int{1}, Rank(infos, Select{Name: "intel", Backend: "gl"}))
	assert.Empty(t, Rank(infos, Select{Backend: "metal"}))
	assert.Equal(t, "llvmpipe (vulkan, cpu)", infos[0].String())
}

func TestSelectHint(t *testing.T) {
	assert.Nil(t, Select{}.Hint("no-adapter").Args, "no selection, no arguments")
	h := Select{Backend: "vulkan", Name: "NVIDIA"}.Hint("no-match")
	assert.Equal(t, map[string]string{"backend": "vulkan", "name": "NVIDIA"}, h.Args)
	assert.Equal(t, `backend vulkan and name containing "NVIDIA"`, Select{Backend: "vulkan", Name: "NVIDIA"}.Describe())
	assert.Error(t, Select{Backend: "opengl"}.ValidateBackend())
	assert.NoError(t, Select{Backend: "DX12"}.ValidateBackend())
}
