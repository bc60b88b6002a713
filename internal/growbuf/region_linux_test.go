//go:build linux && (amd64 || arm64 || riscv64 || ppc64le || s390x || loong64)

package growbuf

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestOvercommitStrict: regions are refused only under strict overcommit
// accounting (mode 2), where a reservation is charged whole; modes 0 and
// 1, and a kernel without the file, keep them.
func TestOvercommitStrict(t *testing.T) {
	dir := t.TempDir()
	for mode, strict := range map[string]bool{"0\n": false, "1\n": false, "2\n": true, "2": true} {
		path := filepath.Join(dir, "overcommit_memory")
		require.NoError(t, os.WriteFile(path, []byte(mode), 0o600))
		require.Equal(t, strict, overcommitStrict(path), "mode %q", mode)
	}
	require.False(t, overcommitStrict(filepath.Join(dir, "absent")))
}
