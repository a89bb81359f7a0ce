package snapshots_test

import (
	"testing"

	"github.com/snapflow/snapflow/snapshots"
)

func TestLayout(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{snapshots.CheckpointsPrefix("job"), "job/checkpoints/"},
		{snapshots.CheckpointPrefix("job", 7), "job/checkpoints/chk-00000000000000000007/"},
		{snapshots.StateKey("job", 7, "sum#1"), "job/checkpoints/chk-00000000000000000007/sum#1.state"},
		{snapshots.ManifestKey("job", 7), "job/checkpoints/chk-00000000000000000007/_manifest"},
		{snapshots.ManifestKey("j", 1<<64-1), "j/checkpoints/chk-18446744073709551615/_manifest"},
		{snapshots.SavepointsPrefix("job"), "job/savepoints/"},
		{snapshots.SavepointPrefix("job", "v1"), "job/savepoints/v1/"},
		{snapshots.SavepointStateKey("job", "v1", 7, "sum#1"), "job/savepoints/v1/chk-00000000000000000007/sum#1.state"},
		{snapshots.SavepointManifestKey("job", "v1"), "job/savepoints/v1/_manifest"},
		{snapshots.OriginKey("job"), "job/origin"},
		{snapshots.EpochStateKey("job", 7, 3, "sum#1"), "job/checkpoints/chk-00000000000000000007/e00000000000000000003/sum#1.state"},
		{snapshots.EpochStateKey("job", 7, 0, "sum#1"), "job/checkpoints/chk-00000000000000000007/sum#1.state"},
		{snapshots.SavepointEpochStateKey("job", "v1", 7, 3, "sum#1"), "job/savepoints/v1/chk-00000000000000000007/e00000000000000000003/sum#1.state"},
		{snapshots.LeasesPrefix("job"), "job/leases/"},
		{snapshots.LeaseClaimKey("job", 2), "job/leases/00000000000000000002.claim"},
		{snapshots.LeaseSealKey("job", 2), "job/leases/00000000000000000002.seal"},
		{snapshots.LeaseRenewalKey("job", 2), "job/leases/00000000000000000002.renewal"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
	if a, b := snapshots.ManifestKey("j", 9), snapshots.ManifestKey("j", 10); a >= b {
		t.Errorf("key order is not id order: %q >= %q", a, b)
	}
}
