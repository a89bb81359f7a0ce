package diskstate

import "github.com/cockroachdb/pebble/v2/vfs"

// noSync is the file system of the tasks' databases: it never forces a
// write to the disk. A database is never reopened after a crash (a task
// builds a new one from a checkpoint, whose files in the store are the
// durable copy, and a local copy is used only if it verifies), so its
// fsyncs buy nothing, and they would stall the synchronous phase of a
// checkpoint, which flushes the memtable, for milliseconds each.
type noSync struct{ vfs.FS }

func (fs noSync) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	return wrapNoSync(fs.FS.Create(name, c))
}

func (fs noSync) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	return wrapNoSync(fs.FS.OpenReadWrite(name, c, opts...))
}

func (fs noSync) OpenDir(name string) (vfs.File, error) { return wrapNoSync(fs.FS.OpenDir(name)) }

func (fs noSync) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	return wrapNoSync(fs.FS.ReuseForWrite(oldname, newname, c))
}

func wrapNoSync(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return noSyncFile{f}, nil
}

type noSyncFile struct{ vfs.File }

func (noSyncFile) Sync() error                { return nil }
func (noSyncFile) SyncData() error            { return nil }
func (noSyncFile) SyncTo(int64) (bool, error) { return true, nil }
