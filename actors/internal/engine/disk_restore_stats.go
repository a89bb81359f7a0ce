package engine

import (
	"sync"
	"time"

	"github.com/snapflow/snapflow/internal/dataflow"
)

// DiskRestoreStats is what the restores of a job's tasks in this process
// did with the database files of their on-disk state (see WithDiskState),
// summed over the restores since the job started.
type DiskRestoreStats struct {
	// Tasks counts the task restores that read database files.
	Tasks int
	// LocalBytes and DownloadedBytes are the bytes of the files taken
	// from local copies (task-local recovery) and read from the store.
	LocalBytes, DownloadedBytes int64
	// SkippedBytes are the bytes of the tables not read: a task restored
	// at another parallelism reads a stored database's tables that hold
	// keys of its key groups only.
	SkippedBytes int64
	// Adopted counts the stored databases that became a task's database,
	// their files taken over without a copy.
	Adopted int
	// Excised counts the ranges of key groups removed from an adopted
	// database (those outside its task's range) without rewriting a file.
	Excised int
	// IngestedTables and IngestedBytes are the tables written from the
	// entries of a stored database in key order and ingested into a
	// task's database, and their bytes; IngestedEntries their entries.
	IngestedTables  int
	IngestedBytes   int64
	IngestedEntries int64
	// Rebuilt counts the entries written one by one, through batches.
	Rebuilt int64
	// Download and Rebuild are the time the tasks spent putting the files
	// in place (from local copies or the store) and building their
	// databases from them, summed over the tasks.
	Download, Rebuild time.Duration
	// SlowestDownload and SlowestRebuild are those of the task whose
	// download and rebuild together took longest: the tasks restore side
	// by side, so they bound the job's restore.
	SlowestDownload, SlowestRebuild time.Duration
}

// diskRestoreStats gathers the DiskRestoreStats of a job's tasks.
type diskRestoreStats struct {
	mu sync.Mutex
	s  DiskRestoreStats
}

// add records one task's restore: the bytes and times of its downloads
// and rebuilds, and the reports of its databases' restores.
func (d *diskRestoreStats) add(local, downloaded, skipped int64, download, rebuild time.Duration, reps []dataflow.DiskRestore) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := &d.s
	s.Tasks++
	s.LocalBytes += local
	s.DownloadedBytes += downloaded
	s.SkippedBytes += skipped
	s.Download += download
	s.Rebuild += rebuild
	if download+rebuild > s.SlowestDownload+s.SlowestRebuild {
		s.SlowestDownload, s.SlowestRebuild = download, rebuild
	}
	for _, r := range reps {
		if r.Adopted {
			s.Adopted++
		}
		s.Excised += r.Excised
		s.IngestedTables += r.IngestedTables
		s.IngestedBytes += r.IngestedBytes
		s.IngestedEntries += r.IngestedEntries
		s.Rebuilt += r.Rebuilt
	}
}

func (d *diskRestoreStats) get() DiskRestoreStats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.s
}

// DiskRestoreStats returns what the restores of the job's tasks in this
// process have done with the files of their on-disk state so far.
func (j *Job) DiskRestoreStats() DiskRestoreStats { return j.sh.diskRestores.get() }
