package dataflow

import (
	"reflect"
	"sync"
	"unsafe"
)

// Batches are bounded in bytes as well as in records (InstanceContext.
// BatchBytes). The bytes of a record are estimated from its type, by a sizer
// built once per type by reflection:
//
//   - A type without indirect parts (no string, slice, map, pointer or
//     interface inside) has a static size, unsafe.Sizeof. It costs nothing per
//     record: it becomes a smaller record limit per batch.
//   - Any other type is sized per record: the value itself plus what it refers
//     to (the bytes of strings, the capacity of slices, the values behind
//     pointers and interfaces, an estimate for maps), recursively. A budget of
//     visits and a bound on depth per record bound the work on wide, deep or
//     cyclic values.
//
// Function, channel and unsafe.Pointer fields count as one word: what they
// refer to is not the record's.

// sizeBudget bounds the pointers, interfaces and map entries followed to size
// one record, and sizeDepth how deep the sizer goes through pointers,
// interfaces, slices and maps, so that a cyclic, very wide or very deep
// value costs bounded work and stack; what lies beyond is not counted.
const (
	sizeBudget = 1 << 16
	sizeDepth  = 64
)

// sizer estimates the bytes of values of one type.
type sizer struct {
	fixed  int  // the bytes of the value itself: unsafe.Sizeof
	direct bool // an interface holds the value in its data word: pointerShaped
	// more returns the bytes the value at p refers to and what is left of
	// budget, going at most depth levels further through pointers,
	// interfaces, slices and maps; it is nil for types without indirect
	// parts.
	more func(p unsafe.Pointer, budget, depth int) (bytes, left int)
	// flat says that all the value refers to is the bytes of a few strings
	// and the backing arrays of a few slices of elements without indirect
	// parts (a string, a []byte, a struct of such fields): recordSize adds
	// them up itself, with no call per record. The offsets are in the
	// sizer, so that a copy of it holds all it reads.
	flat bool
	// oneString says that the value is flat with one string and no slice,
	// at offset str.
	oneString bool
	str       uintptr
	strs      []uintptr   // flat: the offsets of the strings, in strBuf
	slices    []flatSlice // flat: the slices, in sliceBuf
	strBuf    [flatFields]uintptr
	sliceBuf  [flatFields]flatSlice
}

// flatFields is the most strings, and the most slices, of a flat sizer.
const flatFields = 4

// flatSlice is a slice at offset whose elements of elem bytes have no
// indirect parts: it refers to its backing array, cap*elem bytes.
type flatSlice struct {
	offset uintptr
	elem   int
}

// recordSize estimates the bytes of the value at p, which must point to a
// value of the sizer's type. A value whose only indirect part is one
// string, the usual record with a name or a payload, is sized inline.
func (s *sizer) recordSize(p unsafe.Pointer) int {
	if s.oneString {
		return s.fixed + len(*(*string)(unsafe.Add(p, s.str)))
	}
	return s.walk(p)
}

// walk is recordSize for the other types.
func (s *sizer) walk(p unsafe.Pointer) int {
	if s.flat {
		n := s.fixed
		for _, off := range s.strs {
			n += len(*(*string)(unsafe.Add(p, off)))
		}
		for _, f := range s.slices {
			if h := (*sliceHeader)(unsafe.Add(p, f.offset)); h.data != nil {
				n += h.cap * f.elem
			}
		}
		return n
	}
	if s.more == nil {
		return s.fixed
	}
	n, _ := s.more(p, sizeBudget, sizeDepth)
	return s.fixed + n
}

// copyTo copies s to dst, pointing the copy's flat offsets at its own
// arrays.
func (s *sizer) copyTo(dst *sizer) {
	*dst = *s
	if s.flat {
		dst.strs = dst.strBuf[:len(s.strs)]
		dst.slices = dst.sliceBuf[:len(s.slices)]
	}
}

