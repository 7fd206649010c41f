package oauth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Grant is what a login got: an access token for a resource from an
// authorization server, with the refresh token that renews it.
type Grant struct {
	Issuer       string    `json:"issuer"`
	Resource     string    `json:"resource"`
	ClientID     string    `json:"client_id"`
	AccessToken  string    `json:"access_token"`
	RefreshToken string    `json:"refresh_token,omitempty"`
	Expiry       time.Time `json:"expiry,omitzero"`
	Scopes       []string  `json:"scopes,omitempty"`
}

// Registration is this client at an authorization server: its client id,
// how it authenticates at the token endpoint, and the redirect URI it was
// registered with.
type Registration struct {
	Issuer       string `json:"issuer"`
	ClientID     string `json:"client_id"`
	ClientSecret string `json:"client_secret,omitempty"`
	AuthMethod   string `json:"token_endpoint_auth_method"`
	RedirectURI  string `json:"redirect_uri,omitempty"`
}

// Server is where an MCP server's tokens come from: its authorization server
// and the resource it names, as its metadata said at the last login.
type Server struct {
	URL      string `json:"url"`
	Issuer   string `json:"issuer"`
	Resource string `json:"resource"`
}

// A Store keeps grants (by issuer and resource), registrations (by issuer)
// and servers (by URL), and serializes logins and refreshes: Lock holds off
// another session's (and process's) Lock of the same key until unlock; the
// key is a server's URL (its logins) or a grant's (grantLock: its refreshes,
// whichever URL of the resource they come through). Load methods return nil
// and no error for what is not there. A Store is safe for concurrent use: the
// sessions of a process share one.
type Store interface {
	Grant(issuer, resource string) (*Grant, error)
	SaveGrant(*Grant) error
	DeleteGrant(issuer, resource string) error
	Registration(issuer string) (*Registration, error)
	SaveRegistration(*Registration) error
	DeleteRegistration(issuer string) error
	Server(url string) (*Server, error)
	SaveServer(*Server) error
	DeleteServer(url string) error
	Lock(ctx context.Context, key string) (unlock func(), err error)
}

// MemoryStore is a Store in this process's memory; its zero value is empty
// and ready. It is safe for concurrent use.
type MemoryStore struct {
	mu      sync.Mutex // guards the maps
	grants  map[string]Grant
	regs    map[string]Registration
	servers map[string]Server
	locks   map[string]chan struct{}
}

var _ Store = (*MemoryStore)(nil)

func (m *MemoryStore) Grant(issuer, resource string) (*Grant, error) {
	return load(m, &m.grants, grantKey(issuer, resource))
}

func (m *MemoryStore) SaveGrant(g *Grant) error {
	return store(m, &m.grants, grantKey(g.Issuer, g.Resource), g)
}

func (m *MemoryStore) DeleteGrant(issuer, resource string) error {
	return drop(m, &m.grants, grantKey(issuer, resource))
}

func (m *MemoryStore) Registration(issuer string) (*Registration, error) {
	return load(m, &m.regs, issuer)
}

func (m *MemoryStore) SaveRegistration(r *Registration) error {
	return store(m, &m.regs, r.Issuer, r)
}

func (m *MemoryStore) DeleteRegistration(issuer string) error {
	return drop(m, &m.regs, issuer)
}

func (m *MemoryStore) Server(url string) (*Server, error) {
	return load(m, &m.servers, url)
}

func (m *MemoryStore) SaveServer(s *Server) error {
	return store(m, &m.servers, s.URL, s)
}

func (m *MemoryStore) DeleteServer(url string) error {
	return drop(m, &m.servers, url)
}

// load returns a copy of the record of key in the map *in of m, nil when
// there is none.
func load[T any](m *MemoryStore, in *map[string]T, key string) (*T, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if v, ok := (*in)[key]; ok {
		return &v, nil
	}
	return nil, nil
}

// store keeps a copy of v as the record of key in the map *in of m.
func store[T any](m *MemoryStore, in *map[string]T, key string, v *T) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if *in == nil {
		*in = map[string]T{}
	}
	(*in)[key] = *v
	return nil
}

// drop deletes the record of key in the map *in of m.
func drop[T any](m *MemoryStore, in *map[string]T, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(*in, key)
	return nil
}

