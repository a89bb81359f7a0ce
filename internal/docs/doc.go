// Package docs holds the test that keeps the documentation honest: every
// Go snippet of README.md and docs/*.md is compiled (go vet) against the
// module as it is. The package has no code of its own.
//
// A snippet is a ```go block. One that starts with a package clause is a
// whole file; one whose first line declares (func, type, var, const) is
// put at the top level of a file; anything else is the body of
// func(ctx context.Context) error, and so ends with a return. The imports
// are the packages the snippet names (fmt, topology, actors, ...), from a
// fixed list. A block that is not meant to compile is marked ```text.
package docs