// setFlat makes s flat with the given strings and slices, when they are few
// enough.
func (s *sizer) setFlat(strs []uintptr, slices []flatSlice) {
	if len(strs) > flatFields || len(slices) > flatFields {
		return
	}
	s.flat = true
	if len(strs) == 1 && len(slices) == 0 {
		s.oneString, s.str = true, strs[0]
	}
	s.strs = s.strBuf[:copy(s.strBuf[:], strs)]
	s.slices = s.sliceBuf[:copy(s.sliceBuf[:], slices)]
}

// sizers caches a *sizer per reflect.Type.
var sizers sync.Map

// sizerOf returns the sizer of values of type t, building it on first use.
func sizerOf(t reflect.Type) *sizer {
	if s, ok := sizers.Load(t); ok {
		return s.(*sizer)
	}
	built := map[reflect.Type]*sizer{}
	s := buildSizer(t, built)
	for bt, bs := range built {
		sizers.LoadOrStore(bt, bs)
	}
	return s
}

// byteLimits returns how records of type T are bounded in a batch of at most
// batchSize records and, when batchBytes > 0, about batchBytes bytes: the
// record limit, and the function that sizes a record when the size varies
// per record (nil when the limit alone is the bound). For a type of static
// size s the limit is min(batchSize, max(1, batchBytes/s)).
func byteLimits[T any](batchSize, batchBytes int) (limit int, size func(unsafe.Pointer) int) {
	limit, s := batchLimits[T](batchSize, batchBytes)
	if s == nil {
		return limit, nil
	}
	return limit, s.recordSize
}

// batchLimits is byteLimits with the sizer itself: a copy of its own, nil
// when records are not sized one by one.
func batchLimits[T any](batchSize, batchBytes int) (limit int, own *sizer) {
	limit = max(1, batchSize)
	if batchBytes <= 0 {
		return limit, nil
	}
	s := sizerOf(reflect.TypeFor[T]())
	if s.more != nil {
		// Read per record by every task: each gets a copy of its own,
		// away from what other tasks write (see isolated).
		own = isolated[sizer]()
		s.copyTo(own)
		return limit, own
	}
	if s.fixed > 0 {
		limit = min(limit, max(1, batchBytes/s.fixed))
	}
	return limit, nil
}

// variable reports whether values of type t may refer to memory of their own:
// whether t holds a string, slice, map, pointer or interface.
func variable(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.String, reflect.Slice, reflect.Map, reflect.Pointer, reflect.Interface:
		return true
	case reflect.Array:
		return t.Len() > 0 && variable(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if variable(t.Field(i).Type) {
				return true
			}
		}
	}
	return false
}

// buildSizer returns the sizer of t. built holds the sizers made so far in
// this build, so that recursive types (a struct holding a pointer to its own
// type) refer to their own sizer instead of recursing for ever.
func buildSizer(t reflect.Type, built map[reflect.Type]*sizer) *sizer {
	if s, ok := built[t]; ok {
		return s
	}
	if s, ok := sizers.Load(t); ok {
		return s.(*sizer)
	}
	s := &sizer{fixed: int(t.Size()), direct: pointerShaped(t)}
	built[t] = s
	if !variable(t) {
		return s
	}
	switch t.Kind() {
	case reflect.String:
		s.more = sizeString
		s.setFlat([]uintptr{0}, nil)
	case reflect.Slice:
		s.more = sliceSizer(t, built)
		if !variable(t.Elem()) {
			s.setFlat(nil, []flatSlice{{0, int(t.Elem().Size())}})
		}
	case reflect.Pointer:
		s.more = pointerSizer(t, built)
	case reflect.Map:
		s.more = mapSizer(t, built)
	case reflect.Interface:
		s.more = interfaceSizer(t)
	case reflect.Array:
		s.more = arraySizer(t, built)
	case reflect.Struct:
		s.more = structSizer(t, built, s)
	}
	return s
}

