package dataflow

import (
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"unicode"
)

// codecProblem is why the default codec cannot store a type exactly.
type codecProblem struct {
	subject string // "field X", "fields X and Y", or "the value"
	what    string // what is wrong, after the subject
	fix     string // what to do instead, before "or pass a codec"
}

// message reads e.g. "field count is unexported; export it or pass a codec
// to Value", orCodec being the last part.
func (p *codecProblem) message(orCodec string) string {
	return p.subject + " " + p.what + "; " + p.fix + " or " + orCodec
}

// defaultCodecProblems caches checkDefaultCodec by type.
var defaultCodecProblems sync.Map // reflect.Type -> *codecProblem (nil: fine)

// checkDefaultCodec returns why DefaultCodec cannot round-trip every value
// of t exactly, or nil. The binary codecs always can; the JSON codec is
// checked by reflection, following encoding/json's rules.
func checkDefaultCodec(t reflect.Type) *codecProblem {
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.String:
		return nil
	}
	if p, ok := defaultCodecProblems.Load(t); ok {
		return p.(*codecProblem)
	}
	c := jsonChecker{seen: map[checked]bool{}}
	p := c.check(t, "", true)
	defaultCodecProblems.Store(t, p)
	return p
}

var (
	jsonMarshaler   = reflect.TypeFor[json.Marshaler]()
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textMarshaler   = reflect.TypeFor[encoding.TextMarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
	jsonNumber      = reflect.TypeFor[json.Number]()
)

// checked is a type reached at an addressable position or not: encoding/json
// calls methods with pointer receivers only on addressable values.
type checked struct {
	t    reflect.Type
	addr bool
}

// jsonChecker walks a type as encoding/json encodes and decodes it.
type jsonChecker struct {
	seen map[checked]bool // checked or being checked: recursive types end here
}

func problemAt(path, what, fix string, args ...any) *codecProblem {
	subject := "the value"
	if path != "" {
		subject = "field " + path
	}
	return &codecProblem{subject: subject, what: fmt.Sprintf(what, args...), fix: fix}
}

// check returns why values of t at path cannot round-trip, or nil. addr says
// whether the value is addressable when encoded (decoding always is).
func (c *jsonChecker) check(t reflect.Type, path string, addr bool) *codecProblem {
	if c.seen[checked{t, addr}] {
		return nil
	}
	c.seen[checked{t, addr}] = true
	if t.Kind() == reflect.Interface {
		return problemAt(path, "has interface type %s, whose dynamic type JSON cannot restore (numbers come back as float64, objects as maps)",
			"use a concrete type", typeName(t))
	}
	if t == jsonNumber {
		return problemAt(path, "has type encoding/json.Number, whose empty value JSON stores as 0",
			"use a number type or a string")
	}
	if t.Kind() != reflect.Pointer {
		if p, trusted := checkMethods(t, path, addr); p != nil || trusted {
			return p
		}
	}
	switch t.Kind() {
	case reflect.Complex64, reflect.Complex128, reflect.Chan, reflect.Func, reflect.UnsafePointer:
		return problemAt(path, "has type %s, which JSON cannot encode", "use another type", typeName(t))
	case reflect.Pointer:
		if t.Elem().Kind() == reflect.Pointer {
			return problemAt(path, "has type %s, a pointer to a pointer: JSON stores a nil inner pointer as null, which restores as a nil outer pointer",
				"use a single pointer", typeName(t))
		}
		return c.check(t.Elem(), path, true)
	case reflect.Slice:
		return c.check(t.Elem(), path+"[]", true)
	case reflect.Array:
		return c.check(t.Elem(), path+"[]", addr)
	case reflect.Map:
		if p := checkMapKey(t.Key(), path); p != nil {
			return p
		}
		return c.check(t.Elem(), path+"[]", false) // map values are not addressable
	case reflect.Struct:
		return c.checkStruct(t, path, addr)
	}
	return nil
}

// implements says whether encoding/json finds iface on a value of t.
func implements(t, iface reflect.Type, addr bool) bool {
	if addr {
		return reflect.PointerTo(t).Implements(iface)
	}
	return t.Implements(iface)
}

// checkMethods applies encoding/json's marshaling methods: a type that
// encodes and decodes itself (MarshalJSON and UnmarshalJSON, or MarshalText
// and UnmarshalText) is trusted; one with only one side of a pair is not.
func checkMethods(t reflect.Type, path string, addr bool) (p *codecProblem, trusted bool) {
	mj, uj := implements(t, jsonMarshaler, addr), reflect.PointerTo(t).Implements(jsonUnmarshaler)
	mt, ut := implements(t, textMarshaler, addr), reflect.PointerTo(t).Implements(textUnmarshaler)
	pair := func(m, u bool, iface reflect.Type, marshal, unmarshal string) (*codecProblem, bool) {
		switch {
		case m && u:
			return checkPromoted(t, path, iface, marshal), true
		case u && implements(t, iface, true):
			return problemAt(path, "has type %s, whose %s method has a pointer receiver, which encoding/json does not call on map values",
				"store a pointer", typeName(t), marshal), true
		case u:
			return problemAt(path, "has type %s, which implements %s but not %s, so JSON would not encode what it decodes",
				"implement both", typeName(t), unmarshal, marshal), true
		default:
			return problemAt(path, "has type %s, which implements %s but not %s, so JSON would not decode what it encodes",
				"implement both", typeName(t), marshal, unmarshal), true
		}
	}
	switch {
	case mj || uj:
		return pair(mj, uj, jsonMarshaler, "MarshalJSON", "UnmarshalJSON")
	case mt || ut:
		return pair(mt, ut, textMarshaler, "MarshalText", "UnmarshalText")
	}
	return nil, false
}

// checkPromoted refuses a struct whose marshaling method is promoted from
// an embedded field while it has other fields: JSON would encode only the
// embedded value. A struct that defines its own method is refused as well,
// which passing JSONCodec explicitly overrides.
func checkPromoted(t reflect.Type, path string, iface reflect.Type, method string) *codecProblem {
	if t.Kind() != reflect.Struct || t.NumField() < 2 {
		return nil
	}
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous && implements(f.Type, iface, true) {
			return problemAt(path, "has type %s, which embeds %s: its %s method encodes only the embedded value, and the other fields would be lost",
				"make the embedded field a named field", typeName(t), typeName(f.Type), method)
		}
	}
	return nil
}

