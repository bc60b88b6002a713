package engine

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
	assert.Equal(t, []int{2, 3, 1, 0}, rankAdapters(infos, AdapterSelect{}), "high performance: discrete first, native APIs before GL")
	assert.Equal(t, []int{3, 1, 2, 0}, rankAdapters(infos, AdapterSelect{Power: LowPower}))
	assert.Equal(t, []int{3, 1}, rankAdapters(infos, AdapterSelect{Name: "intel"}))
	assert.Equal(t, []int{1}, rankAdapters(infos, AdapterSelect{Name: "intel", Backend: "gl"}))
	assert.Empty(t, rankAdapters(infos, AdapterSelect{Backend: "metal"}))
	assert.Equal(t, "llvmpipe (vulkan, cpu)", infos[0].String())
}
