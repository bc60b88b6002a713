package node

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/nats-io/nkeys"
	"github.com/umbravec/umbra/internal/cluster/protocol"
)

// CredsDir holds the keys of an umbra cluster's embedded NATS servers,
// kept in one directory (umbra serve: DIR/creds), made on first use and
// read after:
//
//   - node.nk: the node role's NATS user nkey seed (umbra serve's own
//     connection, and operator commands);
//   - client.nk: the client role's (applications: the --cluster commands,
//     library users);
//   - route.secret: the password servers of one embedded NATS cluster
//     give each other on their route connections.
//
// The files are mode 0600 in a directory of mode 0700; a file or the
// directory readable by others is refused, naming it. A seed never
// crosses the network: the server sends a nonce, the client signs it
// (nkeys' challenge-response), and the server checks the signature
// against the public key it was given.
type CredsDir struct {
	dir         string
	node        string // public nkeys
	client      string
	RouteSecret string
}

// The files of a credentials directory.
const (
	NodeCredsFile   = "node.nk"
	ClientCredsFile = "client.nk"
	RouteSecretFile = "route.secret"
	routeUser       = "umbra-route"
)

// Dir is the directory.
func (c *CredsDir) Dir() string { return c.dir }

// NodeFile is the node role's seed file: give it to umbra serve --nats
// URL --creds and to operator commands (Credentials(NodeFile()) in a
// program).
func (c *CredsDir) NodeFile() string { return filepath.Join(c.dir, NodeCredsFile) }

// ClientFile is the client role's seed file: give it to applications
// (--creds FILE on the --cluster commands, Credentials(FILE) in a
// program).
func (c *CredsDir) ClientFile() string { return filepath.Join(c.dir, ClientCredsFile) }

// NodePublicKey and ClientPublicKey are the roles' public nkeys, what a
// nats-server configuration names (docs/nats/auth.conf).
func (c *CredsDir) NodePublicKey() string   { return c.node }
func (c *CredsDir) ClientPublicKey() string { return c.client }

// LoadCreds reads the credentials in dir, making the directory
// (mode 0700) and any file missing from it (mode 0600) first. A file or
// the directory that others may read is refused, naming it.
func LoadCreds(dir string) (*CredsDir, error) {
	if dir == "" {
		return nil, errors.New("credentials: no directory")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("credentials: %w", err)
	}
	if err := checkPrivate(dir, true); err != nil {
		return nil, err
	}
	for _, f := range []string{NodeCredsFile, ClientCredsFile, RouteSecretFile} {
		path := filepath.Join(dir, f)
		if _, err := os.Lstat(path); err == nil {
			continue
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("credentials: %w", err)
		}
		body, err := newCredential(f)
		if err != nil {
			return nil, err
		}
		if err := createExclusive(path, body); err != nil {
			return nil, err
		}
	}
	return readCreds(dir)
}

// RotateCreds replaces every key in dir by a new one (each file
// replaced whole, by a rename) and returns the new credentials. Servers
// started before keep accepting the old keys until they restart; from
// then on the old ones are refused. Give the new client file to every
// application.
func RotateCreds(dir string) (*CredsDir, error) {
	if _, err := LoadCreds(dir); err != nil {
		return nil, err
	}
	for _, f := range []string{NodeCredsFile, ClientCredsFile, RouteSecretFile} {
		body, err := newCredential(f)
		if err != nil {
			return nil, err
		}
		if err := replaceFile(filepath.Join(dir, f), body); err != nil {
			return nil, err
		}
	}
	return readCreds(dir)
}

func readCreds(dir string) (*CredsDir, error) {
	c := &CredsDir{dir: dir}
	var err error
	if c.node, err = readSeedPublic(filepath.Join(dir, NodeCredsFile)); err != nil {
		return nil, err
	}
	if c.client, err = readSeedPublic(filepath.Join(dir, ClientCredsFile)); err != nil {
		return nil, err
	}
	if c.node == c.client {
		return nil, fmt.Errorf("credentials in %s: the node and client files hold the same key; give each role its own (delete both files and start again to make new ones)", dir)
	}
	path := filepath.Join(dir, RouteSecretFile)
	body, err := readPrivate(path)
	if err != nil {
		return nil, err
	}
	c.RouteSecret = lastLine(body)
	if len(c.RouteSecret) < 32 {
		return nil, fmt.Errorf("credentials file %s: no route secret (a line of at least 32 characters)", path)
	}
	return c, nil
}