// checkMapKey refuses map keys that encoding/json cannot round-trip: it
// encodes string kinds as they are, integer kinds in decimal, and other
// types with MarshalText; it decodes keys with UnmarshalText when the key
// type has it, else by kind.
func checkMapKey(k reflect.Type, path string) *codecProblem {
	mt, ut := k.Implements(textMarshaler), reflect.PointerTo(k).Implements(textUnmarshaler)
	switch k.Kind() {
	case reflect.String:
		if ut {
			return problemAt(path, "has map key type %s, a string type with UnmarshalText, which JSON uses to decode keys but not to encode them",
				"use a key type without UnmarshalText", typeName(k))
		}
		return nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if mt != ut {
			return problemAt(path, "has map key type %s, which has only one of MarshalText (value receiver) and UnmarshalText, so JSON would encode and decode its keys differently",
				"implement both", typeName(k))
		}
		return nil
	case reflect.Pointer, reflect.Interface:
		return problemAt(path, "has map key type %s, which JSON cannot restore (keys are compared by identity)",
			"use a string or integer key", typeName(k))
	}
	if mt && ut {
		return nil
	}
	return problemAt(path, "has map key type %s: JSON object keys can only be strings, integers, or types implementing encoding.TextMarshaler (value receiver) and TextUnmarshaler",
		"use such a key", typeName(k))
}

// jsonField is one field of a struct as encoding/json sees it, with the
// fields of embedded structs promoted.
type jsonField struct {
	name string // JSON object key
	path string // Go path from the checked value, e.g. "Inner.Name"
	typ  reflect.Type
}

