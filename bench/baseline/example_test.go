package baseline_test

import (
	"context"
	"fmt"

	"github.com/snapflow/snapflow/bench/baseline"
)

func ExampleRunProtoactor() {
	r, err := baseline.RunProtoactor(context.Background(), baseline.Config{Parallelism: 2, Keys: 10, Records: 100_000})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(r.Records, "records; key 3 summed", r.Sums[3])
	// Output: 100000 records; key 3 summed 10000
}