// readSeedPublic reads a user nkey seed file and returns its public key.
func readSeedPublic(path string) (string, error) {
	body, err := readPrivate(path)
	if err != nil {
		return "", err
	}
	defer protocol.Wipe(body)
	kp, err := nkeys.ParseDecoratedUserNKey(body)
	if err != nil {
		return "", fmt.Errorf("credentials file %s: not an NATS user nkey seed: %w", path, err)
	}
	defer kp.Wipe()
	return kp.PublicKey()
}

// readPrivate reads a file that only its owner may read.
func readPrivate(path string) ([]byte, error) {
	if err := checkPrivate(path, false); err != nil {
		return nil, err
	}
	body, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("credentials: %w", err)
	}
	return body, nil
}

// checkPrivate refuses a credentials file or directory that others than
// its owner may read or write (not checked on Windows, whose files have
// no such mode).
func checkPrivate(path string, dir bool) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return fmt.Errorf("credentials: %w", err)
	}
	what, want := "file", os.FileMode(0o600)
	if dir {
		what, want = "directory", 0o700
	}
	switch {
	case dir && !fi.IsDir():
		return fmt.Errorf("credentials directory %s is not a directory", path)
	case !dir && !fi.Mode().IsRegular():
		return fmt.Errorf("credentials file %s is not a regular file (a link or a device is refused)", path)
	case runtime.GOOS != "windows" && fi.Mode().Perm()&0o077 != 0:
		return fmt.Errorf("credentials %s %s has mode %04o: others than its owner may use it; refused (chmod %o %s, and make new keys if others may have read them)",
			what, path, fi.Mode().Perm(), want, path)
	}
	return nil
}

func newCredential(file string) ([]byte, error) {
	var b bytes.Buffer
	switch file {
	case RouteSecretFile:
		secret := make([]byte, 32)
		if _, err := rand.Read(secret); err != nil {
			return nil, fmt.Errorf("credentials: %w", err)
		}
		b.WriteString("# umbra: the password the embedded NATS servers of one cluster give each other on their routes.\n")
		b.WriteString(hex.EncodeToString(secret) + "\n")
		return b.Bytes(), nil
	case NodeCredsFile, ClientCredsFile:
		kp, err := nkeys.CreateUser()
		if err != nil {
			return nil, fmt.Errorf("credentials: %w", err)
		}
		defer kp.Wipe()
		seed, err := kp.Seed()
		if err != nil {
			return nil, fmt.Errorf("credentials: %w", err)
		}
		defer protocol.Wipe(seed)
		if file == NodeCredsFile {
			b.WriteString("# umbra node credentials (an NATS user nkey seed): nodes and operator commands.\n")
			b.WriteString("# Keep it secret (mode 0600): umbra serve --nats URL --creds FILE, cluster.Credentials(FILE).\n")
		} else {
			b.WriteString("# umbra client credentials (an NATS user nkey seed): applications.\n")
			b.WriteString("# Keep it secret (mode 0600): umbra search --cluster URL --creds FILE, cluster.Credentials(FILE).\n")
		}
		b.Write(seed)
		b.WriteString("\n")
		return b.Bytes(), nil
	}
	return nil, fmt.Errorf("credentials: no file %s", file)
}

// createExclusive writes path whole or not at all, and not over a file
// already there (another process made it meanwhile: that one stands).
func createExclusive(path string, body []byte) error {
	tmp, err := writeTemp(path, body)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	if err := os.Link(tmp, path); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("credentials: %w", err)
	}
	return syncDir(filepath.Dir(path))
}

// replaceFile writes path whole, replacing what was there.
func replaceFile(path string, body []byte) error {
	tmp, err := writeTemp(path, body)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("credentials: %w", err)
	}
	return syncDir(filepath.Dir(path))
}

func writeTemp(path string, body []byte) (string, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return "", fmt.Errorf("credentials: %w", err)
	}
	name := f.Name()
	err = f.Chmod(0o600)
	if err == nil {
		_, err = f.Write(body)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(name)
		return "", fmt.Errorf("credentials: %w", err)
	}
	return name, nil
}

func syncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("credentials: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("credentials: %w", err)
	}
	return nil
}

// lastLine is the last line of body that is neither empty nor a comment.
func lastLine(body []byte) string {
	var last string
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" && !strings.HasPrefix(l, "#") {
			last = l
		}
	}
	return last
}