// checkStruct checks the fields JSON encodes, and refuses any field it
// skips or loses.
func (c *jsonChecker) checkStruct(t reflect.Type, path string, addr bool) *codecProblem {
	var fields []jsonField
	if p := collectFields(t, path, []reflect.Type{t}, &fields); p != nil {
		return p
	}
	first := map[string]string{} // JSON name -> path of its first field
	for _, f := range fields {
		if other, dup := first[f.name]; dup {
			return &codecProblem{
				subject: "fields " + other + " and " + f.path,
				what:    fmt.Sprintf("have the same JSON name %q, and JSON keeps at most one of them", f.name),
				fix:     "rename or tag one of them",
			}
		}
		first[f.name] = f.path
	}
	for _, f := range fields {
		if p := c.check(f.typ, f.path, addr); p != nil {
			return p
		}
	}
	return nil
}

// collectFields appends the fields of struct t that JSON encodes, promoting
// those of untagged embedded structs, and refuses fields that JSON skips.
// chain holds the structs being embedded, to refuse recursive embedding.
func collectFields(t reflect.Type, prefix string, chain []reflect.Type, out *[]jsonField) *codecProblem {
	for i := range t.NumField() {
		sf := t.Field(i)
		if sf.Name == "_" {
			continue // blank fields hold no data: padding, or markers such as _ [0]func()
		}
		path := sf.Name
		if prefix != "" {
			path = prefix + "." + sf.Name
		}
		tag := sf.Tag.Get("json")
		if tag == "-" {
			return problemAt(path, "is excluded from JSON by its `json:\"-\"` tag", "remove the tag")
		}
		name, opts, _ := strings.Cut(tag, ",")
		if !validJSONName(name) {
			name = ""
		}
		ft := sf.Type
		if sf.Anonymous {
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if !sf.IsExported() && ft.Kind() != reflect.Struct {
				return problemAt(path, "is an embedded field of the unexported type %s, which JSON skips", "export its type or make it a named exported field", typeName(sf.Type))
			}
			if name == "" && ft.Kind() == reflect.Struct {
				if sf.Type.Kind() == reflect.Pointer && !sf.IsExported() {
					return problemAt(path, "embeds a pointer to the unexported struct %s, which JSON cannot allocate when decoding",
						"embed the struct itself, or export its type", typeName(ft))
				}
				for _, o := range chain {
					if o == ft {
						return problemAt(path, "embeds %s, which embeds itself: JSON keeps only the outermost of the repeated fields",
							"make the embedded field a named field", typeName(ft))
					}
				}
				if p := collectFields(ft, path, append(chain, ft), out); p != nil {
					return p
				}
				continue
			}
		} else if !sf.IsExported() {
			return problemAt(path, "is unexported, and JSON skips it", "export it")
		}
		if hasOption(opts, "omitempty") && ft.Kind() == reflect.Map {
			return problemAt(path, "is a map tagged omitempty: an empty map would be omitted and restored as nil, which panics when written to",
				"remove omitempty")
		}
		if name == "" {
			name = sf.Name
		}
		*out = append(*out, jsonField{name: name, path: path, typ: sf.Type})
	}
	return nil
}

func hasOption(opts, opt string) bool {
	for o := range strings.SplitSeq(opts, ",") {
		if o == opt {
			return true
		}
	}
	return false
}

// validJSONName is encoding/json's rule for a tag name it uses as the key;
// it ignores other names.
func validJSONName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		switch {
		case strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c):
		case !unicode.IsLetter(c) && !unicode.IsDigit(c):
			return false
		}
	}
	return true
}

// CheckDefaultCodec returns nil when DefaultCodec[T] stores every value of
// T exactly, and otherwise an error wrapping ErrInvalidState that says
// which field it cannot store and why: the check Value and MapOf make,
// for libraries that keep values of their users' types in a state of
// their own (see Value for the rules).
func CheckDefaultCodec[T any]() error {
	t := reflect.TypeFor[T]()
	if p := checkDefaultCodec(t); p != nil {
		return &stateError{msg: fmt.Sprintf("type %s: %s", typeName(t), p.message("pass a codec")), sentinel: ErrInvalidState}
	}
	return nil
}
