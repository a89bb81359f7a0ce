package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// formatTotal is the line the file sink writes for a total: "key sum".
func formatTotal(t total) string {
	return strconv.FormatInt(t.Key, 10) + " " + strconv.FormatInt(t.Sum, 10)
}

// sinkResult is what checkSink found in the committed part files.
type sinkResult struct {
	parts   int   // committed part files
	records int64 // lines in them
}

// checkSink reads the committed part files in dir (the names that do not
// start with a dot: in-progress files start with one) and checks that they
// hold every record's line once and nothing else. The sum emits, for every
// record, its key's running sum, so that a key's lines, sorted by sum, step
// by the values of its records: the steps must be exactly the values
// i+1 of the records i = key, key+keys, ... below records, each once,
// whatever order the records arrived in. A record committed twice, one
// missing, or a line of a replay that saw another order, breaks that.
func checkSink(dir string, p jobParams) (sinkResult, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return sinkResult{}, fmt.Errorf("sink: %w", err)
	}
	var res sinkResult
	sums := map[int64][]int64{} // key -> the sums of its lines
	seen := map[[2]int64]string{}
	var problems []error
	wrong := 0
	note := func(err error) {
		wrong++
		if wrong <= 5 {
			problems = append(problems, err)
		}
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if !e.Type().IsRegular() {
			note(fmt.Errorf("%s is not a regular file", e.Name()))
			continue
		}
		res.parts++
		if err := readPart(filepath.Join(dir, e.Name()), func(line int, key, sum int64) {
			res.records++
			at := fmt.Sprintf("%s:%d", e.Name(), line)
			if prev, dup := seen[[2]int64{key, sum}]; dup {
				note(fmt.Errorf("%s: the line %q is also at %s: a record committed twice", at, formatTotal(total{key, sum}), prev))
				return
			}
			seen[[2]int64{key, sum}] = at
			sums[key] = append(sums[key], sum)
		}); err != nil {
			return res, err
		}
	}
	for key := range sums {
		if key < 0 || key >= p.keys {
			note(fmt.Errorf("lines of key %d, which is not one of the %d keys", key, p.keys))
		}
	}
	for key := range p.keys {
		if err := checkKey(p, key, sums[key]); err != nil {
			note(err)
		}
	}
	if res.records != p.records {
		problems = append(problems, fmt.Errorf("%d lines in %d part files, want one per record, %d", res.records, res.parts, p.records))
	}
	if wrong > 5 {
		problems = append(problems, fmt.Errorf("and %d more problems", wrong-5))
	}
	if len(problems) > 0 {
		return res, fmt.Errorf("%w: the sink's part files in %s: %w", errResult, dir, errors.Join(problems...))
	}
	return res, nil
}

// checkKey checks the sums of one key's lines (see checkSink).
func checkKey(p jobParams, key int64, sums []int64) error {
	count, _ := expected(p.records, p.keys, key)
	if int64(len(sums)) != count {
		return fmt.Errorf("key %d: %d lines, want one per record of the key, %d", key, len(sums), count)
	}
	sums = slices.Clone(sums)
	slices.Sort(sums)
	want := map[int64]bool{} // the values of the key's records
	for i := key; i < p.records; i += p.keys {
		want[i+1] = true
	}
	prev := int64(0)
	for _, s := range sums {
		step := s - prev
		if !want[step] {
			return fmt.Errorf("key %d: the sums %d then %d step by %d, which is not the value of a record of the key not counted yet", key, prev, s, step)
		}
		delete(want, step)
		prev = s
	}
	return nil
}

// readPart calls line for every line of the part file at path.
func readPart(path string, line func(n int, key, sum int64)) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("sink: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		n++
		k, s, ok := strings.Cut(sc.Text(), " ")
		key, err1 := strconv.ParseInt(k, 10, 64)
		sum, err2 := strconv.ParseInt(s, 10, 64)
		if !ok || err1 != nil || err2 != nil {
			return fmt.Errorf("%w: sink: %s:%d: %q is not \"key sum\"", errResult, filepath.Base(path), n, sc.Text())
		}
		line(n, key, sum)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("sink: %s: %w", path, err)
	}
	return nil
}
