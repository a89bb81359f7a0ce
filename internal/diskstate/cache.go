package diskstate

import (
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
)

// The block cache.
//
// The task databases of a process share one block cache per configured
// size (CacheBytes, or DefaultCacheBytes when it is 0): a task whose state
// is read more takes more of it, and the memory it may take does not grow
// with the number of tasks. Pebble charges a database's memtables to its
// block cache (a reservation per memtable: the one being written, one
// being flushed, and one kept for reuse), so that, left alone, memtables
// of 16 MiB would leave a cache of 32 MiB no room for a block. Each open
// database therefore grows the cache's capacity by what its memtables
// normally reserve (memtableShare memtables), for as long as it is open:
// the blocks get their part of CacheBytes, and memtables come on top.
//
// A quarter of CacheBytes is not the block cache's: the tasks keep values
// they wrote or read lately decoded, in maps (see KeptShare), which spares
// a read of such a value the lookup in the tree; the open databases share
// that quarter equally.

const (
	// minDefaultCache is the smallest default block cache.
	minDefaultCache = 64 << 20
	// defaultCacheDivisor: the default block cache is the process's
	// memory divided by this.
	defaultCacheDivisor = 4
	// unknownMemory is the memory assumed where it cannot be read (other
	// systems than Linux).
	unknownMemory = 1 << 30
	// memtableShare is how many memtables' reservations an open database
	// adds to its cache's capacity: the one being written and the one kept
	// for reuse. A flush holds one more for its duration.
	memtableShare = 2
)

// DefaultCacheBytes is the block cache shared by the task databases of a
// process whose Config leaves CacheBytes at 0: a quarter of the memory
// available to the process, and at least 64 MiB. The memory available is
// the smallest of the machine's memory, the memory limit of the process's
// control group (cgroup v2 memory.max or v1 memory.limit_in_bytes, at
// every level of its path) and the Go runtime's memory limit (GOMEMLIMIT,
// debug.SetMemoryLimit) when one is set; 1 GiB where none can be read.
// It is computed once per process.
func DefaultCacheBytes() int64 {
	defaultCacheOnce.Do(func() { defaultCache = cacheFor(availableMemory()) })
	return defaultCache
}

var (
	defaultCacheOnce sync.Once
	defaultCache     int64
)

// cacheFor is the default block cache for memory bytes available.
func cacheFor(memory int64) int64 { return max(minDefaultCache, memory/defaultCacheDivisor) }

// availableMemory is the memory the process may use (see
// DefaultCacheBytes).
func availableMemory() int64 {
	m := machineMemory()
	if m <= 0 {
		m = unknownMemory
	}
	if c := cgroupLimit("/"); c > 0 {
		m = min(m, c)
	}
	if g := debug.SetMemoryLimit(-1); g > 0 && g < math.MaxInt64 {
		m = min(m, g)
	}
	return m
}

// cgroupLimit is the smallest memory limit of the control groups the
// process is in, read under root (the file system's root; tests give
// another), or 0 when none is set. It looks at the cgroup v2 hierarchy
// (memory.max) and the v1 memory controller (memory.limit_in_bytes), at the
// process's own group and each of its parents, and at the mount's root
// (where a container sees its own limit).
func cgroupLimit(root string) int64 {
	self, err := os.ReadFile(filepath.Join(root, "proc/self/cgroup"))
	if err != nil {
		return 0
	}
	limit := int64(0)
	take := func(file string) {
		b, err := os.ReadFile(file)
		if err != nil {
			return
		}
		s := strings.TrimSpace(string(b))
		if s == "max" {
			return
		}
		n, err := strconv.ParseInt(s, 10, 64)
		// v1 writes "no limit" as the largest multiple of the page size.
		if err != nil || n <= 0 || n >= math.MaxInt64/2 {
			return
		}
		if limit == 0 || n < limit {
			limit = n
		}
	}
	walk := func(mount, path, file string) {
		for p := filepath.Clean("/" + path); ; p = filepath.Dir(p) {
			take(filepath.Join(root, mount, p, file))
			if p == "/" {
				return
			}
		}
	}
	for _, line := range strings.Split(string(self), "\n") {
		// hierarchy-ID:controller-list:cgroup-path
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			walk("sys/fs/cgroup", parts[2], "memory.max")
			walk("sys/fs/cgroup/unified", parts[2], "memory.max")
		case hasController(parts[1], "memory"):
			walk("sys/fs/cgroup/memory", parts[2], "memory.limit_in_bytes")
		}
	}
	return limit
}

func hasController(list, name string) bool {
	for _, c := range strings.Split(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// keptDivisor: the values kept decoded get CacheBytes divided by this, the
// block cache the rest.
const keptDivisor = 4

// sharedCache is a block cache shared by the databases open with the same
// configured size.
type sharedCache struct {
	size  int64
	cache *pebble.Cache
	refs  int // open databases; guarded by caches.mu
	dbs   atomic.Int64
}

// keptShare is what each open database's task may keep of decoded values.
func (c *sharedCache) keptShare() int64 { return c.size / keptDivisor / max(1, c.dbs.Load()) }

var caches struct {
	mu sync.Mutex
	m  map[int64]*sharedCache
}

// acquireCache returns the process's cache of size bytes, made on first
// use, and grows its capacity by memtableShare memtables of memtable
// bytes; release undoes both.
func acquireCache(size, memtable int64) (c *sharedCache, release func()) {
	caches.mu.Lock()
	defer caches.mu.Unlock()
	if caches.m == nil {
		caches.m = map[int64]*sharedCache{}
	}
	c = caches.m[size]
	if c == nil {
		c = &sharedCache{size: size, cache: pebble.NewCache(size - size/keptDivisor)}
		caches.m[size] = c
	}
	c.refs++
	c.dbs.Add(1)
	// A negative reservation adds capacity: the cache's target size is its
	// size less what is reserved.
	unreserve := c.cache.Reserve(-int(memtableShare * memtable))
	var once sync.Once
	return c, func() {
		once.Do(func() {
			unreserve()
			caches.mu.Lock()
			defer caches.mu.Unlock()
			c.refs--
			c.dbs.Add(-1)
			if c.refs == 0 {
				delete(caches.m, size)
				c.cache.Unref() // freed once its databases have closed
			}
		})
	}
}
