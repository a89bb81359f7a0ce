package snapshots

// SetMinIORetryHook makes m call hook before each retry, with the
// operation, the attempt that failed (from 0) and its error.
func SetMinIORetryHook(m *MinIO, hook func(op string, attempt int, err error)) { m.retryHook = hook }

// NewMinIOUnchecked builds a MinIO store without Check, so that tests can
// hold a store whose server rejects it.
func NewMinIOUnchecked(cfg MinIOConfig) (*MinIO, error) { return newMinIO(cfg) }

// SetStreamLimits makes c read key-group sections in runs of at most
// runBytes (merging gaps of at most gap bytes), with workers reads at once
// and at most inFlight bytes read but not yet handed over; admitted, when
// not nil, sees the bytes and the number of the runs in flight each time a
// run is let in.
func SetStreamLimits(c *Checkpoints, runBytes, gap, workers, inFlight uint64, admitted func(inFlight uint64, runs int)) {
	c.streamLimits.Store(&streamLimits{runBytes: runBytes, runGap: gap, workers: workers, inFlight: inFlight, admitted: admitted})
}

// CRCCombine is crcCombine.
var CRCCombine = crcCombine

// MachineID is machineID.
var MachineID = machineID