func sizeString(p unsafe.Pointer, budget, _ int) (int, int) {
	return len(*(*string)(p)), budget
}

// sliceHeader is the memory layout of every slice.
type sliceHeader struct {
	data     unsafe.Pointer
	len, cap int
}

// sliceSizer counts the slice's backing array to its capacity, and what its
// elements refer to up to its length.
func sliceSizer(t reflect.Type, built map[reflect.Type]*sizer) func(unsafe.Pointer, int, int) (int, int) {
	elem := buildSizer(t.Elem(), built)
	es := int(t.Elem().Size())
	return func(p unsafe.Pointer, budget, depth int) (int, int) {
		h := (*sliceHeader)(p)
		if h.data == nil {
			return 0, budget
		}
		n := h.cap * es
		if elem.more == nil {
			return n, budget
		}
		if depth <= 0 {
			return n, budget
		}
		for i := 0; i < h.len && budget > 0; i++ {
			var m int
			m, budget = elem.more(unsafe.Add(h.data, i*es), budget, depth-1)
			n += m
		}
		return n, budget
	}
}

// pointerSizer counts the value behind a non-nil pointer, spending one unit
// of budget.
func pointerSizer(t reflect.Type, built map[reflect.Type]*sizer) func(unsafe.Pointer, int, int) (int, int) {
	elem := buildSizer(t.Elem(), built)
	return func(p unsafe.Pointer, budget, depth int) (int, int) {
		q := *(*unsafe.Pointer)(p)
		if q == nil || budget <= 0 || depth <= 0 {
			return 0, budget
		}
		budget--
		if elem.more == nil {
			return elem.fixed, budget
		}
		m, budget := elem.more(q, budget, depth-1)
		return elem.fixed + m, budget
	}
}

// arraySizer adds what each element refers to.
func arraySizer(t reflect.Type, built map[reflect.Type]*sizer) func(unsafe.Pointer, int, int) (int, int) {
	elem := buildSizer(t.Elem(), built)
	es, n := int(t.Elem().Size()), t.Len()
	return func(p unsafe.Pointer, budget, depth int) (int, int) {
		total := 0
		for i := 0; i < n && budget > 0; i++ {
			var m int
			m, budget = elem.more(unsafe.Add(p, i*es), budget, depth)
			total += m
		}
		return total, budget
	}
}

// structSizer adds what each field with indirect parts refers to. String
// fields and slices of elements without indirect parts, the common cases,
// are sized inline rather than through their own sizers; a struct with no
// other indirect fields makes s flat.
func structSizer(t reflect.Type, built map[reflect.Type]*sizer, s *sizer) func(unsafe.Pointer, int, int) (int, int) {
	type field struct {
		offset uintptr
		s      *sizer
	}
	var strs []uintptr
	var flats []flatSlice
	var fields []field
	for i := range t.NumField() {
		f := t.Field(i)
		switch {
		case !variable(f.Type):
		case f.Type.Kind() == reflect.String:
			strs = append(strs, f.Offset)
		case f.Type.Kind() == reflect.Slice && !variable(f.Type.Elem()):
			flats = append(flats, flatSlice{f.Offset, int(f.Type.Elem().Size())})
		default:
			fields = append(fields, field{f.Offset, buildSizer(f.Type, built)})
		}
	}
	if len(fields) == 0 {
		s.setFlat(strs, flats)
	}
	return func(p unsafe.Pointer, budget, depth int) (int, int) {
		total := 0
		for _, off := range strs {
			total += len(*(*string)(unsafe.Add(p, off)))
		}
		for _, f := range flats {
			if h := (*sliceHeader)(unsafe.Add(p, f.offset)); h.data != nil {
				total += h.cap * f.elem
			}
		}
		for _, f := range fields {
			var m int
			m, budget = f.s.more(unsafe.Add(p, f.offset), budget, depth)
			total += m
		}
		return total, budget
	}
}

