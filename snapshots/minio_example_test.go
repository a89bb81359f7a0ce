package snapshots_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/snapflow/snapflow/snapshots"
)

// NewMinIO checks the store before returning it, so a wrong endpoint,
// wrong credentials or a missing bucket show up at once, as errors that
// say which, and never contain the secret key.
func ExampleNewMinIO() {
	_, err := snapshots.NewMinIO(context.Background(), snapshots.MinIOConfig{
		Endpoint:   "127.0.0.1:1", // nothing listens here
		Bucket:     "checkpoints",
		Prefix:     "prod",
		AccessKey:  "snapflow",
		SecretKey:  "snapflow-secret",
		MaxRetries: -1, // fail at once
	})
	fmt.Println(errors.Is(err, snapshots.ErrUnreachable))
	// Output:
	// true
}
