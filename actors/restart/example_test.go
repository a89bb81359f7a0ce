package restart_test

import (
	"fmt"
	"time"

	"github.com/snapflow/snapflow/actors/restart"
)

func Example() {
	s := restart.New(restart.Policy{MaxFailures: 3, Window: time.Minute})
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	// The shell passes rand.Float64(); 0.5 is the midpoint, no jitter.
	for i := range 4 {
		now := start.Add(time.Duration(i) * time.Second)
		delay, ok := s.OnFailure(now, 0.5)
		fmt.Println(delay, ok, s.Failures(now))
	}
	// A minute after the last failure, the window is quiet again.
	fmt.Println(s.Failures(start.Add(4*time.Second + time.Minute)))
	// Output:
	// 10ms true 1
	// 20ms true 2
	// 40ms true 3
	// 0s false 4
	// 0
}