// mapOverhead is an estimate of a map's own header, and mapSlotOverhead of
// its bytes per entry besides the key and the value (control bytes and free
// slots: Go's maps are at most 7/8 full).
const (
	mapOverhead     = 48
	mapSlotOverhead = 2
)

// mapSizer estimates a map's table from its length, and adds what its keys
// and values refer to when they have indirect parts. Sizing those iterates
// the map by reflection, one unit of budget per entry; the scratch values it
// needs are recycled, so that it allocates nothing in the steady state.
func mapSizer(t reflect.Type, built map[reflect.Type]*sizer) func(unsafe.Pointer, int, int) (int, int) {
	key, elem := buildSizer(t.Key(), built), buildSizer(t.Elem(), built)
	slot := (key.fixed + elem.fixed) * 8 / 7
	type scratch struct {
		it   reflect.MapIter
		k, v reflect.Value
	}
	pool := sync.Pool{New: func() any {
		return &scratch{k: reflect.New(t.Key()).Elem(), v: reflect.New(t.Elem()).Elem()}
	}}
	return func(p unsafe.Pointer, budget, depth int) (int, int) {
		if *(*unsafe.Pointer)(p) == nil {
			return 0, budget
		}
		m := reflect.NewAt(t, p).Elem()
		n := mapOverhead + m.Len()*(slot+mapSlotOverhead)
		if key.more == nil && elem.more == nil || depth <= 0 {
			return n, budget
		}
		sc := pool.Get().(*scratch)
		sc.it.Reset(m)
		for budget > 0 && sc.it.Next() {
			budget--
			var k int
			if key.more != nil {
				sc.k.SetIterKey(&sc.it)
				k, budget = key.more(sc.k.Addr().UnsafePointer(), budget, depth-1)
				n += k
			}
			if elem.more != nil {
				sc.v.SetIterValue(&sc.it)
				k, budget = elem.more(sc.v.Addr().UnsafePointer(), budget, depth-1)
				n += k
			}
		}
		sc.it.Reset(reflect.Value{})
		sc.k.SetZero()
		sc.v.SetZero()
		pool.Put(sc)
		return n, budget
	}
}

// interfaceSizer counts the dynamic value of a non-nil interface, spending
// one unit of budget. An interface is two words, a type and a data word; the
// data word is the value itself for pointer-shaped types and points to the
// value otherwise.
func interfaceSizer(t reflect.Type) func(unsafe.Pointer, int, int) (int, int) {
	return func(p unsafe.Pointer, budget, depth int) (int, int) {
		v := reflect.NewAt(t, p).Elem()
		if v.IsNil() || budget <= 0 || depth <= 0 {
			return 0, budget
		}
		budget--
		dt := v.Elem().Type()
		s := sizerOf(dt)
		data := unsafe.Add(p, unsafe.Sizeof(uintptr(0)))
		n := 0
		if !s.direct {
			data = *(*unsafe.Pointer)(data)
			n = s.fixed
		}
		if s.more == nil {
			return n, budget
		}
		m, budget := s.more(data, budget, depth-1)
		return n + m, budget
	}
}

// directMarker is stored in a value to see where an interface keeps it.
var directMarker byte

// pointerShaped reports whether the runtime stores a value of type t in an
// interface's data word itself rather than behind a pointer (pointers, maps,
// channels, functions, and structs or arrays of one such element). Rather
// than restate the compiler's rule, it asks the runtime: it stores a marker
// pointer in a value of t, converts the value to an interface and looks at
// the data word.
func pointerShaped(t reflect.Type) bool {
	if t.Size() != unsafe.Sizeof(uintptr(0)) {
		return false
	}
	v := reflect.New(t)
	*(*unsafe.Pointer)(v.UnsafePointer()) = unsafe.Pointer(&directMarker)
	x := v.Elem().Interface()
	return (*[2]unsafe.Pointer)(unsafe.Pointer(&x))[1] == unsafe.Pointer(&directMarker)
}
