//go:build linux

package diskstate

import (
	"encoding/binary"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// BenchmarkPointReads is the keyed sum of bench's parity job with a large
// state, on one task's database: 64 key groups of keys, each key with a
// sum (8 bytes) and a value of 256 random bytes written once; then each
// record, key after key in turn, reads its key's sum and writes it back,
// applied 256 records at a time. It reports the block cache's hits and
// misses per record, and the CPU time of the process and of the reading
// thread per record, which vary less than the wall time on a shared
// machine. POINTREAD_KEYS sets the keys (default 1<<19, a task's half of a
// million), POINTREAD_CACHE the CacheBytes and POINTREAD_MEM the
// MemTableBytes (default: the defaults).
func BenchmarkPointReads(b *testing.B) {
	keys := envInt("POINTREAD_KEYS", 1<<19)
	d, err := Open(Config{Dir: b.TempDir(), CacheBytes: int64(envInt("POINTREAD_CACHE", 0)),
		MemTableBytes: int64(envInt("POINTREAD_MEM", 0))}, "bench")
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	blob := make([]byte, 256)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range blob {
		blob[i] = byte(rng.Uint32())
	}
	key := func(dst []byte, k int, sid uint16) []byte {
		kg := int(uint64(k)*0x9e3779b97f4a7c15>>58) % 64
		return binary.BigEndian.AppendUint64(Prefix(dst, kg, sid), uint64(k))
	}
	bt := d.NewBatch()
	var kb, vb []byte
	for k := range keys {
		kb = key(kb[:0], k, 0)
		vb = binary.BigEndian.AppendUint64(vb[:0], 1)
		_ = bt.Set(kb, vb)
		kb = key(kb[:0], k, 1)
		_ = bt.Set(kb, blob)
		if k%256 == 255 {
			if err := d.Apply(bt); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := d.Apply(bt); err != nil {
		b.Fatal(err)
	}
	next := 0
	step := func() {
		kb = key(kb[:0], next, 0)
		var ok bool
		if vb, ok, err = d.Get(vb[:0], kb); err != nil || !ok {
			b.Fatalf("key %d: present %v, %v", next, ok, err)
		}
		vb = binary.BigEndian.AppendUint64(vb[:0], binary.BigEndian.Uint64(vb)+1)
		_ = bt.Set(kb, vb)
		if next%256 == 255 {
			if err := d.Apply(bt); err != nil {
				b.Fatal(err)
			}
		}
		if next++; next == keys {
			next = 0
		}
	}
	// One pass of updates as in the job, so that the tables hold sums of
	// several ages; then the compactions the writes started end.
	for range keys {
		step()
	}
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if m := d.db.Metrics(); m.Compact.NumInProgress == 0 && m.Compact.EstimatedDebt == 0 {
			break
		}
	}
	before := d.db.Metrics().BlockCache
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cpu0, thread0 := cpuTime(syscall.RUSAGE_SELF), cpuTime(syscall.RUSAGE_THREAD)
	b.ResetTimer()
	for range b.N {
		step()
	}
	b.StopTimer()
	b.ReportMetric(float64(cpuTime(syscall.RUSAGE_SELF)-cpu0)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(cpuTime(syscall.RUSAGE_THREAD)-thread0)/float64(b.N), "thread-ns/op")
	after := d.db.Metrics()
	b.ReportMetric(float64(after.BlockCache.Hits-before.Hits)/float64(b.N), "hits/op")
	b.ReportMetric(float64(after.BlockCache.Misses-before.Misses)/float64(b.N), "misses/op")
	if testing.Verbose() {
		b.Log(after.String())
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

// cpuTime is the CPU time (user and system) of the process or the thread
// so far, in nanoseconds.
func cpuTime(who int) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
