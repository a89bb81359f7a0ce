package diskstate

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigCheckNamesField: a configuration refused names the field.
func TestConfigCheckNamesField(t *testing.T) {
	for _, c := range []struct {
		cfg   Config
		field string
	}{
		{Config{CacheBytes: -1}, "CacheBytes"},
		{Config{CacheBytes: 1000}, "CacheBytes"},
		{Config{MemTableBytes: -1}, "MemTableBytes"},
		{Config{MemTableBytes: 1000}, "MemTableBytes"},
	} {
		err := c.cfg.Check()
		if err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%+v: %v, want an error naming %s", c.cfg, err, c.field)
		}
	}
	if err := (Config{CacheBytes: 1 << 20, MemTableBytes: 1 << 20}).Check(); err != nil {
		t.Errorf("1 MiB each: %v", err)
	}
}

// TestDefaultCacheRule: the default block cache is a quarter of the
// memory, at least 64 MiB, and the memory is the smallest limit of the
// process's control groups where one is set.
func TestDefaultCacheRule(t *testing.T) {
	for _, c := range []struct{ memory, want int64 }{
		{1 << 30, 256 << 20},
		{16 << 30, 4 << 30},
		{100 << 20, 64 << 20},
		{0, 64 << 20},
	} {
		if got := cacheFor(c.memory); got != c.want {
			t.Errorf("cacheFor(%d) = %d, want %d", c.memory, got, c.want)
		}
	}
	if got, want := DefaultCacheBytes(), cacheFor(availableMemory()); got != want || got < 64<<20 {
		t.Errorf("DefaultCacheBytes() = %d, want %d (at least 64 MiB)", got, want)
	}

	write := func(root, name, content string) {
		t.Helper()
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// cgroup v2: the group's own limit, and a parent's smaller one.
	v2 := t.TempDir()
	write(v2, "proc/self/cgroup", "0::/jobs/a\n")
	write(v2, "sys/fs/cgroup/jobs/a/memory.max", "2147483648\n")
	write(v2, "sys/fs/cgroup/jobs/memory.max", "1073741824\n")
	write(v2, "sys/fs/cgroup/memory.max", "max\n")
	if got := cgroupLimit(v2); got != 1<<30 {
		t.Errorf("cgroup v2: limit %d, want the parent's %d", got, 1<<30)
	}
	// cgroup v1: the memory controller's limit; its "no limit" value is
	// none.
	v1 := t.TempDir()
	write(v1, "proc/self/cgroup", "5:cpu,cpuacct:/x\n4:memory:/docker/abc\n")
	write(v1, "sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes", "536870912\n")
	write(v1, "sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n")
	if got := cgroupLimit(v1); got != 512<<20 {
		t.Errorf("cgroup v1: limit %d, want %d", got, 512<<20)
	}
	// A container that sees its own group as the root.
	inside := t.TempDir()
	write(inside, "proc/self/cgroup", "0::/\n")
	write(inside, "sys/fs/cgroup/memory.max", "3221225472\n")
	if got := cgroupLimit(inside); got != 3<<30 {
		t.Errorf("cgroup v2 at the root: limit %d, want %d", got, 3<<30)
	}
	// No limit anywhere, and no cgroup file at all.
	none := t.TempDir()
	write(none, "proc/self/cgroup", "0::/u\n4:memory:/u\n")
	write(none, "sys/fs/cgroup/u/memory.max", "max\n")
	write(none, "sys/fs/cgroup/memory/u/memory.limit_in_bytes", "9223372036854771712\n")
	if got := cgroupLimit(none); got != 0 {
		t.Errorf("no limit set: %d, want 0", got)
	}
	if got := cgroupLimit(t.TempDir()); got != 0 {
		t.Errorf("no /proc/self/cgroup: %d, want 0", got)
	}
}

// TestDatabasesShareCache: databases configured with the same CacheBytes
// share one block cache, another size has its own, and the cache goes
// once the last of its databases closes.
func TestDatabasesShareCache(t *testing.T) {
	const size = 3 << 20 // a size no other test uses
	cfg := Config{Dir: t.TempDir(), CacheBytes: size, MemTableBytes: 1 << 20}
	a, err := Open(cfg, "a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := Open(cfg, "b")
	if err != nil {
		t.Fatal(err)
	}
	other := cfg
	other.CacheBytes = size + 1<<20
	c, err := Open(other, "c")
	if err != nil {
		t.Fatal(err)
	}
	if a.cache != b.cache || a.cache == c.cache {
		t.Errorf("caches: a %p, b %p, c %p; want a and b to share theirs, c its own", a.cache, b.cache, c.cache)
	}
	registered := func(size int64) int {
		caches.mu.Lock()
		defer caches.mu.Unlock()
		if sc := caches.m[size]; sc != nil {
			return sc.refs
		}
		return 0
	}
	if n := registered(size); n != 2 {
		t.Errorf("the cache of %d B is used by %d databases, want 2", size, n)
	}
	for _, d := range []*DB{a, c} {
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if n, m := registered(size), registered(other.CacheBytes); n != 1 || m != 0 {
		t.Errorf("after closing a and c: %d and %d databases, want 1 and 0", n, m)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if n := registered(size); n != 0 {
		t.Errorf("after closing every database: %d, want the cache gone", n)
	}
}

// TestCacheHoldsBlocksBesideMemtables: the memtables do not take the block
// cache's room. Pebble charges each memtable to the cache; with a cache of
// 2 MiB and memtables of 1 MiB (two of them held at once), the blocks
// would have none, and a second read of the same keys would miss again.
func TestCacheHoldsBlocksBesideMemtables(t *testing.T) {
	d, err := Open(Config{Dir: t.TempDir(), CacheBytes: 2 << 20, MemTableBytes: 1 << 20}, "cache")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	const keys = 20000
	key := func(k int) []byte { return binary.BigEndian.AppendUint32(Prefix(nil, k%64, 1), uint32(k)) }
	value := make([]byte, 100) // 2 MB in all: flushes to tables
	b := d.NewBatch()
	for k := range keys {
		if err := b.Set(key(k), value); err != nil {
			t.Fatal(err)
		}
		if k%500 == 499 {
			if err := d.Apply(b); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := d.Apply(b); err != nil {
		t.Fatal(err)
	}
	if err := d.db.Flush(); err != nil {
		t.Fatal(err)
	}
	// Reads of the first 2,000 keys (about 200 KB of blocks), twice.
	read := func() {
		for k := range 2000 {
			if _, ok, err := d.Get(nil, key(k)); err != nil || !ok {
				t.Fatalf("key %d: present %v, %v", k, ok, err)
			}
		}
	}
	read()
	before := d.db.Metrics().BlockCache
	read()
	after := d.db.Metrics().BlockCache
	hits, misses := after.Hits-before.Hits, after.Misses-before.Misses
	if hits == 0 || misses*10 > hits {
		t.Errorf("the second reading of the same keys: %d block cache hits and %d misses, want hits (cache: %d B in %d blocks)",
			hits, misses, after.Size, after.Count)
	}
}
