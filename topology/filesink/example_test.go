package filesink_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
	"github.com/snapflow/snapflow/topology/filesink"
)

// A job whose output is committed exactly once into part files: each
// checkpoint's records become visible (renamed from their in-progress
// files) only once the checkpoint completes, and a rollback never commits
// a record twice.
func ExampleNew() {
	out, err := os.MkdirTemp("", "filesink-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(out)
	g := topology.New("squares")
	squares := topology.Generate(g, "squares", 100, func(i int64) int64 { return i * i })
	topology.TwoPhaseCommitSink(squares, "files", filesink.New(out, filesink.Lines(func(v int64) string {
		return strconv.FormatInt(v, 10)
	})))
	if err := actors.Run(context.Background(), g, actors.WithStore(snapshots.NewMem())); err != nil {
		fmt.Println(err)
		return
	}
	parts, _ := filepath.Glob(filepath.Join(out, "part-*"))
	var lines []int64
	for _, p := range parts {
		f, err := os.Open(p)
		if err != nil {
			fmt.Println(err)
			return
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			v, _ := strconv.ParseInt(sc.Text(), 10, 64)
			lines = append(lines, v)
		}
		f.Close()
	}
	sort.Slice(lines, func(i, j int) bool { return lines[i] < lines[j] })
	fmt.Println(len(lines), "records committed; the last:", lines[len(lines)-1])
	// Output: 100 records committed; the last: 9801
}