func (m *MemoryStore) Lock(ctx context.Context, key string) (func(), error) {
	for {
		m.mu.Lock()
		if m.locks == nil {
			m.locks = map[string]chan struct{}{}
		}
		held, ok := m.locks[key]
		if !ok {
			done := make(chan struct{})
			m.locks[key] = done
			m.mu.Unlock()
			return func() {
				m.mu.Lock()
				delete(m.locks, key)
				m.mu.Unlock()
				close(done)
			}, nil
		}
		m.mu.Unlock()
		select {
		case <-held:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func grantKey(issuer, resource string) string { return issuer + "\n" + resource }

// FileStore is a Store in a directory only its owner may read (0700, files
// 0600): a file per grant, registration and server, named by the SHA-256 of
// its key, written whole (a temporary file renamed); a lock file per key of
// Lock, held with flock(2) (on systems without it, Lock serializes this process's
// logins only). It is safe for concurrent use by goroutines and by processes:
// a reader sees a record whole, the one written last.
type FileStore struct {
	Dir string
}

var _ Store = (*FileStore)(nil)

// DefaultDir is the store's directory in the user's configuration directory
// ($XDG_CONFIG_HOME/mcp-resume/oauth, ~/.config/mcp-resume/oauth, or the
// system's equivalent).
func DefaultDir() (string, error) {
	d, err := os.UserConfigDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "mcp-resume", "oauth"), nil
}

func (f *FileStore) path(kind, key string) string {
	sum := sha256.Sum256([]byte(key))
	return filepath.Join(f.Dir, kind, hex.EncodeToString(sum[:16])+".json")
}

// loadFile returns the record of key of kind, nil when there is none.
func loadFile[T any](f *FileStore, kind, key string) (*T, error) {
	v := new(T)
	if ok, err := f.load(kind, key, v); !ok {
		return nil, err
	}
	return v, nil
}

func (f *FileStore) load(kind, key string, v any) (bool, error) {
	b, err := os.ReadFile(f.path(kind, key))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return false, errors.New("oauth: a stored " + kind + " record is damaged: " + err.Error())
	}
	return true, nil
}

func (f *FileStore) save(kind, key string, v any) error {
	dir := filepath.Join(f.Dir, kind)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	// A directory made before with looser permissions is tightened.
	for _, d := range []string{f.Dir, dir} {
		if err := os.Chmod(d, 0o700); err != nil {
			return err
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), f.path(kind, key))
}

func (f *FileStore) remove(kind, key string) error {
	err := os.Remove(f.path(kind, key))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

func (f *FileStore) Grant(issuer, resource string) (*Grant, error) {
	return loadFile[Grant](f, "grants", grantKey(issuer, resource))
}

func (f *FileStore) SaveGrant(g *Grant) error {
	return f.save("grants", grantKey(g.Issuer, g.Resource), g)
}

func (f *FileStore) DeleteGrant(issuer, resource string) error {
	return f.remove("grants", grantKey(issuer, resource))
}

func (f *FileStore) Registration(issuer string) (*Registration, error) {
	return loadFile[Registration](f, "clients", issuer)
}

func (f *FileStore) SaveRegistration(r *Registration) error { return f.save("clients", r.Issuer, r) }

func (f *FileStore) DeleteRegistration(issuer string) error { return f.remove("clients", issuer) }

func (f *FileStore) Server(url string) (*Server, error) {
	return loadFile[Server](f, "servers", url)
}

func (f *FileStore) SaveServer(s *Server) error { return f.save("servers", s.URL, s) }

func (f *FileStore) DeleteServer(url string) error { return f.remove("servers", url) }

// inProcess serializes the logins of this process (flock is per open file
// description: two goroutines of one process would both get it).
var inProcess MemoryStore

func (f *FileStore) Lock(ctx context.Context, key string) (func(), error) {
	unlockHere, err := inProcess.Lock(ctx, f.Dir+"\n"+key)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(f.Dir, "locks")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		unlockHere()
		return nil, err
	}
	sum := sha256.Sum256([]byte(key))
	unlockFile, err := lockFile(ctx, filepath.Join(dir, hex.EncodeToString(sum[:16])+".lock"))
	if err != nil {
		unlockHere()
		return nil, err
	}
	return func() {
		unlockFile()
		unlockHere()
	}, nil
}
